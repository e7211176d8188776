import assert from 'node:assert/strict'
import { test } from 'node:test'
import { bodyFromBytes, bodyFromChunks } from './body.ts'
import { diffTraces } from './diff.ts'
import type { Exchange, Trace, WebSocketMessage } from './exchange.ts'
import { exchangeProblem } from './validate.ts'
import { closePayload, readClosePayload, websocketBodyRefs, websocketMatchKey } from './websocket.ts'

const enc = new TextEncoder()

/** A WebSocket session exchange: a text message each way, a fragmented binary one, a close. */
function websocketExchange(): { x: Exchange; bodies: Map<string, Uint8Array> } {
  const bodies = new Map<string, Uint8Array>()
  const keep = (b: { ref: WebSocketMessage['body']; bytes: Uint8Array }) => {
    bodies.set(b.ref.digest, b.bytes)
    return b.ref
  }
  const empty = keep(bodyFromBytes(new Uint8Array()))
  const x: Exchange = {
    seq: 0,
    request: { method: 'GET', url: 'https://api.test/socket', headers: [['upgrade', 'websocket']], body: null },
    outcome: { kind: 'response', response: { status: 101, statusText: 'Switching Protocols', headers: [['upgrade', 'websocket']], trailers: [], body: empty } },
    timing: { startMs: 0, headersMs: 2 },
    websocket: {
      messages: [
        { from: 'client', opcode: 'text', atMs: 3, body: keep(bodyFromBytes(enc.encode('{"type":"hi","event_id":"e1"}'))) },
        {
          from: 'server',
          opcode: 'binary',
          atMs: 5,
          body: keep(
            bodyFromChunks([
              { bytes: new Uint8Array([0, 1, 2]), atMs: 4 },
              { bytes: new Uint8Array([255]), atMs: 5 },
            ]),
          ),
        },
        { from: 'server', opcode: 'close', atMs: 6, body: keep(bodyFromBytes(closePayload(1000, 'bye'))), close: { code: 1000, reason: 'bye' } },
      ],
    },
  }
  return { x, bodies }
}

test('a WebSocket session is a valid exchange: 101, GET, messages in order with bodies', () => {
  const { x, bodies } = websocketExchange()
  assert.equal(exchangeProblem(x, bodies), undefined)
  assert.equal(websocketBodyRefs(x).length, 3)
})

test('101 only with a websocket field, and a websocket field only with 101 and an empty body', () => {
  const problem = (edit: (x: Exchange) => void) => {
    const { x, bodies } = websocketExchange()
    edit(x)
    const p = exchangeProblem(x, bodies)
    return p && `${p.path}: ${p.problem}`
  }
  const response = (x: Exchange) => (x.outcome as Extract<Exchange['outcome'], { kind: 'response' }>).response
  assert.match(problem((x) => delete x.websocket) ?? '', /outcome\.response\.status: is 101; .*only for a WebSocket session/)
  assert.match(problem((x) => (response(x).status = 200)) ?? '', /outcome\.response\.status: is 200; a WebSocket session's response is the 101/)
  assert.match(problem((x) => (response(x).body = bodyFromBytes(enc.encode('x')).ref)) ?? '', /outcome\.response\.body: must be empty/)
  assert.match(problem((x) => (x.request.method = 'POST')) ?? '', /request\.method: is POST; a WebSocket session is opened by a GET/)
  const messages = (x: Exchange) => x.websocket?.messages as WebSocketMessage[]
  assert.match(
    problem((x) => ((messages(x)[0] as WebSocketMessage).opcode = 'continuation' as 'text')) ?? '',
    /messages\[0\]\.opcode: must be one of text, binary/,
  )
  assert.match(problem((x) => ((messages(x)[2] as WebSocketMessage).atMs = 1)) ?? '', /messages\[2\]\.atMs: is 1, before the message ahead of it/)
  assert.match(problem((x) => ((messages(x)[2] as WebSocketMessage).close = { code: 1006, reason: '' })) ?? '', /close\.code: is 1006/)
  assert.match(problem((x) => ((messages(x)[0] as WebSocketMessage).close = { code: 1000, reason: '' })) ?? '', /only a close message has a code/)
  assert.match(
    problem((x) => {
      const big = bodyFromBytes(new Uint8Array(126))
      ;(messages(x)[2] as WebSocketMessage).body = big.ref
    }) ?? '',
    /has 126 bytes; a close payload is at most 125/,
  )
  assert.match(problem((x) => (x.websocket = { messages: [], end: { code: 'bad code', message: '', atMs: 0 } })) ?? '', /websocket\.end\.code/)
})

test('close payloads: code and reason both ways; a long reason is cut to fit a control frame', () => {
  assert.deepEqual(readClosePayload(closePayload(4008, 'TR_REPLAY_MISS: no match')), { code: 4008, reason: 'TR_REPLAY_MISS: no match' })
  assert.equal(readClosePayload(new Uint8Array()), undefined)
  const long = closePayload(1008, 'é'.repeat(200))
  assert.ok(long.byteLength <= 125)
  assert.match(readClosePayload(long)?.reason ?? '', /^é+$/)
})

test('match keys: JSON text without volatile keys; binary byte for byte', () => {
  const a = websocketMatchKey('text', enc.encode('{"type":"x","event_id":"e1","item":{"id":"i1","n":1}}'))
  const b = websocketMatchKey('text', enc.encode('{"item":{"n":1,"id":"i2"},"type":"x","event_id":"e9"}'))
  assert.equal(a, b)
  assert.notEqual(a, websocketMatchKey('text', enc.encode('{"type":"x","item":{"n":2}}')))
  assert.notEqual(websocketMatchKey('binary', new Uint8Array([1, 2])), websocketMatchKey('binary', new Uint8Array([1, 3])))
  assert.notEqual(websocketMatchKey('text', enc.encode('hello')), websocketMatchKey('binary', enc.encode('hello')))
  assert.equal(websocketMatchKey('text', enc.encode('{"n":12345678901234567890}')), websocketMatchKey('text', enc.encode('{"n": 12345678901234567890}')))
})

test('diff reads a session message by message: equal sessions (ids and event_ids aside) diff empty; a changed delta is named by its path', () => {
  const session = (name: string, delta: string, eventId: string): Trace => {
    const bodies = new Map<string, Uint8Array>()
    const keep = (bytes: Uint8Array) => {
      const b = bodyFromBytes(bytes)
      bodies.set(b.ref.digest, b.bytes)
      return b.ref
    }
    const x: Exchange = {
      seq: 0,
      request: { method: 'GET', url: 'https://api.test/v1/realtime?model=m', headers: [], body: null },
      outcome: { kind: 'response', response: { status: 101, statusText: 'Switching Protocols', headers: [], trailers: [], body: keep(new Uint8Array()) } },
      timing: { startMs: 0, headersMs: 1 },
      websocket: {
        messages: [
          { from: 'client', opcode: 'text', atMs: 2, body: keep(enc.encode(`{"type":"response.create","event_id":"${eventId}"}`)) },
          { from: 'server', opcode: 'text', atMs: 3, body: keep(enc.encode(`{"type":"response.output_text.delta","delta":"${delta}"}`)) },
          { from: 'server', opcode: 'binary', atMs: 4, body: keep(new Uint8Array([1, 2, 3])) },
        ],
      },
    }
    return { meta: { name, format: 1 }, exchanges: [x], bodies }
  }
  assert.equal(diffTraces(session('a', 'Hi', 'event_1a2b3c4d5e6f7a8b9c0d'), session('b', 'Hi', 'event_9f8e7d6c5b4a3f2e1d0c')).differences.length, 0)
  const d = diffTraces(session('a', 'Hi', 'e1'), session('b', 'Ho', 'e1'))
  assert.equal(d.differences.length, 1)
  assert.deepEqual(d.differences[0]?.details, [{ side: 'response', field: 'body', path: 'websocket.messages[1].delta', before: 'Hi', after: 'Ho' }])
})
