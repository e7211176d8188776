/**
 * Values a model (or its API) made and the app echoes back: tool call ids (`call_…`, `toolu_…`, `tooluse_…`),
 * response and item ids, encrypted reasoning and thought signatures. They differ on every run, so two
 * recordings of one run compare them by their role instead of their value: the first such value a trace's
 * responses introduce is `⟨model id 1⟩`, the second `⟨model id 2⟩`, and so on, wherever it then appears
 * (in the next request's tool result, say). An app that answers the second call with the first call's id
 * still differs: `⟨model id 1⟩ → ⟨model id 2⟩`.
 * @note Only values whose first appearance in the trace is in a response count: a value the app sent first
 * (its own request id, a user id the API echoes) is the app's, compared by value.
 */
import { isExactNumber } from './json-codec.ts'

/** Keys whose string values a response introduces as the model's: ids and opaque reasoning the app sends back. */
const OPAQUE_KEYS = new Set(['encrypted_content', 'signature', 'thoughtSignature', 'thought_signature'])
/** Shorter values ("0", "a1") are too likely to occur by chance elsewhere. */
const MIN_LENGTH = 6

function isIdKey(key: string): boolean {
  return key === 'id' || key.endsWith('_id') || /[a-z]Id$/.test(key) || OPAQUE_KEYS.has(key)
}

/** Every string in a JSON value (for the values the app sent in a request). */
export function collectStrings(value: unknown, into: Set<string>): void {
  if (typeof value === 'string') into.add(value)
  else if (Array.isArray(value)) for (const v of value) collectStrings(v, into)
  else if (value !== null && typeof value === 'object' && !isExactNumber(value)) for (const v of Object.values(value)) collectStrings(v, into)
}

/** Assigns roles to the id-like values of a response body, in document order, skipping values the app sent first. */
export function collectModelIds(value: unknown, sent: ReadonlySet<string>, roles: Map<string, string>): void {
  const visit = (v: unknown, key: string | undefined) => {
    if (typeof v === 'string') {
      if (key !== undefined && isIdKey(key) && v.length >= MIN_LENGTH && !sent.has(v) && !roles.has(v)) roles.set(v, `⟨model id ${roles.size + 1}⟩`)
    } else if (Array.isArray(v)) for (const item of v) visit(item, key)
    else if (v !== null && typeof v === 'object' && !isExactNumber(v)) for (const [k, item] of Object.entries(v)) visit(item, k)
  }
  visit(value, undefined)
}

/** A copy of a JSON value with every string that is a model id replaced by its role. Returns the value itself when none is. */
export function withRoles(value: unknown, roles: ReadonlyMap<string, string>): unknown {
  if (roles.size === 0) return value
  if (typeof value === 'string') return roles.get(value) ?? value
  if (Array.isArray(value)) {
    const out = value.map((v) => withRoles(v, roles))
    return out.some((v, i) => v !== value[i]) ? out : value
  }
  if (value !== null && typeof value === 'object' && !isExactNumber(value)) {
    let changed = false
    const out: Record<string, unknown> = {}
    for (const [k, v] of Object.entries(value)) {
      out[k] = withRoles(v, roles)
      if (out[k] !== v) changed = true
    }
    return changed ? out : value
  }
  return value
}
