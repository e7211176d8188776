/**
 * The fault kinds' shared rules, declared once for the two places that make a fault: a faults file's rule at run
 * time (faults/fault-decision.ts) and a fork's `fault=` patch (trace/fault-patch.ts). Their defaults, the
 * statuses `server_error` answers with, and the error a failing kind hands the client.
 */
import type { ErrorPhase, FaultKind } from './exchange.ts'

/** Statuses `server_error` can answer with (529: Anthropic's "overloaded"). */
export const SERVER_ERROR_STATUSES = [500, 502, 503, 504, 529] as const

/** What a kind takes when its rule or patch leaves a value out. */
export const FAULT_DEFAULTS = {
  /** timeout: how long the client waits before its connection fails. */
  timeoutMs: 30_000,
  /** rate_limit: the Retry-After the client is asked to honour. */
  retryAfterMs: 1000,
  /** server_error: the status. */
  serverErrorStatus: 500,
  /** latency (fork patch): the delay added before the head. */
  latencyMs: 1000,
  /** stream_cut, stream_error (fork patch): events delivered before the cut. */
  afterEvents: 1,
  /** The error code of a kind that fails the connection. */
  code: { response_lost: 'ECONNRESET', timeout: 'ETIMEDOUT', stream_error: 'ECONNRESET' },
} as const

/**
 * Kinds that act on a WebSocket session: the server closes the session with a code after its Nth message, its Nth
 * message is dropped, or it comes late. A faults file's rule injects them into a live session as it is relayed
 * (capture/websocket-fault-relay.ts); a fork patch (`#N fault=ws_close@3:1011`) into a recorded one.
 */
export const WEBSOCKET_FAULT_KINDS = ['ws_close', 'ws_drop', 'ws_delay'] as const satisfies readonly FaultKind[]
export type WebSocketFaultKind = (typeof WEBSOCKET_FAULT_KINDS)[number]

/** The close code `ws_close` sends when the patch names none (1011: the server hit an unexpected condition, RFC 6455 7.4.1). */
export const WEBSOCKET_FAULT_CLOSE_CODE = 1011

/** Kinds that answer in the upstream's place: the request is never forwarded (server_error unless it forwards first). */
export const BEFORE_FORWARD_KINDS: ReadonlySet<FaultKind> = new Set(['rate_limit', 'server_error', 'blackout', 'timeout'])

/**
 * The error a failing fault gives the client, as Node's own would read; `note` says which rule or patch did it.
 * @example
 * faultError('timeout', '(Tool Replay fault rule "hang")', { ms: 300 })
 * // { code: 'ETIMEDOUT', message: 'no response after 300 ms, connection failed with ETIMEDOUT (Tool ...)', phase: 'response-headers' }
 */
export function faultError<C extends string = never>(
  kind: 'response_lost' | 'timeout' | 'blackout' | 'stream_error',
  note: string,
  options: { code?: C; ms?: number } = {},
): { code: C | 'ECONNRESET' | 'ETIMEDOUT' | 'ECONNREFUSED'; message: string; phase: ErrorPhase } {
  switch (kind) {
    case 'response_lost': {
      const code = options.code ?? FAULT_DEFAULTS.code.response_lost
      return { code, message: `read ${code}: the response was lost ${note}`, phase: 'response-headers' }
    }
    case 'timeout': {
      const code = options.code ?? FAULT_DEFAULTS.code.timeout
      const ms = options.ms ?? FAULT_DEFAULTS.timeoutMs
      return { code, message: `no response after ${ms} ms, connection failed with ${code} ${note}`, phase: 'response-headers' }
    }
    case 'blackout':
      return { code: 'ECONNREFUSED', message: `connect ECONNREFUSED: the upstream is blacked out ${note}`, phase: 'connect' }
    case 'stream_error': {
      const code = options.code ?? FAULT_DEFAULTS.code.stream_error
      return { code, message: `read ${code}: the stream broke off ${note}`, phase: 'response-body' }
    }
  }
}
