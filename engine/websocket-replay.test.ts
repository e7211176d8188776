import assert from 'node:assert/strict'
import { test } from 'node:test'
import { ErrorCodes } from '../trace/index.ts'
import { type PlayedMessage, WebSocketConversation, type WebSocketPlayback } from './websocket-replay.ts'

const enc = new TextEncoder()
const m = (from: 'client' | 'server', atMs: number, text: string, opcode: PlayedMessage['opcode'] = 'text'): PlayedMessage => ({
  from,
  opcode,
  atMs,
  frames: [enc.encode(text)],
})

function playback(): WebSocketPlayback {
  return {
    head: { status: 101, statusText: 'Switching Protocols', headers: [] },
    headersMs: 5,
    messages: [
      m('server', 10, '{"type":"session.created"}'),
      m('client', 20, '{"type":"session.update","event_id":"a"}'),
      m('server', 25, '{"type":"session.updated"}'),
      m('client', 30, 'x', 'ping'),
      m('server', 31, 'x', 'pong'),
      m('client', 40, '{"type":"response.create","event_id":"b"}'),
      m('server', 50, '{"type":"response.done"}'),
    ],
  }
}

test('unprompted server messages open the session; each client message gets what followed it, at offsets from it', () => {
  const c = new WebSocketConversation(playback(), 'GET https://api.test/rt', 't')
  assert.deepEqual(
    c.opening().map((s) => [s.afterMs, s.message.atMs]),
    [[5, 10]],
  )
  const first = c.client('text', enc.encode('{"event_id":"other","type":"session.update"}'))
  assert.equal(first.kind, 'answer')
  // The recorded pong is not played (the path answers pings itself).
  assert.deepEqual(first.kind === 'answer' && first.messages.map((s) => s.afterMs), [5])
  assert.equal(c.finished, false)
  const second = c.client('text', enc.encode('{"type":"response.create"}'))
  assert.deepEqual(second.kind === 'answer' && second.messages.map((s) => s.afterMs), [10])
  assert.equal(c.finished, true)
})

test('a client message nothing recorded matches is a miss naming the message, its type and what was expected', () => {
  const c = new WebSocketConversation(playback(), 'GET https://api.test/rt', 't')
  const turn = c.client('text', enc.encode('{"type":"input_audio_buffer.append"}'))
  assert.equal(turn.kind, 'miss')
  if (turn.kind !== 'miss') return
  assert.equal(turn.error.code, ErrorCodes.REPLAY_MISS)
  assert.match(
    turn.error.message,
    /^Failed to replay WebSocket message #1 from the client on "GET https:\/\/api\.test\/rt": no recorded client message of trace "t" matches a text message of type "input_audio_buffer\.append" \(36 bytes\) \(the next one recorded is a text message of type "session\.update"/,
  )
  // A recorded message is answered once: the same message again is a miss too.
  c.client('text', enc.encode('{"type":"session.update"}'))
  assert.equal(c.client('text', enc.encode('{"type":"session.update"}')).kind, 'miss')
})

test('client messages a replay never received are unused ledger entries (TR_REPLAY_UNUSED), by position and type; none once all came', async () => {
  const { WebSocketUsage } = await import('./websocket-replay.ts')
  const usage = new WebSocketUsage()
  const x = { seq: 3, request: { method: 'GET', url: 'wss://api.test/rt', headers: [], body: null } }
  const played = usage.track(playback(), x)
  // A session handed to a path whose conversation never started: every client message is unused.
  const other = new WebSocketUsage()
  other.track(playback(), x)
  assert.deepEqual(
    other.unused().map((e) => e.request),
    ['GET wss://api.test/rt client message #1', 'GET wss://api.test/rt client message #2'],
  )
  const c = new WebSocketConversation(played, 'GET wss://api.test/rt', 't')
  c.client('text', enc.encode('{"type":"session.update"}'))
  const [entry, extra] = usage.unused()
  assert.equal(extra, undefined)
  assert.equal(entry?.code, ErrorCodes.REPLAY_UNUSED)
  assert.equal(entry?.request, 'GET wss://api.test/rt client message #2')
  assert.match(
    entry?.message ?? '',
    /^never sent: the recording's client message #2 of WebSocket session #3 \(a text message of type "response\.create" \(\d+ bytes\)\) did not come in replay/,
  )
  c.client('text', enc.encode('{"type":"response.create"}'))
  assert.deepEqual(usage.unused(), [])
})

test('a recording the run cut with the socket open (TR_SESSION_CLOSED) replays open; a reset is played as one', () => {
  const cut = { ...playback(), end: { code: 'TR_SESSION_CLOSED', message: 'The session closed while the WebSocket was open.', atMs: 900 } }
  assert.equal(new WebSocketConversation(cut, 'GET https://api.test/rt', 't').end, undefined)
  const reset = { ...playback(), end: { code: 'ECONNRESET', message: 'reset', atMs: 60 } }
  assert.equal(new WebSocketConversation(reset, 'GET https://api.test/rt', 't').end?.code, 'ECONNRESET')
})
