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
