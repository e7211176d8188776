import type { HeaderPairs } from '../trace/index.ts'

/** Hop-by-hop fields are stripped by the one rule both capture paths share (trace/header-pairs.ts). */
export { stripHopByHop } from '../trace/index.ts'

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
