import type { HeaderPairs } from './exchange.ts'

/** Case-insensitive lookup of the first header value. */
export function headerValue(headers: ReadonlyArray<readonly [string, string]>, name: string): string | undefined {
  const lower = name.toLowerCase()
  for (const [k, v] of headers) if (k.toLowerCase() === lower) return v
  return undefined
}

/**
 * Raw header lists as Node and undici hand them over (`[name, value, name, value, ...]`, strings or
 * Buffers) as ordered pairs. Buffers decode as latin1, the way HTTP/1.1 header bytes map to strings in
 * Node, so a value written back out is the same bytes.
 */
export function headerPairsFromRaw(raw: ReadonlyArray<string | Uint8Array> | null | undefined): HeaderPairs {
  const out: HeaderPairs = []
  if (!raw) return out
  const text = (v: string | Uint8Array) => (typeof v === 'string' ? v : Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('latin1'))
  for (let i = 0; i + 1 < raw.length; i += 2) out.push([text(raw[i] as string | Uint8Array), text(raw[i + 1] as string | Uint8Array)])
  return out
}

/**
 * Hop-by-hop fields (RFC 9110 §7.6.1) plus proxy credentials: they describe one connection, not the
 * exchange, so a capture path never forwards or records them. `expect` is dropped too: both paths
 * buffer request bodies before forwarding, so nobody waits for a 100-continue.
 */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'expect',
])

const HOP_BY_HOP_LENGTHS = new Set([...HOP_BY_HOP].map((name) => name.length))

/** Removes hop-by-hop fields, including any the `Connection` field names. Returns the input when none are present. */
export function stripHopByHop(headers: HeaderPairs): HeaderPairs {
  let named: Set<string> | undefined
  let found = false
  for (const [k, v] of headers) {
    // Length first: most names (host, content-type, ...) are ruled out without a lowercase copy.
    if (!HOP_BY_HOP_LENGTHS.has(k.length)) continue
    const lower = k.toLowerCase()
    if (!HOP_BY_HOP.has(lower)) continue
    found = true
    if (lower === 'connection') {
      named ??= new Set()
      for (const token of v.split(',')) named.add(token.trim().toLowerCase())
    }
  }
  if (!found) return headers
  return headers.filter(([k]) => {
    const lower = k.toLowerCase()
    return !HOP_BY_HOP.has(lower) && !named?.has(lower)
  })
}
