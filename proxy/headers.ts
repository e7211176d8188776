import type { HeaderPairs } from '../trace/index.ts'

/**
 * Hop-by-hop fields (RFC 9110 §7.6.1) plus the proxy's own: they describe one connection, not the
 * exchange, so they are never forwarded. `expect` is dropped too: the proxy buffers request bodies
 * and answers 100-continue itself.
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

/** Pairs as the flat [k, v, k, v] array `res.writeHead` and undici accept. */
export function flatten(headers: HeaderPairs): string[] {
  const out: string[] = []
  for (const [k, v] of headers) out.push(k, v)
  return out
}

/** True when the pairs carry the field (case-insensitive). */
export function hasHeader(headers: HeaderPairs, name: string): boolean {
  const lower = name.toLowerCase()
  return headers.some(([k]) => k.toLowerCase() === lower)
}
