/**
 * What `tr-proxy drift` may send live, decided before anything is sent: safe methods always; model calls only
 * when asked (they cost tokens); other methods only when asked (they may change something upstream); MCP
 * messages by MCP's rules (mcp-drift-plan.ts: stdio servers re-spawned only when asked, fresh HTTP sessions). Each
 * request is rebuilt from the recording; values redaction replaced are never sent as "[REDACTED]": a
 * redacted header is left out unless its value is given (`fill`), and what cannot be filled is noted, so a
 * 401 in the report comes with its reason. Also builds the trace `--update` writes. Pure.
 */
import { bodyBytes, type Exchange, exchangeLabel, llmView, mcpView, type Trace, tryUtf8, websocketBodyRefs } from '../trace/index.ts'
import type { CapturedRequest } from './decision.ts'
import { type McpDriftOptions, type McpPlanContext, type McpResend, mcpPlanContext, planMcpExchange } from './mcp-drift-plan.ts'
import { REDACTED } from './redaction.ts'

/** Methods RFC 9110 defines as safe (read-only): re-sent by default. */
export const SAFE_METHODS: readonly string[] = ['GET', 'HEAD', 'OPTIONS', 'TRACE']

/** Why a request is (or is not) re-sent. */
export type DriftRequestKind = 'safe' | 'unsafe' | 'model'

/** Options of `planDrift`. */
export interface DriftPlanOptions {
  /** Re-send requests with methods that are not safe (POST, PUT, PATCH, DELETE, ...), model calls aside. */
  unsafe?: boolean
  /** Re-send model calls (they cost tokens). */
  modelCalls?: boolean
  /** Lower-case header name → the value to send where the recording has it redacted. */
  fill?: ReadonlyMap<string, string>
  /** How MCP messages are re-sent (stdio servers re-spawned, read-only tools). */
  mcp?: McpDriftOptions
}

/** One exchange of the plan: re-sent with `request` (an MCP message as `mcp` says), or skipped for `reason`. */
export type PlannedExchange =
  | { seq: number; label: string; kind: DriftRequestKind; send: true; request: CapturedRequest; notes: string[]; mcp?: McpResend }
  | { seq: number; label: string; kind: DriftRequestKind; send: false; reason: string }

/** Plans the re-send of every exchange of `trace`, in trace order. */
export function planDrift(trace: Trace, options: DriftPlanOptions = {}): PlannedExchange[] {
  const mcp = mcpPlanContext(trace, options.mcp ?? {})
  return trace.exchanges.map((x) => planExchange(trace, x, options, mcp))
}

function planExchange(trace: Trace, x: Exchange, options: DriftPlanOptions, mcp: McpPlanContext): PlannedExchange {
  const label = exchangeLabel(trace, x)
  const method = x.request.method.toUpperCase()
  const m = mcpView(trace, x)
  const kind: DriftRequestKind = llmView(trace, x) ? 'model' : SAFE_METHODS.includes(method) ? 'safe' : 'unsafe'
  if (x.websocket) return { seq: x.seq, label, kind, send: false, reason: websocketSkip(x.websocket.messages.length) }
  if (x.origin === 'patched') return { seq: x.seq, label, kind, send: false, reason: 'a fork patched this answer: it is not what the upstream said' }
  if (!recordedUpstream(x))
    return { seq: x.seq, label, kind, send: false, reason: 'an injected fault answered it before forwarding: no upstream answer was recorded' }
  let resend: McpResend | undefined
  let sentAs = kind
  if (m) {
    const p = planMcpExchange(trace, x, m, mcp, options.unsafe === true)
    if (!p.send) return { seq: x.seq, label, kind: p.kind, send: false, reason: p.reason }
    resend = p.resend
    sentAs = p.kind
    // An MCP message of a stdio server never goes over HTTP: its request is the recording, for reference.
    if (resend.transport === 'stdio') return { seq: x.seq, label, kind: p.kind, send: true, request: recordedRequest(trace, x), notes: [], mcp: resend }
  }
  if (!m && kind === 'model' && !options.modelCalls)
    return { seq: x.seq, label, kind, send: false, reason: 'a model call (it costs tokens): pass --model-calls to re-send it' }
  if (!m && kind === 'unsafe' && !options.unsafe)
    return { seq: x.seq, label, kind, send: false, reason: `${method} is not a safe method: pass --unsafe to re-send it` }
  const notes: string[] = []
  const headers: Array<[string, string]> = []
  for (const [name, value] of x.request.headers) {
    if (value !== REDACTED) {
      headers.push([name, value])
      continue
    }
    const filled = options.fill?.get(name.toLowerCase())
    if (filled !== undefined) headers.push([name, filled])
    else
      notes.push(`header ${name.toLowerCase()} was redacted in the recording and is sent without it (give it with --fill-header ${name.toLowerCase()}=ENV_VAR)`)
  }
  if (x.request.url.includes(encodeURIComponent(REDACTED)) || x.request.url.includes(REDACTED))
    notes.push('the URL holds a redacted value, sent as it was recorded')
  const body = x.request.body ? bodyBytes(trace, x.request.body) : null
  if (body && tryUtf8(body)?.includes(REDACTED)) notes.push('the request body holds a redacted value, sent as it was recorded')
  return { seq: x.seq, label, kind: sentAs, send: true, request: { method, url: x.request.url, headers, body }, notes, ...(resend ? { mcp: resend } : {}) }
}

/**
 * Why a WebSocket session is not re-sent: re-sending its upgrade GET alone would compare a 101 and nothing the
 * session said, and its server messages answer what the app sends, so only a new recording can compare them.
 */
export function websocketSkip(messages: number): string {
  return `websocket: a WebSocket session (${messages} message(s)) is not re-opened live; re-sending its upgrade alone would compare a 101, not what the session said. Record the run again and \`tr-proxy diff\` the two traces to see what changed`
}

function recordedRequest(trace: Trace, x: Exchange): CapturedRequest {
  return { method: x.request.method, url: x.request.url, headers: x.request.headers, body: x.request.body ? bodyBytes(trace, x.request.body) : null }
}

/** The labels a trace written by `drift --update` carries. */
export const DRIFT_OF_LABEL = 'driftOf'

/**
 * The trace `drift --update` writes: the recorded trace with every re-sent exchange replaced by its live
 * answer (kept at the recorded position and start time), the others as recorded.
 */
export function driftUpdatedTrace(recorded: Trace, live: ReadonlyMap<number, { trace: Trace; exchange: Exchange }>, name: string): Trace {
  const bodies = new Map<string, Uint8Array>()
  const keep = (from: Trace, x: Exchange) => {
    const o = x.outcome
    const refs = [
      x.request.body,
      o.kind === 'response' ? o.response.body : o.error.partial?.body,
      x.fault?.upstream?.kind === 'response' ? x.fault.upstream.response.body : undefined,
    ]
    for (const ref of refs) if (ref) bodies.set(ref.digest, bodyBytes(from, ref))
    for (const [ref] of websocketBodyRefs(x)) bodies.set(ref.digest, bodyBytes(from, ref))
  }
  const exchanges = recorded.exchanges.map((x) => {
    const l = live.get(x.seq)
    if (!l) {
      keep(recorded, x)
      return x
    }
    keep(l.trace, l.exchange)
    const { origin: _origin, ...rest } = l.exchange
    return { ...rest, seq: x.seq, timing: { startMs: x.timing.startMs, headersMs: l.exchange.timing.headersMs } }
  })
  const labels = { ...recorded.meta.labels, [DRIFT_OF_LABEL]: recorded.meta.name }
  return { meta: { name, format: recorded.meta.format, labels }, exchanges, bodies }
}

/**
 * The upstream's own answer in a recorded exchange: the outcome, or for an injected fault what the upstream
 * really did (undefined when the fault answered before forwarding: nothing upstream was recorded).
 */
export function recordedUpstream(x: Exchange): Exchange | undefined {
  if (!x.fault) return x
  return x.fault.upstream ? { ...x, outcome: x.fault.upstream } : undefined
}
