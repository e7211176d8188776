import assert from 'node:assert/strict'
import { test } from 'node:test'
import { realtimeTrace, weatherConversation } from '../e2e/fixtures/realtime-session.ts'
import { bodyBytes, bodyFromChunks } from './body.ts'
import type { Exchange, Trace, WebSocketMessage, WebSocketSession } from './exchange.ts'
import { forkTrace } from './patch.ts'
import { closePayload, readClosePayload } from './websocket.ts'
import { liveWebSocketView, websocketUpstream } from './websocket-fault-patch.ts'

const source = () => realtimeTrace('rt', [weatherConversation()])
const fork = (t: Trace, ...patches: string[]) => forkTrace(t, { name: 'rt-fault', sourceDigest: 'sha256:0', patches })
const session = (t: Trace) => (t.exchanges[0] as Exchange).websocket?.messages ?? []
/** "server response.created", "client close 4000", ...: each message of the only session. */
const lines = (t: Trace) =>
  session(t).map((m) =>
    m.opcode === 'close'
      ? `${m.from} close ${readClosePayload(bodyBytes(t, m.body))?.code}`
      : `${m.from} ${(JSON.parse(Buffer.from(bodyBytes(t, m.body)).toString('utf8')) as { type: string }).type}`,
  )
const serverData = (t: Trace) => session(t).filter((m) => m.from === 'server' && m.opcode === 'text')

test('ws_close@N:CODE: the server closes with CODE after its Nth message, the client answers; nothing later is kept', () => {
  const src = source()
  const branch = fork(src, '#0 fault=ws_close@5:4000')
  const before = lines(src)
  const fifth = before.map((l, i) => [l, i] as const).filter(([l]) => l.startsWith('server'))[4]?.[1] as number
  assert.deepEqual(lines(branch), [...before.slice(0, fifth + 1), 'server close 4000', 'client close 4000'])
  const close = session(branch).at(-2)
  assert.match(close?.close?.reason ?? '', /^Tool Replay fault ws_close \(fork patch [0-9a-f]{12}\)$/)
  const x = branch.exchanges[0] as Exchange
  assert.equal(x.fault?.kind, 'ws_close')
  assert.equal(x.fault?.phase, 'mid-body')
  assert.equal(x.fault?.upstream?.kind === 'response' && x.fault.upstream.response.status, 101)
  assert.equal(x.origin, 'patched')
  assert.deepEqual(
    branch.meta.lineage?.patches.map((p) => p.spec),
    ['#0 fault=ws_close@5:4000'],
  )
  for (const m of session(branch)) assert.ok(branch.bodies.has(m.body.digest))
  // Without a code: 1011 (the server hit an unexpected condition).
  assert.equal(lines(fork(src, '#0 fault=ws_close@2')).at(-2), 'server close 1011')
})

test('ws_drop@N leaves the server message out; ws_delay@N:MS moves it and everything after it MS later', () => {
  const src = source()
  const dropped = fork(src, '#0 fault=ws_drop@6')
  assert.equal(serverData(dropped).length, serverData(src).length - 1)
  assert.deepEqual(
    serverData(dropped).map((m) => m.body.digest),
    serverData(src)
      .filter((_, i) => i !== 5)
      .map((m) => m.body.digest),
  )
  assert.equal((dropped.exchanges[0] as Exchange).fault?.kind, 'ws_drop')
  const delayed = fork(src, '#0 fault=ws_delay@6:2500')
  const sixth = serverData(src)[5]
  const at = session(src).indexOf(sixth as WebSocketMessage)
  assert.deepEqual(
    session(delayed).map((m) => m.atMs),
    session(src).map((m, i) => (i >= at ? m.atMs + 2500 : m.atMs)),
  )
})

test('WebSocket faults fail closed with TR_INVALID_PATCH naming what is wrong', () => {
  const src = source()
  const cases: Array<[string, RegExp]> = [
    ['#0 fault=ws_close@99', /the session has \d+ server message\(s\) \(text or binary\), so ws_close@99 has nothing to act on/],
    ['#0 fault=ws_close', /ws_close needs the server message it acts at: ws_close@N/],
    ['#0 fault=ws_close@2:1005', /1005 is not a close code an endpoint may send/],
    ['#0 fault=ws_drop@2:5', /ws_drop takes only the message/],
    ['#0 fault=ws_delay@0', /server messages count from 1/],
    ['#0 fault=latency@5:3', /only a WebSocket fault takes a second number/],
    ['#0 fault=response_lost', /response_lost acts on an HTTP response, and this exchange is a WebSocket session: fork ws_close@N/],
    ['#0 fault=stream_cut@2', /stream_cut acts on an HTTP response, and this exchange is a WebSocket session/],
  ]
  for (const [patch, message] of cases) {
    assert.throws(
      () => fork(src, patch),
      (err: Error & { code?: string }) => {
        assert.equal(err.code, 'TR_INVALID_PATCH', patch)
        assert.match(err.message, message, patch)
        return true
      },
    )
  }
  const branch = fork(src, '#0 fault=ws_drop@1')
  assert.throws(
    () => fork(branch, '#0 fault=none'),
    /its ws_drop changed the session's messages, which the fork does not keep; fork the trace it came from instead/,
  )
  const { websocket: _session, ...upgrade } = src.exchanges[0] as Exchange
  const http: Trace = { ...src, exchanges: [upgrade] }
  assert.throws(() => fork(http, '#0 fault=ws_drop@1'), /ws_drop acts on a WebSocket session, and this exchange is not one/)
})

/** A live session by hand: [from, atMs] per text message; payloads are the index. */
function liveSession(spec: Array<['client' | 'server', number]>): WebSocketSession {
  return {
    messages: spec.map(([from, atMs], i) => {
      const b = bodyFromChunks([{ bytes: Buffer.from(String(i)), atMs }])
      return { from, opcode: 'text' as const, atMs, body: b.ref }
    }),
  }
}
const shape = (ws: WebSocketSession | undefined) => ws?.messages.map((m) => `${m.from[0]}${m.opcode === 'close' ? `:close${m.close?.code}` : ''}@${m.atMs}`)

test("a faults file's WebSocket fault as the app got it (liveWebSocketView): close, drop, delay; the upstream's side untouched", () => {
  const up = liveSession([
    ['server', 1],
    ['client', 2],
    ['server', 3],
    ['server', 4],
    ['client', 100],
    ['server', 101],
  ])
  const before = JSON.stringify(up)
  const bodies = new Map<string, Uint8Array>()
  const closed = liveWebSocketView(up, { kind: 'ws_close', after: 2, code: 1012, reason: 'Tool Replay fault ws_close (rule "r")' }, bodies)
  assert.deepEqual(shape(closed), ['s@1', 'c@2', 's@3', 's:close1012@3', 'c:close1012@3'])
  assert.equal(closed?.messages[3]?.close?.reason, 'Tool Replay fault ws_close (rule "r")')
  assert.ok(bodies.has(closed?.messages[3]?.body.digest ?? ''), 'the close payload is among the bodies')
  // The app's own answer to the close, as the upstream got it (a live fault): kept as the app sent it.
  const echo = bodyFromChunks([{ bytes: closePayload(1012, 'Tool Replay fault ws_close (rule "r")'), atMs: 5 }])
  const answered = {
    ...up,
    messages: [
      ...up.messages.slice(0, 4),
      { from: 'client' as const, opcode: 'close' as const, atMs: 5, body: echo.ref, close: { code: 1012, reason: 'Tool Replay fault ws_close (rule "r")' } },
    ],
  }
  const real = liveWebSocketView(answered, { kind: 'ws_close', after: 2, code: 1012, reason: 'Tool Replay fault ws_close (rule "r")' }, bodies)
  assert.deepEqual(shape(real), ['s@1', 'c@2', 's@3', 's:close1012@3', 'c:close1012@5'])
  assert.equal(real?.messages[4]?.body.digest, echo.ref.digest)
  // A reason past a close frame's 123 bytes: the trace says what the frame carried, as the app got it.
  const long = liveWebSocketView(up, { kind: 'ws_close', after: 2, code: 1012, reason: `Tool Replay fault ws_close (rule "${'r'.repeat(150)}")` }, bodies)
  const sent = long?.messages[3]
  assert.equal(Buffer.byteLength(sent?.close?.reason ?? ''), 120)
  assert.equal(
    sent?.close?.reason,
    Buffer.from(bodies.get(sent?.body.digest ?? '') ?? [])
      .subarray(2)
      .toString('utf8'),
  )
  assert.deepEqual(shape(liveWebSocketView(up, { kind: 'ws_drop', messages: [2, 4, 9] }, bodies)), ['s@1', 'c@2', 's@4', 'c@100'])
  // Delayed from the 3rd server message by 200 ms: the client's message at 100 was sent before they arrived (at
  // 204 and 301), so it stays before them; the client's own times are kept.
  assert.deepEqual(shape(liveWebSocketView(up, { kind: 'ws_delay', from: 3, ms: 200 }, bodies)), ['s@1', 'c@2', 's@3', 'c@100', 's@204', 's@301'])
  // A client message sent just as a delayed message arrived (a timer may fire a ms early) still comes after it, and
  // the delayed message takes the answer's time: times never go back (the store refuses a session whose do).
  const tight = liveSession([
    ['server', 10],
    ['client', 409],
  ])
  assert.deepEqual(shape(liveWebSocketView(tight, { kind: 'ws_delay', from: 1, ms: 400 }, bodies)), ['s@409', 'c@409'])
  // The session ended before the fault's message: it did not apply.
  assert.equal(liveWebSocketView(up, { kind: 'ws_close', after: 5, code: 1011, reason: 'x' }, bodies), undefined)
  assert.equal(liveWebSocketView(up, { kind: 'ws_drop', messages: [5] }, bodies), undefined)
  assert.equal(JSON.stringify(up), before, "the upstream's session is left as it is")
  const record = websocketUpstream(up)
  assert.deepEqual(
    record.messages.map((m) => [m.from, m.atMs, m.size]),
    up.messages.map((m) => [m.from, m.atMs, m.body.size]),
  )
  assert.equal(record.messages[0]?.digest, up.messages[0]?.body.digest)
})
