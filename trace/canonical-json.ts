import canonicalizeModule from 'canonicalize'

// canonicalize ships CJS typings with `export default`; under NodeNext the callable is the default.
const canonicalize = canonicalizeModule as unknown as (value: unknown) => string | undefined

/**
 * RFC 8785 (JCS) canonical JSON: sorted keys, no whitespace, ECMAScript number formatting.
 * Everything that is hashed goes through here so equal values always hash equal.
 */
export function canonicalJson(value: unknown): string {
  const out = canonicalize(value)
  if (out === undefined) throw new TypeError('canonicalJson: value is not representable as JSON')
  return out
}

/**
 * A copy of a JSON value with object keys sorted at every depth and undefined members dropped: the
 * stable layout of files people review (manifests, trace files); unlike canonicalJson it keeps formatting
 * free for the caller.
 */
export function sortKeysDeep(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeysDeep)
  if (value === null || typeof value !== 'object') return value
  const out: Record<string, unknown> = {}
  for (const k of Object.keys(value).sort()) {
    const v = (value as Record<string, unknown>)[k]
    if (v !== undefined) out[k] = sortKeysDeep(v)
  }
  return out
}
