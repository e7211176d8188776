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
import type { Exchange, Trace, WebSocketMessage } from './exchange.ts'
import { FAULT_DEFAULTS, WEBSOCKET_FAULT_CLOSE_CODE, type WebSocketFaultKind } from './fault-kinds.ts'
import { closePayload, isSendableCloseCode } from './websocket.ts'

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
  const at = ws.messages[target] as WebSocketMessage
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
  const reason = `Tool Replay fault ws_close (fork patch ${patchId})`
  const close = (from: 'client' | 'server', why: string): WebSocketMessage => {
    const body = bodyFromChunks([{ bytes: closePayload(code, why), atMs: at.atMs }])
    trace.bodies.set(body.ref.digest, body.bytes)
    return { from, opcode: 'close', atMs: at.atMs, body: body.ref, close: { code, reason: why } }
  }
  // The client answers a close with its own (RFC 6455 5.5.1); what anyone said after the close is not kept.
  ws.messages = [...ws.messages.slice(0, target + 1), close('server', reason), close('client', '')]
  delete ws.end
}
