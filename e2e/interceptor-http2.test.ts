/**
 * node:http2 in-process: while install() is in place `http2.connect` (also through an ESM named import) is
 * captured, each stream one exchange. Recorded against a counting HTTP/2 upstream, then strictly replayed
 * with that upstream stopped: the app reads the same heads, DATA frames, trailers and resets, and the
 * upstream saw no further connection. Passthrough goes live and records nothing; a connection the upstream
 * refused is recorded and replayed as the app session's error; close() gives node:http2 back.
 */
import assert from 'node:assert/strict'
import http2, { type ClientHttp2Session, connect as namedConnect } from 'node:http2'
import { createServer } from 'node:net'
import { test } from 'node:test'
import { install } from 'tool-replay/interceptor'
import { createMemoryStore } from 'tool-replay/store'
import { H2_CHUNKS, H2_HELLO, H2_PARTIAL, type Http2Read, h2Request, startHttp2Upstream } from './support/http2-upstream.ts'

/** The scenario on one session: concurrent streams, then a reset. */
async function scenario(session: ClientHttp2Session) {
  session.on('error', () => {})
  try {
    const [hello, stream, only, echo] = await Promise.all([
      h2Request(session, '/hello'),
      h2Request(session, '/stream'),
      h2Request(session, '/trailers-only'),
      h2Request(session, '/echo', { method: 'POST', body: 'ping in-process', headers: { 'content-type': 'application/octet-stream' } }),
    ])
    const resetMid = await h2Request(session, '/reset-mid')
    return { hello, stream, only, echo, resetMid }
  } finally {
    session.close()
  }
}

function withoutDate(r: Http2Read) {
  const { date: _, ...headers } = r.headers
  return { ...r, headers }
}

test('http2.connect is recorded in-process, then strictly replayed with the upstream stopped', async () => {
  const upstream = await startHttp2Upstream()
  const url = `http://127.0.0.1:${upstream.port}`
  const store = createMemoryStore()
  const rec = await install({ mode: 'record', trace: 'h2', store })
  let live: Awaited<ReturnType<typeof scenario>>
  try {
    live = await scenario(http2.connect(url))
  } finally {
    await rec.close()
  }
  assert.equal(upstream.connections, 1, 'the live streams shared one upstream session')
  assert.deepEqual(live.hello.chunks, [H2_HELLO])
  assert.deepEqual(live.stream.chunks, H2_CHUNKS)
  assert.deepEqual(live.stream.trailers, { 'x-checksum': 'abc123', 'x-count': '3' })
  assert.equal(live.only.headersEnded, true)
  assert.deepEqual(live.echo.chunks, ['ping in-process'])
  assert.deepEqual(live.resetMid.chunks, [H2_PARTIAL])
  assert.equal(live.resetMid.rstCode, http2.constants.NGHTTP2_ENHANCE_YOUR_CALM)
  const trace = await store.readTrace('h2')
  assert.equal(trace.exchanges.length, 5)
  assert.equal(trace.meta.labels?.recordedWith, 'interceptor')
  await upstream.close()

  const rep = await install({ mode: 'replay', trace: 'h2', store })
  let replayed: Awaited<ReturnType<typeof scenario>>
  try {
    // Through the ESM named import as well: it is the same captured function.
    replayed = await scenario(namedConnect(url))
    rep.assertDone()
  } finally {
    await rep.close()
  }
  assert.equal(upstream.connections, 1, 'nothing reached the stopped upstream')
  for (const k of ['hello', 'stream', 'only', 'echo', 'resetMid'] as const) {
    assert.deepEqual(withoutDate(replayed[k]), withoutDate(live[k]), `${k} replays as it was read live`)
  }
})

test('passthrough goes live and records nothing; close() gives node:http2 back', async () => {
  const upstream = await startHttp2Upstream()
  const url = `http://127.0.0.1:${upstream.port}`
  const store = createMemoryStore()
  const pass = await install({ mode: 'passthrough', trace: 'h2-pass', store })
  try {
    const s = http2.connect(url)
    const got = await h2Request(s, '/stream')
    s.close()
    assert.deepEqual(got.chunks, H2_CHUNKS)
    assert.deepEqual(got.trailers, { 'x-checksum': 'abc123', 'x-count': '3' })
    assert.equal(upstream.connections, 1)
  } finally {
    await pass.close()
  }
  const after = http2.connect(url)
  const direct = await h2Request(after, '/hello')
  after.close()
  assert.deepEqual(direct.chunks, [H2_HELLO])
  assert.equal(upstream.connections, 2, 'after close() the app connects directly')
  assert.equal(pass.summary().recorded, 0)
  await upstream.close()
})

test('a refused connection is recorded, and replayed as the app session error it was', async () => {
  const probe = createServer().listen(0, '127.0.0.1')
  await new Promise((r) => probe.once('listening', r))
  const port = (probe.address() as { port: number }).port
  await new Promise<void>((r) => probe.close(() => r()))
  const url = `http://127.0.0.1:${port}`
  const store = createMemoryStore()
  const attempt = async () => {
    const s = http2.connect(url)
    const sessionError = new Promise<Error & { code?: string }>((resolve) => s.once('error', resolve))
    const read = await h2Request(s, '/hello')
    return { read, error: await sessionError }
  }
  const rec = await install({ mode: 'record', trace: 'h2-refused', store })
  const live = await attempt().finally(() => rec.close())
  assert.equal(live.error.code, 'ECONNREFUSED')
  const x = (await store.readTrace('h2-refused')).exchanges[0]
  assert.equal(x?.outcome.kind, 'error')
  if (x?.outcome.kind === 'error') {
    assert.equal(x.outcome.error.code, 'ECONNREFUSED')
    assert.equal(x.outcome.error.phase, 'connect')
  }
  const rep = await install({ mode: 'replay', trace: 'h2-refused', store })
  const replayed = await attempt().finally(() => rep.close())
  assert.equal(replayed.error.code, 'ECONNREFUSED')
  assert.equal(replayed.error.message, live.error.message)
  assert.equal(replayed.read.error, live.read.error)
  assert.equal(rep.summary().ok, true)
})

test('an app that cancels a stream after its first DATA frame: the recording still holds the whole response (bounded drain)', async () => {
  const upstream = await startHttp2Upstream()
  const store = createMemoryStore()
  const rec = await install({ mode: 'record', trace: 'h2-cancel', store })
  try {
    const session = http2.connect(`http://127.0.0.1:${upstream.port}`)
    session.on('error', () => {})
    const stream = session.request({ ':path': '/stream' })
    stream.on('error', () => {})
    const [first] = (await new Promise((resolve) => stream.once('data', (c: Buffer) => resolve([c.toString()])))) as [string]
    assert.equal(first, H2_CHUNKS[0])
    stream.close(http2.constants.NGHTTP2_CANCEL)
    await new Promise((r) => stream.once('close', r))
    session.close()
  } finally {
    await rec.close()
    await upstream.close()
  }
  const x = (await store.readTrace('h2-cancel')).exchanges[0]
  assert.equal(x?.outcome.kind, 'response', 'drained to its end, not recorded as the abort')
  if (x?.outcome.kind === 'response') {
    assert.equal(x.outcome.response.body.chunks.length, H2_CHUNKS.length)
    assert.deepEqual(x.outcome.response.trailers, [
      ['x-checksum', 'abc123'],
      ['x-count', '3'],
    ])
  }
})
