/**
 * What diffTraces compares in a pair of exchanges: URL, headers, decoded bodies and outcomes, volatile fields
 * aside; and who made a difference (fork patches, injected faults).
 */
import { bodyBytes, tryUtf8 } from './body.ts'
import { decodeContentEncoding } from './content-encoding.ts'
import type { Attribution, DiffDetail, DifferenceKind, FaultNote, TraceDifference } from './diff-types.ts'
import { decodeEventStream, eventStreamFramesAsJson, isAwsEventStream } from './eventstream.ts'
import type { BodyRef, Exchange, HeaderPairs, Trace } from './exchange.ts'
import { upstreamPhrase } from './fault-label.ts'
import { grpcMessageViews, isGrpcContentType } from './grpc-frames.ts'
import { headerValue } from './header-pairs.ts'
import { parseJson } from './json-codec.ts'
import { diffJson, replaceAtJsonPath } from './json-path.ts'
import { withRoles } from './model-ids.ts'
import { isNdjson, parseNdjson } from './ndjson.ts'
import { normalizeUrl } from './request-identity.ts'
import { isEventStream, parseSse, sseEventsAsJson } from './sse.ts'

const VOLATILE_HEADER_PREFIXES = ['x-stainless-', 'x-ratelimit-', 'anthropic-ratelimit-']
// Compared after decoding, so transport encoding and framing never count as a difference. What encodings a
// client accepts is framing too: paths and clients offer different lists for the same request.
const FRAMING_HEADERS = ['content-length', 'content-encoding', 'transfer-encoding', 'accept-encoding']

export function safeNormalize(url: string): string {
  try {
    return normalizeUrl(url)
  } catch {
    return url
  }
}

export interface Comparer {
  keys: Set<string>
  paths: string[]
  headers: Set<string>
  volatile: boolean
  max: number
  rolesA: ReadonlyMap<string, string>
  rolesB: ReadonlyMap<string, string>
}

export function compareRequests(a: Trace, ax: Exchange, b: Trace, bx: Exchange, cmp: Comparer): DiffDetail[] {
  const out: DiffDetail[] = []
  if (safeNormalize(ax.request.url) !== safeNormalize(bx.request.url))
    out.push({ side: 'request', field: 'url', before: ax.request.url, after: bx.request.url })
  out.push(...compareHeaders('request', 'header', ax.request.headers, bx.request.headers, cmp))
  out.push(...compareBodies('request', a, ax.request.body, ax.request.headers, b, bx.request.body, bx.request.headers, cmp))
  return out
}

export function compareOutcomes(a: Trace, ax: Exchange, b: Trace, bx: Exchange, cmp: Comparer): { kind: DifferenceKind; details: DiffDetail[] } | undefined {
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

export function decodeBody(trace: Trace, ref: BodyRef | null, headers: HeaderPairs): Decoded {
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

export function attribution(a: Trace, ax: Exchange, b: Trace, bx: Exchange): Attribution[] | undefined {
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
export function withFaults(d: TraceDifference, ax: Exchange | undefined, bx: Exchange | undefined): TraceDifference {
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
