/**
 * The options of a faults file's WebSocket rules (ws_close, ws_drop, ws_delay), read for faults-file.ts. Their
 * numbers follow the fork patches' (trace/websocket-fault-patch.ts): server messages count from 1 among the
 * server's text and binary messages, a close code is one an endpoint may send.
 */
import { FAULT_DEFAULTS, isSendableCloseCode, WEBSOCKET_FAULT_CLOSE_CODE, type WebSocketFaultKind } from '../trace/index.ts'
import type { FaultOptionsByKind, LatencyDistribution } from './fault-rules.ts'
import { describe } from './fault-values.ts'

/** The option names each WebSocket kind takes. */
export const WEBSOCKET_OPTION_KEYS: Record<WebSocketFaultKind, string[]> = {
  ws_close: ['afterMessages', 'code'],
  ws_drop: ['messages'],
  ws_delay: ['fromMessage', 'ms', 'minMs', 'maxMs', 'meanMs'],
}

/** What the options reader lends: its checks, each throwing TR_INVALID_FAULTS naming the field and the fix. */
export interface OptionChecks {
  int(v: unknown, at: string, min: number, fix: string, rule?: string): number
  list(v: unknown, at: string, fix: string, rule?: string): unknown[]
  latency(o: Record<string, unknown>, at: string, rule: string): LatencyDistribution
  fail(where: string, problem: string, fix: string, rule?: string): never
}

const MESSAGE_FIX = 'Server messages count from 1 among its text and binary messages: 1 is the first.'

/** Reads the options of a WebSocket rule (`o` already checked for unknown keys). */
export function websocketFaultOptions<K extends WebSocketFaultKind>(
  kind: K,
  o: Record<string, unknown>,
  at: string,
  rule: string,
  r: OptionChecks,
): FaultOptionsByKind[K] {
  const message = (key: string) => (o[key] === undefined ? 1 : r.int(o[key], `${at}.${key}`, 1, MESSAGE_FIX, rule))
  if (kind === 'ws_close') {
    const code = o.code === undefined ? WEBSOCKET_FAULT_CLOSE_CODE : r.int(o.code, `${at}.code`, 1000, 'Write a close code, e.g. code: 1011.', rule)
    if (!isSendableCloseCode(code))
      r.fail(`${at}.code`, `is ${describe(o.code)}, not a close code an endpoint may send`, 'Use 1000-1003, 1007-1014 or 3000-4999 (default 1011).', rule)
    return { afterMessages: message('afterMessages'), code } as FaultOptionsByKind[K]
  }
  if (kind === 'ws_drop') {
    const messages =
      o.messages === undefined
        ? [1]
        : r
            .list(o.messages, `${at}.messages`, 'List the server messages to drop: messages: [2, 5].', rule)
            .map((m) => r.int(m, `${at}.messages`, 1, MESSAGE_FIX, rule))
    if (messages.length === 0) r.fail(`${at}.messages`, 'is empty', 'List at least one server message, or drop "messages" (default [1]).', rule)
    return { messages: [...new Set(messages)].sort((a, b) => a - b) } as FaultOptionsByKind[K]
  }
  const timed = o.ms !== undefined || o.minMs !== undefined || o.maxMs !== undefined || o.meanMs !== undefined
  const distribution: LatencyDistribution = timed ? r.latency(o, at, rule) : { kind: 'fixed', ms: FAULT_DEFAULTS.latencyMs }
  const most = distribution.kind === 'fixed' ? distribution.ms : distribution.maxMs
  if (most > 3_600_000) r.fail(at, `delays up to ${most} ms`, 'A WebSocket delay is at most 3600000 ms.', rule)
  return { fromMessage: message('fromMessage'), distribution } as FaultOptionsByKind[K]
}
