/**
 * Diff of two traces: aligns their exchanges conservatively, then reports what changed, in the order it
 * would have been observed, with JSON-path details inside bodies and attribution to fork patches.
 *
 * Alignment, most certain first:
 *  1. exact request identity + occurrence (the same rule replay uses);
 *  2. method + URL, only inside the same gap between pairs already fixed, and only when that gap holds as
 *     many unmatched A as B exchanges of that method + URL (then in order). Anything else stays unmatched:
 *     an ambiguous pair is reported as missing + added, never guessed.
 * Identity pairs that cross each other are reported as order_changed (the longest in-order run is kept).
 * @example
 * const d = diffTraces(main, branch)
 * console.log(formatDiffText(d)) // first divergence: GET https://crm.test/customers/42 #0 response $.active: true → false
 */
import { bodyBytes } from './body.ts'
import { decodeContentEncoding } from './content-encoding.ts'
import { alignExchanges } from './diff-align.ts'
import { attribution, type Comparer, compareOutcomes, compareRequests, decodeBody, safeNormalize, withFaults } from './diff-compare.ts'
import { firstNote, formatDetail, formatDiffText, formatFaultNote, make } from './diff-format.ts'
import {
  type AlignedPair,
  DEFAULT_VOLATILE_HEADERS,
  DEFAULT_VOLATILE_KEYS,
  DIFF_FORMAT_VERSION,
  DIFFERENCE_KINDS,
  type DifferenceKind,
  type DiffOptions,
  type TraceDiff,
  type TraceDifference,
} from './diff-types.ts'
import type { Exchange, Trace } from './exchange.ts'
import { canonicalJson } from './json-codec.ts'
import { parseJsonPath } from './json-path.ts'
import { collectModelIds, collectStrings, withRoles } from './model-ids.ts'
import { computeIdentity, type IdentityOptions } from './request-identity.ts'

interface Side {
  trace: Trace
  ids: string[]
  mu: string[]
  labels: string[]
  /** Model-made ids by value → role (empty with `volatile: false`). */
  roles: Map<string, string>
}

/** Compares trace A (before) with trace B (after). Pure. */
export function diffTraces(a: Trace, b: Trace, options: DiffOptions = {}): TraceDiff {
  // Validate every path up front: a typo must fail loudly, not silently ignore nothing.
  for (const p of [...(options.ignorePaths ?? []), ...(options.identity?.ignoreBodyPaths ?? [])]) parseJsonPath(p)
  const volatile = options.volatile ?? true
  const keys = new Set([...(volatile ? DEFAULT_VOLATILE_KEYS : []), ...(options.ignoreKeys ?? [])])
  const headers = new Set([...(volatile ? DEFAULT_VOLATILE_HEADERS : []), ...(options.ignoreHeaders ?? []).map((h) => h.toLowerCase())])
  const A = side(a, options.identity, volatile)
  const B = side(b, options.identity, volatile)
  const cmp: Comparer = {
    keys,
    paths: options.ignorePaths ?? [],
    headers,
    volatile,
    max: options.maxDetails ?? 20,
    rolesA: A.roles,
    rolesB: B.roles,
  }

  const { rows, movedB } = alignExchanges(A, B)

  const differences: TraceDifference[] = []
  for (const row of rows) {
    const ax = row.a === undefined ? undefined : (a.exchanges[row.a] as Exchange)
    const bx = row.b === undefined ? undefined : (b.exchanges[row.b] as Exchange)
    if (ax && !bx) {
      differences.push(withFaults(make('exchange_missing', A.labels[row.a as number] as string, ax.seq, undefined, [], undefined), ax, undefined))
      continue
    }
    if (bx && !ax) {
      differences.push(withFaults(make('exchange_added', B.labels[row.b as number] as string, undefined, bx.seq, [], undefined), undefined, bx))
      continue
    }
    if (!ax || !bx) continue
    const label = A.labels[row.a as number] as string
    if (movedB.has(row.b as number)) {
      differences.push(make('order_changed', label, ax.seq, bx.seq, [{ side: 'request', field: 'position', before: row.a, after: row.b }], undefined))
    }
    const req = compareRequests(a, ax, b, bx, cmp)
    if (req.length > 0) differences.push(make('request_changed', label, ax.seq, bx.seq, req.slice(0, cmp.max), undefined))
    const out = compareOutcomes(a, ax, b, bx, cmp)
    if (out) differences.push(withFaults(make(out.kind, label, ax.seq, bx.seq, out.details.slice(0, cmp.max), attribution(a, ax, b, bx)), ax, bx))
  }

  const counts = Object.fromEntries(DIFFERENCE_KINDS.map((k) => [k, 0])) as Record<DifferenceKind, number>
  for (const d of differences) counts[d.kind]++
  const alignment: AlignedPair[] = rows.map((r) => {
    const p: AlignedPair = {}
    if (r.a !== undefined) p.a = (a.exchanges[r.a] as Exchange).seq
    if (r.b !== undefined) p.b = (b.exchanges[r.b] as Exchange).seq
    if (r.by) p.by = r.by
    return p
  })
  const first = differences[0]
  return {
    format: 'tool-replay-diff',
    version: DIFF_FORMAT_VERSION,
    a: { name: a.meta.name, exchanges: a.exchanges.length },
    b: { name: b.meta.name, exchanges: b.exchanges.length },
    equal: differences.length === 0,
    ...(first ? { first } : {}),
    counts,
    differences,
    alignment,
    ignored: { keys: [...keys].sort(), paths: [...cmp.paths], headers: [...headers].sort(), timestamps: volatile, generatedIds: volatile },
  }
}

function side(trace: Trace, identity: IdentityOptions | undefined, volatile: boolean): Side {
  const ids: string[] = []
  const mu: string[] = []
  const labels: string[] = []
  const seen = new Map<string, number>()
  const roles = volatile ? modelIdRoles(trace) : new Map<string, string>()
  for (const x of trace.exchanges) {
    const body = x.request.body ? withRolesBytes(bodyBytes(trace, x.request.body), trace, x, roles) : null
    ids.push(computeIdentity({ method: x.request.method, url: x.request.url, headers: x.request.headers, body }, identity).key)
    const key = `${x.request.method.toUpperCase()} ${safeNormalize(x.request.url)}`
    mu.push(key)
    const n = seen.get(key) ?? 0
    seen.set(key, n + 1)
    labels.push(`${x.request.method.toUpperCase()} ${x.request.url} #${n}`)
  }
  return { trace, ids, mu, labels, roles }
}

/** The ids the model made in a trace's responses, by value, named by role in the order they first appear. */
function modelIdRoles(trace: Trace): Map<string, string> {
  const roles = new Map<string, string>()
  const sent = new Set<string>()
  for (const x of trace.exchanges) {
    const req = decodeBody(trace, x.request.body, x.request.headers)
    if (req.kind === 'json' || req.kind === 'events') collectStrings(req.value, sent)
    const res = x.outcome.kind === 'response' ? x.outcome.response : x.outcome.error.partial
    if (!res) continue
    const decoded = decodeBody(trace, res.body, res.headers)
    if (decoded.kind === 'json' || decoded.kind === 'events') collectModelIds(decoded.value, sent, roles)
  }
  return roles
}

/** A JSON request body with its model ids replaced by their roles (for alignment by identity); other bodies as they are. */
function withRolesBytes(bytes: Uint8Array, trace: Trace, x: Exchange, roles: ReadonlyMap<string, string>): Uint8Array {
  if (roles.size === 0 || !x.request.body) return bytes
  const decoded = decodeBody(trace, x.request.body, x.request.headers)
  if (decoded.kind !== 'json') return bytes
  const replaced = withRoles(decoded.value, roles)
  return replaced === decoded.value ? bytes : new TextEncoder().encode(canonicalJson(replaced))
}

export type { AlignedPair, Attribution, DiffDetail, DifferenceKind, DiffOptions, FaultNote, TraceDiff, TraceDifference } from './diff-types.ts'
export { DEFAULT_VOLATILE_HEADERS, DEFAULT_VOLATILE_KEYS, DIFF_FORMAT_VERSION, DIFF_OPTIONS, DIFFERENCE_KINDS } from './diff-types.ts'
export { decodeContentEncoding, firstNote, formatDetail, formatDiffText, formatFaultNote }
