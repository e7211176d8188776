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
import { bodyBytes, tryUtf8 } from './body.ts'
import { decodeContentEncoding } from './content-encoding.ts'
import { decodeEventStream, eventStreamFramesAsJson, isAwsEventStream } from './eventstream.ts'
import type { BodyRef, Exchange, FaultKind, FaultPhase, HeaderPairs, Trace } from './exchange.ts'
import { upstreamPhrase } from './fault-label.ts'
import { grpcMessageViews, isGrpcContentType } from './grpc-frames.ts'
import { headerValue } from './header-pairs.ts'
import { canonicalJson, parseJson } from './json-codec.ts'
import { diffJson, parseJsonPath, replaceAtJsonPath } from './json-path.ts'
import { collectModelIds, collectStrings, withRoles } from './model-ids.ts'
import { isNdjson, parseNdjson } from './ndjson.ts'
import { computeIdentity, type IdentityOptions, normalizeUrl } from './request-identity.ts'
import { isEventStream, parseSse, sseEventsAsJson } from './sse.ts'

/** Version of the JSON diff output (`tr-proxy diff --format json`). Bumped on any breaking change. */
export const DIFF_FORMAT_VERSION = 1 as const

export type DifferenceKind =
  | 'request_changed'
  | 'response_changed'
  | 'status_changed'
  | 'error_changed'
  | 'exchange_missing'
  | 'exchange_added'
  | 'order_changed'

export const DIFFERENCE_KINDS: readonly DifferenceKind[] = [
  'request_changed',
  'response_changed',
  'status_changed',
  'error_changed',
  'exchange_missing',
  'exchange_added',
  'order_changed',
]

/** One fact inside a difference: where, and the value before (in A) and after (in B). */
export interface DiffDetail {
  side: 'request' | 'response'
  field: 'url' | 'header' | 'body' | 'events' | 'status' | 'outcome' | 'trailer' | 'position'
  /** Header name, or the JSON path inside the body / event list. */
  path?: string
  before?: unknown
  after?: unknown
}

/** A difference that touches an exchange a fork patch produced. Attribution, not a claim of root cause. */
export interface Attribution {
  trace: 'a' | 'b'
  seq: number
  patchId: string
  /** The canonical patch spec, when the trace's lineage lists it. */
  spec?: string
}

/** An injected fault on an exchange a difference touches: what the app was given is not what the upstream did. */
export interface FaultNote {
  trace: 'a' | 'b'
  seq: number
  rule: string
  fault: FaultKind
  phase: FaultPhase
  /** "upstream 201", "not forwarded". */
  upstream: string
}

export interface TraceDifference {
  kind: DifferenceKind
  /** "GET https://crm.test/customers/42 #0": method, URL and occurrence (in A; in B for added exchanges). */
  exchange: string
  /** Sequence numbers in A and B, when present there. */
  a?: number
  b?: number
  details: DiffDetail[]
  attribution?: Attribution[]
  /** Faults injected into the exchanges involved (a faulted run against a clean one, say). */
  faults?: FaultNote[]
  /** One line: the exchange and its first detail. */
  summary: string
}

/** How two exchanges were paired. */
export interface AlignedPair {
  a?: number
  b?: number
  by?: 'identity' | 'method-url'
}

/** The result of `diffTraces`. Stable JSON (see DIFF_FORMAT_VERSION). */
export interface TraceDiff {
  format: 'tool-replay-diff'
  version: typeof DIFF_FORMAT_VERSION
  a: { name: string; exchanges: number }
  b: { name: string; exchanges: number }
  equal: boolean
  /** The first observable divergence, in observation order; absent when equal. */
  first?: TraceDifference
  differences: TraceDifference[]
  counts: Record<DifferenceKind, number>
  alignment: AlignedPair[]
  /** What was ignored as volatile, so a reader knows what "equal" meant. */
  ignored: { keys: string[]; paths: string[]; headers: string[]; timestamps: boolean; generatedIds: boolean }
}

/** Options for `diffTraces`. Defaults ignore volatile fields; `volatile: false` compares everything. */
export interface DiffOptions {
  /**
   * Ignore the default volatile fields (dates, request ids, generated ids, `created`) and compare the ids a model
   * made by their role (trace/model-ids.ts) rather than their value. Default true.
   */
  volatile?: boolean
  /** Extra JSON paths removed from every JSON body (request and response) before comparing. Wildcards allowed. */
  ignorePaths?: string[]
  /** Extra object keys ignored at any depth of JSON bodies. */
  ignoreKeys?: string[]
  /** Extra header names ignored (request and response). */
  ignoreHeaders?: string[]
  /** Identity options used for alignment (same meaning as in replay). */
  identity?: IdentityOptions
  /** Details kept per difference. Default 20. */
  maxDetails?: number
}

/** Object keys treated as volatile at any depth, by default. */
export const DEFAULT_VOLATILE_KEYS: readonly string[] = [
  'created',
  'created_at',
  'createdAt',
  'updated_at',
  'updatedAt',
  'timestamp',
  'date',
  'request_id',
  'requestId',
  'system_fingerprint',
  // OpenAI stream padding: random per response, it hides token lengths and carries no meaning.
  'obfuscation',
  // Timings a provider reports in its body: Ollama's (ns) and Bedrock's metrics.
  'total_duration',
  'load_duration',
  'prompt_eval_duration',
  'eval_duration',
  'latencyMs',
]

/** Headers treated as volatile by default: per-request ids, clocks, transport framing. */
export const DEFAULT_VOLATILE_HEADERS: readonly string[] = [
  'date',
  'age',
  'expires',
  'last-modified',
  'etag',
  'x-request-id',
  'request-id',
  'x-amzn-requestid',
  'x-amz-request-id',
  'cf-ray',
  'server-timing',
  'x-runtime',
  'openai-processing-ms',
  'x-envoy-upstream-service-time',
  'x-amzn-bedrock-invocation-latency',
  'user-agent',
  // SDK and runtime versions, which differ between machines, not between runs of the app.
  'x-amz-user-agent',
  'x-goog-api-client',
  // AWS SigV4 and the AWS SDK's per-call headers: a clock, a session token, a body digest, an invocation id, the attempt.
  'x-amz-date',
  'x-amz-security-token',
  'x-amz-content-sha256',
  'amz-sdk-invocation-id',
  'amz-sdk-request',
  'authorization',
  'proxy-authorization',
  'cookie',
  'set-cookie',
  'traceparent',
  'tracestate',
  'idempotency-key',
  // MCP Streamable HTTP: the session id a server mints (and the client echoes on every request after).
  'mcp-session-id',
  'host',
  'connection',
  'keep-alive',
]
const VOLATILE_HEADER_PREFIXES = ['x-stainless-', 'x-ratelimit-', 'anthropic-ratelimit-']
// Compared after decoding, so transport encoding and framing never count as a difference. What encodings a
// client accepts is framing too: paths and clients offer different lists for the same request.
const FRAMING_HEADERS = ['content-length', 'content-encoding', 'transfer-encoding', 'accept-encoding']

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

  // Pass 1: identity + occurrence.
  const aMatch = new Array<number | undefined>(a.exchanges.length).fill(undefined)
  const bMatch = new Array<number | undefined>(b.exchanges.length).fill(undefined)
  const byKey = new Map<string, number[]>()
  occurrences(B.ids).forEach((k, j) => {
    byKey.set(k, [j])
  })
  occurrences(A.ids).forEach((k, i) => {
    const j = byKey.get(k)?.[0]
    if (j !== undefined) {
      aMatch[i] = j
      bMatch[j] = i
    }
  })
  // The longest run of identity pairs in the same order anchors everything; the rest moved.
  const identityPairs: Array<[number, number]> = []
  aMatch.forEach((j, i) => {
    if (j !== undefined) identityPairs.push([i, j])
  })
  const anchors = longestIncreasing(identityPairs)
  const anchorSet = new Set(anchors.map(([i]) => i))
  // Moved pairs stay paired (never reported as missing + added) but do not anchor gaps.
  const moved = identityPairs.filter(([i]) => !anchorSet.has(i))
  const by = new Map<number, 'identity' | 'method-url'>()
  for (const [i] of identityPairs) by.set(i, 'identity')

  // Pass 2: method + URL inside each gap between anchors, only when unambiguous.
  const gaps = gapsOf(anchors, a.exchanges.length, b.exchanges.length)
  for (const g of gaps) {
    const groupsA = new Map<string, number[]>()
    const groupsB = new Map<string, number[]>()
    for (let i = g.a0; i < g.a1; i++) if (aMatch[i] === undefined) push(groupsA, A.mu[i] as string, i)
    for (let j = g.b0; j < g.b1; j++) if (bMatch[j] === undefined) push(groupsB, B.mu[j] as string, j)
    for (const [key, is] of groupsA) {
      const js = groupsB.get(key)
      if (!js || js.length !== is.length) continue
      is.forEach((i, n) => {
        const j = js[n] as number
        aMatch[i] = j
        bMatch[j] = i
        by.set(i, 'method-url')
      })
    }
  }

  // Rows in observation order: each gap's missing A, then its added/moved B, then the anchor that closes it.
  const rows: AlignedPair[] = []
  const movedB = new Set(moved.map(([, j]) => j))
  for (const g of gaps) {
    for (let i = g.a0; i < g.a1; i++) {
      const j = aMatch[i]
      if (j === undefined) rows.push({ a: i })
    }
    // B order inside a gap: pass-2 pairs, added exchanges and moved pairs where B saw them.
    for (let j = g.b0; j < g.b1; j++) {
      const i = bMatch[j]
      if (i === undefined) rows.push({ b: j })
      else if (!anchorSet.has(i)) rows.push({ a: i, b: j, by: by.get(i) as 'identity' | 'method-url' })
    }
    if (g.anchor) rows.push({ a: g.anchor[0], b: g.anchor[1], by: 'identity' })
  }

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

function safeNormalize(url: string): string {
  try {
    return normalizeUrl(url)
  } catch {
    return url
  }
}

/** Keys suffixed with their occurrence: "k#0", "k#1", ... */
function occurrences(keys: string[]): string[] {
  const n = new Map<string, number>()
  return keys.map((k) => {
    const i = n.get(k) ?? 0
    n.set(k, i + 1)
    return `${k}#${i}`
  })
}

function push(m: Map<string, number[]>, k: string, v: number): void {
  const list = m.get(k)
  if (list) list.push(v)
  else m.set(k, [v])
}

/** Longest subsequence of pairs (sorted by A index) whose B indexes increase; ties keep the earliest. */
function longestIncreasing(pairs: Array<[number, number]>): Array<[number, number]> {
  const tails: number[] = []
  const prev = new Array<number>(pairs.length).fill(-1)
  for (let k = 0; k < pairs.length; k++) {
    const bj = (pairs[k] as [number, number])[1]
    let lo = 0
    let hi = tails.length
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if ((pairs[tails[mid] as number] as [number, number])[1] < bj) lo = mid + 1
      else hi = mid
    }
    if (lo > 0) prev[k] = tails[lo - 1] as number
    tails[lo] = k
  }
  const out: Array<[number, number]> = []
  let k = tails.length > 0 ? (tails[tails.length - 1] as number) : -1
  while (k !== -1) {
    out.push(pairs[k] as [number, number])
    k = prev[k] as number
  }
  return out.reverse()
}

interface Gap {
  a0: number
  a1: number
  b0: number
  b1: number
  /** The anchor pair that closes this gap; none for the tail. */
  anchor?: [number, number]
}

function gapsOf(anchors: Array<[number, number]>, na: number, nb: number): Gap[] {
  const out: Gap[] = []
  let a0 = 0
  let b0 = 0
  for (const [i, j] of anchors) {
    out.push({ a0, a1: i, b0, b1: j, anchor: [i, j] })
    a0 = i + 1
    b0 = j + 1
  }
  out.push({ a0, a1: na, b0, b1: nb })
  return out
}

interface Comparer {
  keys: Set<string>
  paths: string[]
  headers: Set<string>
  volatile: boolean
  max: number
  rolesA: ReadonlyMap<string, string>
  rolesB: ReadonlyMap<string, string>
}

function compareRequests(a: Trace, ax: Exchange, b: Trace, bx: Exchange, cmp: Comparer): DiffDetail[] {
  const out: DiffDetail[] = []
  if (safeNormalize(ax.request.url) !== safeNormalize(bx.request.url))
    out.push({ side: 'request', field: 'url', before: ax.request.url, after: bx.request.url })
  out.push(...compareHeaders('request', 'header', ax.request.headers, bx.request.headers, cmp))
  out.push(...compareBodies('request', a, ax.request.body, ax.request.headers, b, bx.request.body, bx.request.headers, cmp))
  return out
}

function compareOutcomes(a: Trace, ax: Exchange, b: Trace, bx: Exchange, cmp: Comparer): { kind: DifferenceKind; details: DiffDetail[] } | undefined {
  const oa = ax.outcome
  const ob = bx.outcome
  if (oa.kind === 'response' && ob.kind === 'response') {
    const ra = oa.response
    const rb = ob.response
    const details: DiffDetail[] = []
    if (ra.status !== rb.status) details.push({ side: 'response', field: 'status', before: ra.status, after: rb.status })
    details.push(...compareHeaders('response', 'header', ra.headers, rb.headers, cmp))
    details.push(...compareBodies('response', a, ra.body, ra.headers, b, rb.body, rb.headers, cmp))
    details.push(...compareHeaders('response', 'trailer', ra.trailers, rb.trailers, cmp))
    if (details.length === 0) return undefined
    return { kind: ra.status !== rb.status ? 'status_changed' : 'response_changed', details }
  }
  const describe = (o: Exchange['outcome']) =>
    o.kind === 'response' ? `${o.response.status} ${o.response.statusText}`.trim() : `error ${o.error.code} during ${o.error.phase}`
  // Two errors are the same when code and phase are: messages carry addresses and ports.
  if (oa.kind === 'error' && ob.kind === 'error' && oa.error.code === ob.error.code && oa.error.phase === ob.error.phase) return undefined
  return { kind: 'error_changed', details: [{ side: 'response', field: 'outcome', before: describe(oa), after: describe(ob) }] }
}

function compareHeaders(s: 'request' | 'response', field: 'header' | 'trailer', ha: HeaderPairs, hb: HeaderPairs, cmp: Comparer): DiffDetail[] {
  const group = (h: HeaderPairs) => {
    const m = new Map<string, string[]>()
    for (const [k, v] of h) {
      const name = k.toLowerCase()
      if (ignoredHeader(name, cmp)) continue
      push2(m, name, v)
    }
    return m
  }
  const ma = group(ha)
  const mb = group(hb)
  const out: DiffDetail[] = []
  for (const name of [...new Set([...ma.keys(), ...mb.keys()])].sort()) {
    const va = ma.get(name)?.join(', ')
    const vb = mb.get(name)?.join(', ')
    if (va === vb) continue
    const d: DiffDetail = { side: s, field, path: name }
    if (va !== undefined) d.before = va
    if (vb !== undefined) d.after = vb
    out.push(d)
  }
  return out
}

function push2(m: Map<string, string[]>, k: string, v: string): void {
  const list = m.get(k)
  if (list) list.push(v)
  else m.set(k, [v])
}

function ignoredHeader(name: string, cmp: Comparer): boolean {
  if (FRAMING_HEADERS.includes(name) || cmp.headers.has(name)) return true
  return cmp.volatile && VOLATILE_HEADER_PREFIXES.some((p) => name.startsWith(p))
}

type Decoded =
  | { kind: 'json'; value: unknown }
  | { kind: 'events'; value: unknown[]; padded?: boolean }
  | { kind: 'text'; value: string }
  | { kind: 'bytes'; value: Uint8Array }

function decodeBody(trace: Trace, ref: BodyRef | null, headers: HeaderPairs): Decoded {
  if (!ref) return { kind: 'bytes', value: new Uint8Array(0) }
  let bytes = bodyBytes(trace, ref)
  try {
    bytes = decodeContentEncoding(bytes, headerValue(headers, 'content-encoding'))
  } catch {
    // Undecodable: compare the bytes as recorded.
    return { kind: 'bytes', value: bytes }
  }
  const type = headerValue(headers, 'content-type')
  // AWS event stream frames, compared as their events; Bedrock pads each payload with a random `p`.
  if (isAwsEventStream(type)) return { kind: 'events', value: eventStreamFramesAsJson(decodeEventStream(bytes).frames), padded: true }
  // gRPC messages, compared one by one.
  if (isGrpcContentType(type)) return { kind: 'events', value: grpcMessageViews(bytes, headers).map((m) => m.value) }
  const text = tryUtf8(bytes)
  if (text === undefined) return { kind: 'bytes', value: bytes }
  if (isEventStream(type)) return { kind: 'events', value: sseEventsAsJson(parseSse(text)) }
  if (isNdjson(type)) return { kind: 'events', value: parseNdjson(text) }
  const t = text.trimStart()
  if (t.startsWith('{') || t.startsWith('[') || /json/i.test(headerValue(headers, 'content-type') ?? '')) {
    try {
      return { kind: 'json', value: parseJson(text) }
    } catch {
      // not JSON after all
    }
  }
  return { kind: 'text', value: text }
}

function compareBodies(
  s: 'request' | 'response',
  a: Trace,
  ra: BodyRef | null,
  ha: HeaderPairs,
  b: Trace,
  rb: BodyRef | null,
  hb: HeaderPairs,
  cmp: Comparer,
): DiffDetail[] {
  if ((ra?.digest ?? null) === (rb?.digest ?? null) && headerValue(ha, 'content-encoding') === headerValue(hb, 'content-encoding')) return []
  const da = decodeBody(a, ra, ha)
  const db = decodeBody(b, rb, hb)
  if ((da.kind === 'json' && db.kind === 'json') || (da.kind === 'events' && db.kind === 'events')) {
    let va = withRoles(da.value, cmp.rolesA)
    let vb = withRoles(db.value, cmp.rolesB)
    const padded = da.kind === 'events' && db.kind === 'events' && da.padded === true && db.padded === true && cmp.volatile
    for (const p of cmp.paths) {
      // For events the paths apply to each event's data: '$.id' ignores every event's data.id.
      const path = da.kind === 'events' ? p.replace(/^\$/, '$[*].data') : p
      va = replaceAtJsonPath(va, path)
      vb = replaceAtJsonPath(vb, path)
    }
    const field = da.kind === 'events' ? 'events' : 'body'
    return diffJson(va, vb, 1000)
      .filter((d) => !isVolatile(d.path, d.before, d.after, cmp) && !(padded && /^\$\[\d+\]\.data\.p$/.test(d.path)))
      .map((d) => detail(s, field, d.path, d.before, d.after))
  }
  if (da.kind === 'text' && db.kind === 'text') {
    if (da.value === db.value) return []
    return [textDetail(s, da.value, db.value)]
  }
  const describe = (d: Decoded): unknown => {
    if (d.kind === 'bytes') return d.value.byteLength === 0 ? '(empty)' : `<${d.value.byteLength} bytes>`
    if (d.kind === 'text') return clip(d.value)
    return d.value
  }
  if (da.kind === 'bytes' && db.kind === 'bytes' && sameBytes(da.value, db.value)) return []
  return [{ side: s, field: 'body', before: describe(da), after: describe(db) }]
}

function detail(s: 'request' | 'response', field: 'body' | 'events', path: string, before: unknown, after: unknown): DiffDetail {
  const d: DiffDetail = { side: s, field, path }
  if (before !== undefined) d.before = before
  if (after !== undefined) d.after = after
  return d
}

/** First differing line of two texts, so long bodies still point at the change. */
function textDetail(s: 'request' | 'response', x: string, y: string): DiffDetail {
  const lx = x.split('\n')
  const ly = y.split('\n')
  let i = 0
  while (i < lx.length && i < ly.length && lx[i] === ly[i]) i++
  return { side: s, field: 'body', path: `line ${i + 1}`, before: clip(lx[i] ?? ''), after: clip(ly[i] ?? '') }
}

function clip(t: string): string {
  return t.length > 200 ? `${t.slice(0, 197)}...` : t
}

function sameBytes(x: Uint8Array, y: Uint8Array): boolean {
  if (x.byteLength !== y.byteLength) return false
  for (let i = 0; i < x.byteLength; i++) if (x[i] !== y[i]) return false
  return true
}

const ISO_TIME = /^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}/
const GENERATED_ID = [
  /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i, // UUID
  /^[A-Za-z]+[-_](?=[A-Za-z0-9]*\d)[A-Za-z0-9]{8,}$/, // prefixed random: chatcmpl-AbC123..., req_01H...
  /^[0-9a-f]{16,}$/i, // long hex
]

/** A difference at a volatile key, or between two timestamps or two generated ids, does not count. */
function isVolatile(path: string, before: unknown, after: unknown, cmp: Comparer): boolean {
  const key = lastKey(path)
  if (key !== undefined && cmp.keys.has(key)) return true
  if (!cmp.volatile || typeof before !== 'string' || typeof after !== 'string') return false
  if (ISO_TIME.test(before) && ISO_TIME.test(after)) return true
  if (key !== undefined && (key === 'id' || /(_id|Id)$/.test(key))) {
    return GENERATED_ID.some((re) => re.test(before)) && GENERATED_ID.some((re) => re.test(after))
  }
  return false
}

function lastKey(path: string): string | undefined {
  const m = /(?:\.([A-Za-z_$][\w$-]*)|\['((?:[^'\\]|\\.)*)'\])$/.exec(path)
  return m ? (m[1] ?? m[2]?.replace(/\\(.)/g, '$1')) : undefined
}

function attribution(a: Trace, ax: Exchange, b: Trace, bx: Exchange): Attribution[] | undefined {
  // Same patch on both sides cannot explain a difference between them.
  if (ax.patchId === bx.patchId) return undefined
  const out: Attribution[] = []
  for (const [t, trace, x] of [
    ['a', a, ax],
    ['b', b, bx],
  ] as const) {
    if (x.origin !== 'patched' || !x.patchId) continue
    for (const id of x.patchId.split('+')) {
      const spec = trace.meta.lineage?.patches.find((p) => p.id === id)?.spec
      const at: Attribution = { trace: t, seq: x.seq, patchId: id }
      if (spec !== undefined) at.spec = spec
      out.push(at)
    }
  }
  return out.length > 0 ? out : undefined
}

/** Notes the faults injected into the exchanges of a difference (none when both sides had the same one). */
function withFaults(d: TraceDifference, ax: Exchange | undefined, bx: Exchange | undefined): TraceDifference {
  if (ax?.fault && bx?.fault && ax.fault.rule === bx.fault.rule && ax.fault.call === bx.fault.call) return d
  const notes: FaultNote[] = []
  for (const [t, x] of [
    ['a', ax],
    ['b', bx],
  ] as const) {
    const f = x?.fault
    if (x && f) notes.push({ trace: t, seq: x.seq, rule: f.rule, fault: f.kind, phase: f.phase, upstream: upstreamPhrase(f) })
  }
  if (notes.length > 0) d.faults = notes
  return d
}

/** "fault response_lost (rule lost-ack, after-response) on b #0; upstream 201". */
export function formatFaultNote(n: FaultNote): string {
  return `fault ${n.fault} (rule ${n.rule}, ${n.phase}) on ${n.trace} #${n.seq}; ${n.upstream}`
}

function make(
  kind: DifferenceKind,
  exchange: string,
  a: number | undefined,
  b: number | undefined,
  details: DiffDetail[],
  attr: Attribution[] | undefined,
): TraceDifference {
  // Built in a fixed key order so the JSON output reads the same way every time.
  const d = { kind, exchange } as TraceDifference
  if (a !== undefined) d.a = a
  if (b !== undefined) d.b = b
  d.summary = ''
  d.details = details
  if (attr) d.attribution = attr
  d.summary = summaryLine(d)
  return d
}

/** "response $.active: true → false", "response status: 200 → 503", "request header x-a: 1 → 2". */
export function formatDetail(d: DiffDetail): string {
  const arrow = `${show(d.before)} → ${show(d.after)}`
  switch (d.field) {
    case 'body':
      return d.path ? `${d.side} ${d.path}: ${arrow}` : `${d.side} body: ${arrow}`
    case 'events':
      return `${d.side} events ${d.path}: ${arrow}`
    case 'header':
    case 'trailer':
      return `${d.side} ${d.field} ${d.path}: ${arrow}`
    case 'position':
      return `position: a index ${String(d.before)} → b index ${String(d.after)}`
    default:
      return `${d.side} ${d.field}: ${arrow}`
  }
}

function summaryLine(d: TraceDifference): string {
  if (d.kind === 'exchange_missing') return `${d.exchange} missing in b`
  if (d.kind === 'exchange_added') return `${d.exchange} added in b`
  const first = d.details[0]
  return first ? `${d.exchange} ${formatDetail(first)}` : d.exchange
}

function show(v: unknown): string {
  if (v === undefined) return '(absent)'
  const s = typeof v === 'string' && v.startsWith('<') && v.endsWith('>') ? v : canonicalOrString(v)
  return s.length > 80 ? `${s.slice(0, 77)}...` : s
}

function canonicalOrString(v: unknown): string {
  try {
    return canonicalJson(v)
  } catch {
    return String(v)
  }
}

function formatAttribution(at: Attribution): string {
  return `from patch ${at.patchId}${at.spec ? ` (${at.spec})` : ''} on ${at.trace} #${at.seq}`
}

/** " [from patch ...]" or " [fault ...]" after the first divergence: what a reader must see first. */
export function firstNote(d: Pick<TraceDifference, 'attribution' | 'faults'>): string {
  const attr = d.attribution?.[0]
  if (attr) return ` [${formatAttribution(attr)}]`
  const fault = d.faults?.[0]
  return fault ? ` [${formatFaultNote(fault)}]` : ''
}

/** Deterministic text of a diff (snapshot-testable): header, first divergence, then every difference. */
export function formatDiffText(diff: TraceDiff): string {
  const lines: string[] = []
  const n = diff.differences.length
  const kinds = DIFFERENCE_KINDS.filter((k) => diff.counts[k] > 0).map((k) => `${diff.counts[k]} ${k}`)
  const count = (n: number) => `${n} exchange${n === 1 ? '' : 's'}`
  lines.push(`diff a "${diff.a.name}" (${count(diff.a.exchanges)}) → b "${diff.b.name}" (${count(diff.b.exchanges)})`)
  if (n === 0) {
    lines.push('no differences')
    return lines.join('\n')
  }
  lines.push(`${n} difference${n === 1 ? '' : 's'}: ${kinds.join(', ')}`)
  const first = diff.first as TraceDifference
  lines.push(`first divergence: ${first.summary}${firstNote(first)}`)
  for (const d of diff.differences) {
    const where = [d.a !== undefined ? `a #${d.a}` : undefined, d.b !== undefined ? `b #${d.b}` : undefined].filter(Boolean).join(', ')
    lines.push('', `${d.kind} ${d.exchange} (${where})`)
    for (const x of d.details) lines.push(`  ${formatDetail(x)}`)
    for (const at of d.attribution ?? []) lines.push(`  ${formatAttribution(at)}`)
    for (const f of d.faults ?? []) lines.push(`  ${formatFaultNote(f)}`)
  }
  return lines.join('\n')
}

export { decodeContentEncoding }
