import assert from 'node:assert/strict'
import https from 'node:https'
import { test } from 'node:test'
import { ignoreMockedTlsSessions } from './mocked-tls-session.ts'
import { outgoingHeaders } from './node-http-forward.ts'
import { closedNotReset, responseHeaders } from './node-http-response.ts'

test('a replayed head keeps repeats and framing, drops what described the recorded connection, closes when asked', () => {
  const recorded: Array<[string, string]> = [
    ['Content-Type', 'text/event-stream'],
    ['Set-Cookie', 'a=1'],
    ['Connection', 'keep-alive'],
    ['Keep-Alive', 'timeout=5'],
    ['Set-Cookie', 'b=2'],
    ['Transfer-Encoding', 'chunked'],
  ]
  assert.deepEqual(responseHeaders(recorded, false), [
    ['Content-Type', 'text/event-stream'],
    ['Set-Cookie', 'a=1'],
    ['Set-Cookie', 'b=2'],
    ['Transfer-Encoding', 'chunked'],
  ])
  assert.deepEqual(responseHeaders([['content-length', '2']], true), [
    ['content-length', '2'],
    ['connection', 'close'],
  ])
})

test('a forwarded request says the length of the body it sends, and none without a body', () => {
  assert.deepEqual(
    outgoingHeaders(
      [
        ['host', 'a.test'],
        ['Content-Length', '99'],
        ['x', '1'],
      ],
      new Uint8Array(3),
    ),
    ['host', 'a.test', 'x', '1', 'content-length', '3'],
  )
  assert.deepEqual(
    outgoingHeaders(
      [
        ['host', 'a.test'],
        ['content-length', '11'],
      ],
      null,
    ),
    ['host', 'a.test'],
  )
})

test('a server that closed mid-body is told apart from a reset', () => {
  const error = (code: string | undefined, message: string) => Object.assign(new Error(message), code ? { code } : {})
  assert.equal(closedNotReset(error('ECONNRESET', 'aborted')), true, "Node's own report of a closed connection")
  assert.equal(closedNotReset(error('UND_ERR_SOCKET', 'other side closed')), true)
  assert.equal(closedNotReset(error('UND_ERR_ABORTED', 'The client aborted the request before the response ended.')), true)
  assert.equal(closedNotReset(error('ECONNRESET', 'read ECONNRESET')), false)
  assert.equal(closedNotReset(error('EPIPE', 'write EPIPE')), false)
})

test("https agents drop msw's fake TLS session (raw or in Node's wrapper) and keep real ones", () => {
  ignoreMockedTlsSessions()
  const agent = new https.Agent() as https.Agent & { _cacheSession(k: string, s: Buffer): void; _getSession(k: string): Buffer | undefined }
  agent._cacheSession('a', Buffer.concat([Buffer.from('\0nodejs:tls:session:1\0\0\tlocalhost'), Buffer.from('mocked session')]))
  assert.equal(agent._getSession('a'), undefined)
  agent._cacheSession('b', Buffer.from('mocked session'))
  assert.equal(agent._getSession('b'), undefined)
  const real = Buffer.from('3082010a0201', 'hex')
  agent._cacheSession('c', real)
  assert.deepEqual(agent._getSession('c'), real)
  agent.destroy()
})
