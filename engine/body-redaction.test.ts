import assert from 'node:assert/strict'
import { test } from 'node:test'
import * as zlib from 'node:zlib'
import { createMemoryStore } from '../store/index.ts'
import { bodyBytes, decodeContentEncoding, ErrorCodes, type HeaderPairs } from '../trace/index.ts'
import { redactBody } from './body-redaction.ts'
import { openSession } from './open-session.ts'
import { Redactor } from './redaction.ts'

const SECRET = 'sk-gzip-planted-0f9e8d7c6b5a4'
// A big integer and a number spelling a double would change: redaction must leave them byte for byte.
const plain = `{"model": "m", "api_key": "${SECRET}", "n": 12345678901234567890, "keep": 1.50}`
const redactor = new Redactor({ bodyPaths: ['$.api_key'] })
const dec = new TextDecoder()

const zstd = (zlib as unknown as { zstdCompressSync?: (b: Uint8Array) => Buffer }).zstdCompressSync
const codings: Array<[string, (b: Buffer) => Buffer]> = [
  ['gzip', (b) => zlib.gzipSync(b)],
  ['br', (b) => zlib.brotliCompressSync(b)],
  ['deflate', (b) => zlib.deflateSync(b)],
  ...(zstd ? ([['zstd', (b: Buffer) => zstd(b)]] as Array<[string, (b: Buffer) => Buffer]>) : []),
]

test('compressed JSON bodies are decoded, redacted at the path only, and stored decoded with their length fixed', () => {
  for (const [coding, compress] of codings) {
    const wire = compress(Buffer.from(plain))
    const headers: HeaderPairs = [
      ['Content-Type', 'application/json'],
      ['Content-Encoding', coding],
      ['Content-Length', String(wire.byteLength)],
    ]
    const out = redactBody(redactor, wire, headers)
    assert.ok(typeof out === 'object', coding)
    const text = dec.decode(out.bytes)
    assert.equal(text, plain.replace(SECRET, '[REDACTED]'), `${coding}: only the redacted value changed (big integer and spelling kept)`)
    assert.deepEqual(out.headers, [
      ['Content-Type', 'application/json'],
      ['Content-Length', String(out.bytes.byteLength)],
    ])
  }
})

test('bodies with nothing to redact, non-JSON or undecodable bodies come back unchanged', () => {
  const gz = zlib.gzipSync('{"other":1}')
  assert.equal(redactBody(redactor, gz, [['content-encoding', 'gzip']]), 'unchanged')
  assert.equal(redactBody(redactor, zlib.gzipSync('plain text'), [['content-encoding', 'gzip']]), 'unchanged')
  assert.equal(redactBody(redactor, Buffer.from('not gzip at all'), [['content-encoding', 'gzip']]), 'unchanged')
  assert.equal(redactBody(new Redactor(), zlib.gzipSync(plain), [['content-encoding', 'gzip']]), 'unchanged', 'no body paths: nothing decoded')
})

/** 1 GiB of spaces behind a JSON prefix holding the key, as 1024 concatenated gzip members (about 1 MB). */
function bomb(): Buffer {
  const member = zlib.gzipSync(Buffer.alloc(1024 * 1024, 0x20))
  return Buffer.concat([zlib.gzipSync(`{"api_key":"${SECRET}","pad":"`), ...Array.from({ length: 1024 }, () => member)])
}

test('a compression bomb is not expanded (decoding stops at the limit) and is never stored as it came', async () => {
  const b = bomb()
  assert.throws(() => decodeContentEncoding(b, 'gzip', { maxBytes: 64 * 1024 * 1024 }), { code: 'ERR_BUFFER_TOO_LARGE' })
  assert.equal(redactBody(redactor, b, [['content-encoding', 'gzip']], 64 * 1024 * 1024), 'too-large')
  // As a request: refused (neither sent nor stored). As a response: kept as a TR_BODY_NOT_REDACTED failure.
  const store = createMemoryStore()
  const rec = await openSession({ mode: 'record', trace: 'bomb', store, redaction: { bodyPaths: ['$.api_key'] } })
  const headers: HeaderPairs = [
    ['content-type', 'application/json'],
    ['content-encoding', 'gzip'],
  ]
  const refused = await rec.handle({ method: 'POST', url: 'https://api.test/up', headers, body: b })
  assert.ok(refused.kind === 'fail' && refused.error.code === ErrorCodes.REQUEST_TOO_LARGE, refused.kind === 'fail' ? refused.error.message : refused.kind)
  const d = await rec.handle({ method: 'GET', url: 'https://api.test/down', headers: [], body: null })
  assert.equal(d.kind, 'forward')
  if (d.kind !== 'forward') return
  d.recorder.responseStart({ status: 200, statusText: 'OK', headers })
  d.recorder.responseData(b)
  await d.recorder.responseEnd()
  await rec.close()
  const trace = await store.readTrace('bomb')
  assert.deepEqual(
    trace.exchanges.map((x) => (x.outcome.kind === 'error' ? x.outcome.error.code : 'response')),
    ['TR_BODY_NOT_REDACTED'],
  )
  assert.equal(trace.bodies.size, 0, 'nothing of the bomb reached the store')
})

test('a gzip request body is stored decoded and redacted, and replays match it (a different secret, compressed again)', async () => {
  const store = createMemoryStore()
  const rec = await openSession({ mode: 'record', trace: 'gz', store, redaction: { bodyPaths: ['$.api_key'] } })
  const wire = zlib.gzipSync(plain)
  const request = (body: Buffer) => ({
    method: 'POST',
    url: 'https://api.test/v1/chat',
    headers: [
      ['content-type', 'application/json'],
      ['content-encoding', 'gzip'],
      ['content-length', String(body.byteLength)],
    ] as HeaderPairs,
    body,
  })
  const d = await rec.handle(request(wire))
  assert.equal(d.kind, 'forward')
  if (d.kind !== 'forward') return
  d.recorder.responseStart({ status: 200, statusText: 'OK', headers: [['content-type', 'application/json']] })
  d.recorder.responseData(Buffer.from('{"ok":true}'))
  await d.recorder.responseEnd()
  await rec.close()
  const trace = await store.readTrace('gz')
  const x = trace.exchanges[0]
  assert.ok(x?.request.body)
  const stored = dec.decode(bodyBytes(trace, x.request.body))
  assert.equal(stored, plain.replace(SECRET, '[REDACTED]'))
  assert.deepEqual(x.request.headers, [
    ['content-type', 'application/json'],
    ['content-length', String(Buffer.byteLength(stored))],
  ])
  const rep = await openSession({ mode: 'replay', trace: 'gz', store, redaction: { bodyPaths: ['$.api_key'] } })
  const again = await rep.handle(request(zlib.gzipSync(plain.replace(SECRET, 'sk-another-key-entirely-1234'), { level: 1 })))
  assert.equal(again.kind, 'replay', again.kind === 'fail' ? again.error.message : '')
  rep.assertDone()
})
