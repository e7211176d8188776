/**
 * Forks that add or remove a fault on one exchange: `#3 fault=rate_limit`, `#3 fault=stream_cut@2`,
 * `#3 fault=none`. The branch is what a faulted run would have recorded, so it replays like one:
 * - a fault that acts before forwarding (`rate_limit`, `server_error`, `blackout`, `timeout`) adds an
 *   attempt: a new exchange before #3 with the same request, the made-up answer and `upstream: null`;
 *   #3 stays, so the app's retry gets the recorded answer;
 * - `response_lost`, `latency`, `stream_cut`, `stream_error` change what the app gets from #3 and keep the
 *   recorded outcome as `fault.upstream` (what the upstream really did);
 * - `none` undoes one: the upstream's outcome comes back, and an attempt that never reached the upstream
 *   is removed.
 * The optional `@N` is the one number each kind takes: rate_limit@RETRY_AFTER_MS,
 * server_error@STATUS, blackout@503 (default: refused), timeout@MS, latency@MS, stream_cut@EVENTS /
 * stream_error@EVENTS; the defaults are trace/fault-kinds.ts's. A WebSocket session takes ws_close@N[:CODE],
 * ws_drop@N and ws_delay@N[:MS] (trace/websocket-fault-patch.ts).
 */
import { bodyBytes, bodyFromBytes, bodyFromChunks, splitChunks } from './body.ts'
import { ErrorCodes, ToolReplayError } from './errors.ts'
import { cutBody } from './event-stream-cut.ts'
import { type Exchange, type ExchangeFault, FAULT_KINDS, type FaultKind, type FaultPhase, type RecordedResponse, type Trace } from './exchange.ts'
import { BEFORE_FORWARD_KINDS, FAULT_DEFAULTS, faultError, SERVER_ERROR_STATUSES, WEBSOCKET_FAULT_KINDS, type WebSocketFaultKind } from './fault-kinds.ts'
import { headerValue } from './header-pairs.ts'
import { providerErrorResponse, providerFor } from './provider-errors.ts'
import { isEventStream } from './sse.ts'
import { applyWebSocketFault, checkWebSocketFaultArgs, validateWebSocketFault, type WebSocketFaultArgs } from './websocket-fault-patch.ts'

/** A parsed `fault=` patch action. */
export interface FaultPatchAction {
  kind: 'fault'
  fault: FaultKind | 'none'
  /** The kind's one number (`@N`), when given. */
  arg?: number
  /** A WebSocket fault's second number (`@N:VALUE`: ws_close's code, ws_delay's ms). */
  value?: number
}

/** What applying a fault patch does to the branch's list of exchanges. */
export type FaultPatchEffect = { kind: 'changed' } | { kind: 'insert-before'; exchange: Exchange } | { kind: 'remove' }

const HELP =
  'Fault actions: fault=KIND[@N] with KIND one of rate_limit[@RETRY_AFTER_MS], server_error[@STATUS], blackout[@503], timeout[@MS], response_lost, latency[@MS], stream_cut[@EVENTS], stream_error[@EVENTS]; on a WebSocket session ws_close@N[:CODE], ws_drop@N, ws_delay@N[:MS] (N: the server message); fault=none removes one.'

function invalid(text: string, why: string): never {
  throw new ToolReplayError(ErrorCodes.INVALID_PATCH, `Invalid patch "${text}": ${why}. ${HELP}`, { details: { patch: text } })
}

/** Parses the action after `fault=`. */
export function parseFaultPatchAction(text: string, value: string): FaultPatchAction {
  const m = /^([a-z_]+)(?:@(\d+)(?::(\d+))?)?$/.exec(value)
  if (!m) invalid(text, `"fault=${value}" is not KIND or KIND@NUMBER`)
  const fault = m[1] as string
  if ((WEBSOCKET_FAULT_KINDS as readonly string[]).includes(fault)) {
    if (m[2] === undefined) invalid(text, `${fault} needs the server message it acts at: ${fault}@N`)
    const a: FaultPatchAction = { kind: 'fault', fault: fault as WebSocketFaultKind, arg: Number(m[2]), ...(m[3] !== undefined ? { value: Number(m[3]) } : {}) }
    checkWebSocketFaultArgs(wsArgs(a), (why) => invalid(text, why))
    return a
  }
  if (m[3] !== undefined) invalid(text, `only a WebSocket fault takes a second number (${fault}@${m[2]}:${m[3]})`)
  if (fault === 'none') {
    if (m[2] !== undefined) invalid(text, 'fault=none takes no number')
    return { kind: 'fault', fault: 'none' }
  }
  if (!(FAULT_KINDS as readonly string[]).includes(fault)) invalid(text, `unknown fault "${fault}"`)
  if (fault === 'tool_error' || fault === 'server_crash')
    invalid(text, `${fault} is injected into a running MCP server, not forked in; record with a faults file, or fork the result by meaning (mcp.isError=true)`)
  if (fault === 'schema_drift')
    invalid(text, 'schema_drift cannot be forked in as one action; change the fields with $.path=JSON patches (or replace the body with body=@FILE)')
  const action: FaultPatchAction = { kind: 'fault', fault: fault as FaultKind }
  if (m[2] === undefined) return action
  const n = Number(m[2])
  if (fault === 'response_lost') invalid(text, 'response_lost takes no number')
  if (fault === 'server_error' && !(SERVER_ERROR_STATUSES as readonly number[]).includes(n))
    invalid(text, `server_error@${n}: the status must be one of ${SERVER_ERROR_STATUSES.join(', ')}`)
  if (fault === 'blackout' && n !== 503) invalid(text, 'blackout takes @503 (a provider-shaped 503) or nothing (connection refused)')
  if ((fault === 'stream_cut' || fault === 'stream_error') && n < 1) invalid(text, `${fault}@${n}: cut after at least 1 event`)
  if (!Number.isSafeInteger(n) || n > 3_600_000) invalid(text, `${n} is too large`)
  action.arg = n
  return action
}

/** The canonical text of the action, for lineage and the patch id. */
export function canonicalFaultAction(a: FaultPatchAction): string {
  return `fault=${a.fault}${a.arg !== undefined ? `@${a.arg}` : ''}${a.value !== undefined ? `:${a.value}` : ''}`
}

/** A WebSocket fault action's arguments. */
function wsArgs(a: FaultPatchAction): WebSocketFaultArgs {
  return { fault: a.fault as WebSocketFaultKind, at: a.arg as number, ...(a.value !== undefined ? { value: a.value } : {}) }
}

function isWebSocketFault(a: FaultPatchAction): boolean {
  return (WEBSOCKET_FAULT_KINDS as readonly string[]).includes(a.fault)
}

/** Checks the patch against its exchange before anything is applied. */
export function validateFaultPatch(x: Exchange, text: string, a: FaultPatchAction): void {
  const fail = (why: string): never => {
    throw new ToolReplayError(
      ErrorCodes.INVALID_PATCH,
      `Failed to resolve patch "${text}" against exchange #${x.seq} (${x.request.method} ${x.request.url}): ${why}`,
      {
        details: { patch: text, seq: x.seq },
      },
    )
  }
  if (a.fault === 'none') {
    if (!x.fault) fail('it has no fault to remove')
    if ((WEBSOCKET_FAULT_KINDS as readonly string[]).includes(x.fault?.kind ?? ''))
      fail(`its ${x.fault?.kind} changed the session's messages, which the fork does not keep; fork the trace it came from instead`)
    return
  }
  if (x.fault) fail(`it already has a fault (${x.fault.kind}, rule ${x.fault.rule}); remove it first with fault=none in a fork of its own`)
  if (isWebSocketFault(a)) {
    validateWebSocketFault(x, wsArgs(a), fail)
    return
  }
  if (BEFORE_FORWARD_KINDS.has(a.fault)) return
  if (x.websocket && a.fault !== 'latency')
    fail(
      `${a.fault} acts on an HTTP response, and this exchange is a WebSocket session: fork ws_close@N, ws_drop@N or ws_delay@N (N: the server message) to end, lose or delay what the server said`,
    )
  const outcome = x.outcome
  if (outcome.kind !== 'response') fail(`${a.fault} acts on a response, and this exchange recorded ${outcome.error.code}`)
  const type = outcome.kind === 'response' ? headerValue(outcome.response.headers, 'content-type') : undefined
  if ((a.fault === 'stream_cut' || a.fault === 'stream_error') && !isEventStream(type)) {
    fail(`${a.fault} cuts an event stream after whole events, and this response is ${type ?? 'untyped'}`)
  }
}

/** Applies a fault patch to `x` (already a copy in the branch); says whether an exchange is added before it or it goes. */
export function applyFaultPatch(
  trace: Pick<Trace, 'meta' | 'bodies'>,
  x: Exchange,
  patch: { id: string; text: string },
  a: FaultPatchAction,
): FaultPatchEffect {
  if (a.fault === 'none') {
    const f = x.fault as ExchangeFault
    delete x.fault
    if (f.upstream === null) return { kind: 'remove' }
    x.outcome = f.upstream
    return { kind: 'changed' }
  }
  const fault = (phase: FaultPhase, upstream: ExchangeFault['upstream']): ExchangeFault => ({
    rule: `patch-${patch.id}`,
    kind: a.fault as FaultKind,
    phase,
    seed: 'fork',
    call: 1,
    upstream,
  })
  if (isWebSocketFault(a)) {
    const upstream = x.outcome
    applyWebSocketFault(trace, x, patch.id, wsArgs(a))
    x.fault = fault('mid-body', upstream)
    return { kind: 'changed' }
  }
  if (BEFORE_FORWARD_KINDS.has(a.fault)) {
    const attempt: Exchange = {
      seq: x.seq,
      request: x.request,
      outcome: madeUpOutcome(trace, x, a, patch.id),
      timing: { startMs: x.timing.startMs, headersMs: a.fault === 'timeout' ? (a.arg ?? FAULT_DEFAULTS.timeoutMs) : 0 },
      origin: 'patched',
      fault: fault('before-forward', null),
    }
    return { kind: 'insert-before', exchange: attempt }
  }
  const upstream = x.outcome
  const res = (upstream as Extract<Exchange['outcome'], { kind: 'response' }>).response
  if (a.fault === 'response_lost') {
    x.outcome = { kind: 'error', error: faultError('response_lost', `(Tool Replay fork patch ${patch.id})`) }
  } else if (a.fault === 'latency') {
    x.timing = { ...x.timing, headersMs: x.timing.headersMs + (a.arg ?? FAULT_DEFAULTS.latencyMs) }
  } else {
    const after = { events: a.arg ?? FAULT_DEFAULTS.afterEvents }
    const cut = cutBody(bodyBytes(trace, res.body), after)
    const lost = a.fault === 'stream_error' ? !cut.reached : !cut.cut
    if (lost) {
      throw new ToolReplayError(
        ErrorCodes.INVALID_PATCH,
        `Failed to apply patch "${patch.text}" to exchange #${x.seq} (${x.request.method} ${x.request.url}): its stream has ${cut.events} event(s), so cutting after ${after.events} leaves nothing out. Cut after fewer events.`,
        { details: { patch: patch.text, seq: x.seq } },
      )
    }
    const kept = keptChunks(trace, res, cut.body.byteLength)
    const body = bodyFromChunks(kept)
    trace.bodies.set(body.ref.digest, body.bytes)
    const partial: RecordedResponse = { ...res, headers: res.headers.filter(([k]) => k.toLowerCase() !== 'content-length'), body: body.ref, trailers: [] }
    x.outcome =
      a.fault === 'stream_cut'
        ? { kind: 'response', response: partial }
        : { kind: 'error', error: { ...faultError('stream_error', `(Tool Replay fork patch ${patch.id})`), partial } }
  }
  x.fault = fault(a.fault === 'latency' ? 'after-response' : a.fault === 'response_lost' ? 'after-response' : 'mid-body', upstream)
  return { kind: 'changed' }
}

/** The recorded chunks of a body, up to `size` bytes (the last one cut where the body is cut). */
function keptChunks(trace: Pick<Trace, 'meta' | 'bodies'>, res: RecordedResponse, size: number): Array<{ bytes: Uint8Array; atMs: number }> {
  const out: Array<{ bytes: Uint8Array; atMs: number }> = []
  let left = size
  for (const c of splitChunks(bodyBytes(trace, res.body), res.body)) {
    if (left <= 0) break
    out.push(c.bytes.byteLength <= left ? c : { bytes: c.bytes.subarray(0, left), atMs: c.atMs })
    left -= c.bytes.byteLength
  }
  return out
}

/** A before-forward fault's answer: a provider-shaped 429/5xx, a refused connection or a timeout. */
function madeUpOutcome(trace: Pick<Trace, 'bodies'>, x: Exchange, a: FaultPatchAction, id: string): Exchange['outcome'] {
  const note = `(Tool Replay fork patch ${id})`
  if (a.fault === 'timeout') return { kind: 'error', error: faultError('timeout', note, { ms: a.arg ?? FAULT_DEFAULTS.timeoutMs }) }
  if (a.fault === 'blackout' && a.arg === undefined) return { kind: 'error', error: faultError('blackout', note) }
  const status = a.fault === 'rate_limit' ? 429 : a.fault === 'blackout' ? 503 : (a.arg ?? FAULT_DEFAULTS.serverErrorStatus)
  const r = providerErrorResponse(providerFor(x.request.url), status, {
    ...(a.fault === 'rate_limit' ? { retryAfterMs: a.arg ?? FAULT_DEFAULTS.retryAfterMs } : {}),
    requestId: `req_trfork_${id}`,
    rule: `patch-${id}`,
  })
  const body = bodyFromBytes(r.body)
  trace.bodies.set(body.ref.digest, body.bytes)
  return { kind: 'response', response: { status: r.status, statusText: r.statusText, headers: r.headers, body: body.ref, trailers: [] } }
}

/** Builds the branch's exchanges from the patched copies: attempts added, undone attempts removed, renumbered. */
export function arrangeExchanges(exchanges: Exchange[], effects: ReadonlyMap<number, FaultPatchEffect[]>): Exchange[] {
  if (effects.size === 0) return exchanges
  const out: Exchange[] = []
  for (const x of exchanges) {
    const own = effects.get(x.seq) ?? []
    for (const e of own) if (e.kind === 'insert-before') out.push(e.exchange)
    if (!own.some((e) => e.kind === 'remove')) out.push(x)
  }
  // Sequence numbers are positions: they follow the new order.
  return out.map((x, i) => (x.seq === i ? x : { ...x, seq: i }))
}
