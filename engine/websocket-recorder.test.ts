import assert from 'node:assert/strict'
import { test } from 'node:test'
import { type Exchange, exchangeProblem } from '../trace/index.ts'
import { PASSTHROUGH_RECORDER } from './exchange-recorder.ts'
import { Redactor } from './redaction.ts'
import { createWebSocketRecorder } from './websocket-recorder.ts'

const enc = new TextEncoder()
const request = { method: 'GET', url: 'https://api.test/rt', headers: [] as Array<[string, string]>, body: null }

function recorder(options: { bodyPaths?: string[]; maxBytes?: number } = {}) {
  let written: { exchange: Exchange; bodies: ReadonlyMap<string, Uint8Array> } | undefined
  let clock = 0
  const rec = createWebSocketRecorder(
    {
      redactor: new Redactor(options.bodyPaths ? { bodyPaths: options.bodyPaths } : {}),
      maxBytes: options.maxBytes ?? 1024,
      write: async (exchange, bodies) => {
        written = { exchange, bodies }
      },
      http: () => PASSTHROUGH_RECORDER,
      now: () => (clock += 1),
    },
    request,
    0,
    0,
  )
  return {
    rec,
    get written() {
      return written as { exchange: Exchange; bodies: ReadonlyMap<string, Uint8Array> }
    },
  }
}

test('frames become messages: fragments as chunks, control frames between fragments kept, close code read; the exchange is valid', async () => {
  const r = recorder()
  r.rec.opened({ status: 101, statusText: 'Switching Protocols', headers: [['upgrade', 'websocket']] })
  r.rec.frame('server', 'binary', false, new Uint8Array([1, 2]))
  r.rec.frame('server', 'ping', true, new Uint8Array([9]))
  r.rec.frame('server', 'continuation', true, new Uint8Array([3]))
  r.rec.frame('client', 'close', true, new Uint8Array([0x03, 0xe8, 0x62, 0x79, 0x65]))
  await r.rec.end()
  const { exchange, bodies } = r.written
  assert.equal(exchangeProblem(exchange, bodies), undefined)
  const messages = exchange.websocket?.messages ?? []
  assert.deepEqual(
    messages.map((m) => `${m.from} ${m.opcode}`),
    ['server ping', 'server binary', 'client close'],
  )
  assert.deepEqual(
    messages[1]?.body.chunks.map((c) => c.size),
    [2, 1],
  )
  assert.deepEqual([...(bodies.get(messages[1]?.body.digest ?? '') ?? [])], [1, 2, 3])
  assert.deepEqual(messages[2]?.close, { code: 1000, reason: 'bye' })
  assert.equal(exchange.websocket?.end, undefined)
})

test('JSON text messages are redacted by body path before they are kept; a session over the limit stops recording and says so', async () => {
  const r = recorder({ bodyPaths: ['$.session.api_key'], maxBytes: 100 })
  r.rec.opened({ status: 101, statusText: 'Switching Protocols', headers: [] })
  r.rec.frame('client', 'text', true, enc.encode('{"type":"session.update","session":{"api_key":"sk-live-secret"}}'))
  r.rec.frame('server', 'binary', true, new Uint8Array(200))
  r.rec.frame('server', 'text', true, enc.encode('{"type":"late"}'))
  await r.rec.end({ code: 'ECONNRESET', message: 'reset' })
  const { exchange, bodies } = r.written
  const stored = [...bodies.values()].map((b) => Buffer.from(b).toString('utf8')).join('\n')
  assert.ok(!stored.includes('sk-live-secret'))
  assert.match(stored, /"api_key":"\[REDACTED\]"/)
  assert.equal(exchange.websocket?.messages.length, 1)
  assert.equal(exchange.websocket?.end?.code, 'TR_SESSION_TOO_LARGE')
  assert.equal(exchangeProblem(exchange, bodies), undefined)
})
