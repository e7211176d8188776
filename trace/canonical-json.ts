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
