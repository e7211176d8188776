/**
 * Faults forked into a recorded WebSocket session (`#0 fault=ws_close@5:1011`, `#0 fault=ws_drop@7`,
 * `#0 fault=ws_delay@3:2000`). N counts the server's text and binary messages from 1, as the session shows them.
 * The branch is the session a faulted run would have recorded, so strict replay plays it to the app:
 * - `ws_close@N[:CODE]`: after its Nth message the server closes the session with CODE (default 1011) and a
 *   reason naming the fault; nothing either side said after that is kept (the client answers the close);
 * - `ws_drop@N`: the server's Nth message is left out (an event the app never gets);
 * - `ws_delay@N[:MS]`: the server's Nth message and everything after it come MS later (default 1000; replay
 *   waits only with recorded pacing, `--pace recorded`, as for `latency`).
 * The exchange's `fault` names the kind, and lineage the patch with its position: show, diff and the inspector say
 * which session was faulted and how.
 */
import { bodyFromChunks } from './body.ts'
import type { Exchange, Trace, WebSocketMessage, WebSocketSession, WebSocketUpstream } from './exchange.ts'
import { FAULT_DEFAULTS, WEBSOCKET_FAULT_CLOSE_CODE, type WebSocketFaultKind } from './fault-kinds.ts'
import { closePayload, isSendableCloseCode, readClosePayload } from './websocket.ts'

/** A WebSocket fault as a fork patch gives it: the kind, the server message it acts at, and its value (code, ms). */
export interface WebSocketFaultArgs {
  fault: WebSocketFaultKind
  /** The server's message, counted from 1 among its text and binary messages. */
  at: number
  /** ws_close: the close code; ws_delay: the delay in ms. */
  value?: number
}

/** Checks a WebSocket fault's numbers on their own; `invalid` throws the parser's TR_INVALID_PATCH. */
export function checkWebSocketFaultArgs(a: WebSocketFaultArgs, invalid: (why: string) => never): void {
  if (a.at < 1) invalid(`${a.fault}@${a.at}: server messages count from 1`)
  if (a.fault === 'ws_drop' && a.value !== undefined) invalid('ws_drop takes only the message: ws_drop@N')
  if (a.fault === 'ws_close' && a.value !== undefined && !isSendableCloseCode(a.value))
    invalid(`ws_close@${a.at}:${a.value}: ${a.value} is not a close code an endpoint may send (1000-1003, 1007-1014, 3000-4999)`)
  if (a.fault === 'ws_delay' && a.value !== undefined && a.value > 3_600_000) invalid(`ws_delay@${a.at}:${a.value}: at most 3600000 ms`)
}

/** The positions of the server's text and binary messages in the session. */
function serverMessages(messages: readonly WebSocketMessage[]): number[] {
  const out: number[] = []
  messages.forEach((m, i) => {
    if (m.from === 'server' && (m.opcode === 'text' || m.opcode === 'binary')) out.push(i)
  })
  return out
}

/** Checks the fault against the exchange it selects: a WebSocket session with that many server messages. */
export function validateWebSocketFault(x: Exchange, a: WebSocketFaultArgs, fail: (why: string) => never): void {
  if (!x.websocket) fail(`${a.fault} acts on a WebSocket session, and this exchange is not one (use an HTTP fault: latency, stream_cut, ...)`)
  const n = serverMessages(x.websocket.messages).length
  if (a.at > n) fail(`the session has ${n} server message(s) (text or binary), so ${a.fault}@${a.at} has nothing to act on`)
}

/** Applies the fault to `x` (a copy in the branch): its session's messages change; new close payloads go to `trace.bodies`. */
export function applyWebSocketFault(trace: Pick<Trace, 'bodies'>, x: Exchange, patchId: string, a: WebSocketFaultArgs): void {
  const ws = x.websocket as NonNullable<Exchange['websocket']>
  const target = serverMessages(ws.messages)[a.at - 1] as number
  if (a.fault === 'ws_drop') {
    ws.messages.splice(target, 1)
    return
  }
  if (a.fault === 'ws_delay') {
    const ms = a.value ?? FAULT_DEFAULTS.latencyMs
    for (const m of ws.messages.slice(target)) {
      m.atMs += ms
      m.body = { ...m.body, chunks: m.body.chunks.map((c) => ({ ...c, atMs: c.atMs + ms })) }
    }
    if (ws.end) ws.end = { ...ws.end, atMs: ws.end.atMs + ms }
    return
  }
  const code = a.value ?? WEBSOCKET_FAULT_CLOSE_CODE
  closeAfter(trace.bodies, ws, target, code, `Tool Replay fault ws_close (fork patch ${patchId})`)
}

/**
 * Ends `ws` after its message at `target` with the server's close (`code`, `reason`) and the client's answer: `answer`
 * when the client's own close is known (a live fault), else a close with the same code.
 */
function closeAfter(bodies: Map<string, Uint8Array>, ws: WebSocketSession, target: number, code: number, reason: string, answer?: WebSocketMessage): void {
  const at = ws.messages[target] as WebSocketMessage
  const close = (from: 'client' | 'server', why: string): WebSocketMessage => {
    const body = bodyFromChunks([{ bytes: closePayload(code, why), atMs: at.atMs }])
    bodies.set(body.ref.digest, body.bytes)
    // The reason as the frame carries it (a close frame's reason is cut to 123 bytes), not as the rule spelled it.
    return { from, opcode: 'close', atMs: at.atMs, body: body.ref, close: readClosePayload(body.bytes) ?? { code, reason: why } }
  }
  // The client answers a close with its own (RFC 6455 5.5.1); what anyone said after the close is not kept.
  const server = close('server', reason)
  const client = answer && answer.atMs >= server.atMs ? { ...answer } : close('client', '')
  ws.messages = [...ws.messages.slice(0, target + 1), server, client]
  delete ws.end
}

/** How early a timer may fire against the clock the recorder reads (libuv's loop time is cached per tick). */
const TIMER_SLACK_MS = 2

/**
 * A WebSocket fault as a faults file's rule injects it into a live session (capture/websocket-fault-relay.ts
 * carries it out as the session is relayed). Messages count the server's text and binary messages from 1.
 * - `ws_close`: after message `after` the app gets a close (`code`, `reason`); the upstream's later messages never reach it;
 * - `ws_drop`: the listed messages never reach the app;
 * - `ws_delay`: message `from` and every server frame after it reach the app `ms` late.
 */
export type WebSocketFaultPlan =
  | { kind: 'ws_close'; after: number; code: number; reason: string }
  | { kind: 'ws_drop'; messages: number[] }
  | { kind: 'ws_delay'; from: number; ms: number }

/**
 * The session the app got, from the session as the upstream had it (`upstream`, left as it is) and the fault that
 * acted on it live; close payloads it makes go to `bodies`. Undefined when the session ended before the fault's
 * message (the fault did not apply). Unlike a fork's `ws_delay`, the client's messages keep their times: live, the
 * client answered what it got when it got it.
 */
export function liveWebSocketView(upstream: WebSocketSession, plan: WebSocketFaultPlan, bodies: Map<string, Uint8Array>): WebSocketSession | undefined {
  const positions = serverMessages(upstream.messages)
  const ws: WebSocketSession = { messages: upstream.messages.map((m) => ({ ...m })), ...(upstream.end ? { end: { ...upstream.end } } : {}) }
  if (plan.kind === 'ws_close') {
    const target = positions[plan.after - 1]
    if (target === undefined) return undefined
    // The app's own answer to the close, as it sent it (the relay passed it on to the upstream).
    const answer = ws.messages.slice(target + 1).find((m) => m.from === 'client' && m.opcode === 'close')
    closeAfter(bodies, ws, target, plan.code, plan.reason, answer)
    return ws
  }
  if (plan.kind === 'ws_drop') {
    const gone = new Set(plan.messages.map((n) => positions[n - 1]).filter((i) => i !== undefined))
    if (gone.size === 0) return undefined
    ws.messages = ws.messages.filter((_, i) => !gone.has(i))
    return ws
  }
  const target = positions[plan.from - 1]
  if (target === undefined) return undefined
  // The order the app saw: a delayed server message goes before a client message sent after it arrived late. Its
  // key allows for a timer firing up to TIMER_SLACK_MS early, and never goes below its own upstream time, so the
  // server's messages keep their order; the sort is stable.
  const keyed = ws.messages.map((m, i) => {
    if (i < target || m.from !== 'server') return { m, key: m.atMs }
    const key = Math.max(m.atMs, m.atMs + plan.ms - TIMER_SLACK_MS)
    m.atMs += plan.ms
    m.body = { ...m.body, chunks: m.body.chunks.map((c) => ({ ...c, atMs: c.atMs + plan.ms })) }
    return { m, key }
  })
  ws.messages = keyed.sort((a, b) => a.key - b.key).map((k) => k.m)
  settleEarlyTimers(ws.messages)
  const last = ws.messages[ws.messages.length - 1]
  if (ws.end && last && ws.end.atMs < last.atMs) ws.end.atMs = last.atMs
  return ws
}

/**
 * A delayed message the app answered before its modelled time (the timer fired early): its time becomes its
 * answer's, never below its own upstream time (the sort's key saw to that), so times never go back.
 */
function settleEarlyTimers(messages: WebSocketMessage[]): void {
  for (let i = messages.length - 2; i >= 0; i--) {
    const m = messages[i] as WebSocketMessage
    const next = (messages[i + 1] as WebSocketMessage).atMs
    // Only a delayed message can be later than the one after it: every other message's sort key is its time.
    if (m.atMs <= next) continue
    m.atMs = next
    m.body = { ...m.body, chunks: m.body.chunks.map((c) => ({ ...c, atMs: Math.min(c.atMs, next) })) }
  }
}

/** The upstream's side of a faulted session as its fault record keeps it: the messages, payloads by digest and size. */
export function websocketUpstream(session: WebSocketSession): WebSocketUpstream {
  return {
    messages: session.messages.map((m) => ({
      from: m.from,
      opcode: m.opcode,
      atMs: m.atMs,
      digest: m.body.digest,
      size: m.body.size,
      ...(m.close ? { close: m.close } : {}),
    })),
    ...(session.end ? { end: session.end } : {}),
  }
}
