/**
 * What a fault does to one request, as data: a capture path reads the action and only carries it out.
 * The phase is explicit: before forwarding (nothing reaches the upstream), after the upstream answered (the
 * upstream committed; the app gets something else), or mid-body (the response breaks off or ends early).
 */
import {
  type ErrorPhase,
  type ExchangeFault,
  FAULT_DEFAULTS,
  type FaultPhase,
  faultError,
  type Outcome,
  providerErrorResponse,
  providerFor,
  type StreamPoint,
  type SyntheticResponse,
  toolErrorTranscript,
  WEBSOCKET_FAULT_KINDS,
  type WebSocketFaultPlan,
} from '../trace/index.ts'
import type { DriftChange, FaultErrorCode, FaultRule, LatencyDistribution } from './fault-rules.ts'
import { seededUnit } from './seeded-random.ts'

/** A connection failure the app must see: its code as Node/undici name it, and when in the exchange it happens. */
export interface FaultFailure {
  code: FaultErrorCode
  message: string
  phase: ErrorPhase
}

/**
 * What the client must get.
 * - `respond`: after `delayMs`, this response; the request is never forwarded.
 * - `fail`: after `delayMs`, this connection failure; never forwarded.
 * - `delay`: wait `delayMs`, then forward and pass the answer on unchanged.
 * - `forward-then-respond`: forward, let the upstream answer in full, give the app this response instead.
 * - `forward-then-fail`: forward, let the upstream answer in full, fail the app's connection instead.
 * - `forward-then-delay`: forward, then hold the upstream's answer for `delayMs` before passing it on.
 * - `forward-then-drift`: forward, then give the app the upstream's JSON with these changes.
 * - `forward-then-cut`: forward; pass the body on up to `after`, then end it cleanly (no `error`) or fail with `error`.
 * - `crash`: (MCP stdio) kill the server instead of giving it the message; nothing is forwarded.
 * - `websocket`: relay the session and act on its server messages as `plan` says (capture/websocket-fault-relay.ts).
 */
export type FaultAction =
  | { do: 'respond'; delayMs: number; response: SyntheticResponse }
  | { do: 'fail'; delayMs: number; error: FaultFailure }
  | { do: 'delay'; delayMs: number }
  | { do: 'forward-then-respond'; response: SyntheticResponse }
  | { do: 'forward-then-fail'; error: FaultFailure }
  | { do: 'forward-then-delay'; delayMs: number }
  | { do: 'forward-then-drift'; changes: DriftChange[] }
  | { do: 'forward-then-cut'; after: StreamPoint; error?: FaultFailure }
  | { do: 'crash' }
  | { do: 'websocket'; plan: WebSocketFaultPlan }

/** One rule's decision for one request: what the trace keeps of it (ExchangeFault, less the upstream's outcome), plus when and what. */
export interface FaultDecision extends Omit<ExchangeFault, 'upstream'> {
  /** When the request arrived, in ms since the run started. */
  atMs: number
  action: FaultAction
}

/** True when the action sends the request on to the upstream. */
export function forwards(action: FaultAction): boolean {
  return action.do !== 'respond' && action.do !== 'fail' && action.do !== 'crash'
}

/** The phase an action acts in. */
export function phaseOf(action: FaultAction): FaultPhase {
  if (action.do === 'respond' || action.do === 'fail' || action.do === 'delay' || action.do === 'crash') return 'before-forward'
  return action.do === 'forward-then-cut' || action.do === 'websocket' ? 'mid-body' : 'after-response'
}

/** True for a rule that selects WebSocket sessions (ws_close, ws_drop, ws_delay) rather than HTTP requests. */
export function isWebSocketRule(rule: Pick<FaultRule, 'fault'>): boolean {
  return (WEBSOCKET_FAULT_KINDS as readonly string[]).includes(rule.fault)
}

/** What a trace stores for a faulted exchange, next to what the app was given (the exchange's outcome). */
export function faultRecord(decision: FaultDecision, upstream: Outcome | null): ExchangeFault {
  return {
    rule: decision.rule,
    kind: decision.kind,
    phase: decision.phase,
    seed: decision.seed,
    call: decision.call,
    ...(decision.key !== undefined ? { key: decision.key } : {}),
    upstream,
  }
}

/** "response_lost (rule lost-ack, call 1, seed 42)": how logs and errors name a decision. */
export function describeDecision(d: Pick<FaultDecision, 'kind' | 'rule' | 'call' | 'key' | 'seed'>): string {
  return `${d.kind} (rule ${d.rule}, call ${d.call}${d.key !== undefined ? ` of key ${JSON.stringify(d.key)}` : ''}, seed ${d.seed})`
}

/** The inputs of an action besides the rule: all deterministic, so the action is too. */
export interface ActionContext {
  seed: string
  /** The invocation key the rule's draws are made from ("call:3", or "key:<value>#2"). */
  invocation: string
  url: string
  /** For a quota: ms until its window ends, the natural Retry-After. */
  quotaRetryAfterMs?: number
}

/** Computes a rule's action for one request. Pure. */
export function faultAction(rule: FaultRule, ctx: ActionContext): FaultAction {
  const requestId = `req_trfault_${Math.floor(seededUnit(ctx.seed, rule.id, ctx.invocation, 'request-id') * 2 ** 48).toString(16)}`
  const note = `(Tool Replay fault rule "${rule.id}")`
  switch (rule.fault) {
    case 'response_lost':
      return { do: 'forward-then-fail', error: faultError('response_lost', note, { code: rule.options.code }) }
    case 'timeout':
      return { do: 'fail', delayMs: rule.options.ms, error: faultError('timeout', note, { code: rule.options.code, ms: rule.options.ms }) }
    case 'rate_limit': {
      const retryAfterMs = rule.options.retryAfterMs ?? ctx.quotaRetryAfterMs ?? FAULT_DEFAULTS.retryAfterMs
      const provider = rule.options.provider ?? providerFor(ctx.url)
      return { do: 'respond', delayMs: 0, response: providerErrorResponse(provider, 429, { retryAfterMs, requestId, rule: rule.id }) }
    }
    case 'server_error': {
      const o = rule.options
      const response = providerErrorResponse(o.provider ?? providerFor(ctx.url), o.status, {
        ...(o.retryAfterMs !== undefined ? { retryAfterMs: o.retryAfterMs } : {}),
        requestId,
        rule: rule.id,
      })
      return o.forward ? { do: 'forward-then-respond', response } : { do: 'respond', delayMs: 0, response }
    }
    case 'latency': {
      const delayMs = sampleLatency(rule.options.distribution, seededUnit(ctx.seed, rule.id, ctx.invocation, 'latency'))
      return rule.options.phase === 'after-response' ? { do: 'forward-then-delay', delayMs } : { do: 'delay', delayMs }
    }
    case 'schema_drift':
      return { do: 'forward-then-drift', changes: rule.options.changes }
    case 'blackout':
      if (rule.options.mode === 'refused') {
        return { do: 'fail', delayMs: 0, error: faultError('blackout', note) }
      }
      return { do: 'respond', delayMs: 0, response: providerErrorResponse(rule.options.provider ?? providerFor(ctx.url), 503, { requestId, rule: rule.id }) }
    case 'stream_cut':
      return { do: 'forward-then-cut', after: rule.options.after }
    case 'tool_error':
      return {
        do: 'respond',
        delayMs: 0,
        response: {
          status: 200,
          statusText: 'OK',
          headers: [['content-type', 'application/x-ndjson']],
          body: toolErrorTranscript(`${rule.options.text} ${note}`),
        },
      }
    case 'server_crash':
      return { do: 'crash' }
    case 'stream_error':
      return { do: 'forward-then-cut', after: rule.options.after, error: faultError('stream_error', note, { code: rule.options.code }) }
    case 'ws_close':
      return {
        do: 'websocket',
        plan: { kind: 'ws_close', after: rule.options.afterMessages, code: rule.options.code, reason: `Tool Replay fault ws_close (rule "${rule.id}")` },
      }
    case 'ws_drop':
      return { do: 'websocket', plan: { kind: 'ws_drop', messages: rule.options.messages } }
    case 'ws_delay': {
      const ms = sampleLatency(rule.options.distribution, seededUnit(ctx.seed, rule.id, ctx.invocation, 'latency'))
      return { do: 'websocket', plan: { kind: 'ws_delay', from: rule.options.fromMessage, ms } }
    }
  }
}

/** A latency in whole ms from a distribution and a uniform draw `u` in [0, 1). */
export function sampleLatency(d: LatencyDistribution, u: number): number {
  if (d.kind === 'fixed') return d.ms
  if (d.kind === 'uniform') return Math.round(d.minMs + u * (d.maxMs - d.minMs))
  // Inverse CDF of the exponential distribution, capped so a draw can never stall a run.
  return Math.min(d.maxMs, Math.round(-d.meanMs * Math.log(1 - u)))
}
