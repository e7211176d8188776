/**
 * HTTP/2 through the proxy: a client that chooses h2 by ALPN inside the CONNECT tunnel is served over
 * HTTP/2, each stream recorded as an exchange (headers, DATA frames as chunks, trailers, a stream reset as a
 * failure with its phase) from an upstream that speaks HTTP/2, then strictly replayed with the upstream
 * stopped (its connection count stays where recording left it). An HTTP/1.1 recording replays to an HTTP/2
 * client and the reverse: the request's identity does not depend on the protocol.
 */
import assert from 'node:assert/strict'
import { once } from 'node:events'
import http2 from 'node:http2'
import { connect } from 'node:net'
import { before, test } from 'node:test'
import { ProxyAgent, request } from 'undici'
import { openSession } from '../engine/index.ts'
import { loadCertificateAuthority, type ProxyServer, parseReverse, startProxy } from '../proxy/index.ts'
import { createMemoryStore, type TraceStore } from '../store/index.ts'
import { bodyBytes } from '../trace/index.ts'
import {
  connectThroughProxy,
  H2_CHUNKS,
  H2_HELLO,
  H2_PARTIAL,
  type Http2Read,
  type Http2Upstream,
  h2Request,
  startHttp2Upstream,
} from './support/http2-upstream.ts'
import { startTestProxy, tempDir } from './support/proxy-harness.ts'
import { createTestPki } from './support/proxy-upstream.ts'

let pki: Awaited<ReturnType<typeof createTestPki>>
const storeDir = tempDir('tr-proxy-h2-')

before(async () => {
  pki = await createTestPki(['api.test'])
})

function proxyFor(store: TraceStore, trace: string, mode: 'record' | 'replay', upstream: Http2Upstream | undefined): Promise<ProxyServer> {
  return startTestProxy({
    store,
    storeDir,
    trace,
    mode,
    upstreamCaPem: pki.caPem,
    // Replay points at a port nothing listens on any more: a forward would fail, not pass.
    resolve: { 'api.test': { host: '127.0.0.1', port: upstream?.port ?? 1 } },
  })
}

/** Runs the scenario's requests on one HTTP/2 session through `proxy`. */
async function scenario(proxy: ProxyServer) {
  const session = await connectThroughProxy(proxy.port, 'api.test', proxy.ca.certPem)
  try {
    const [hello, stream, only, echo] = await Promise.all([
      h2Request(session, '/hello'),
      h2Request(session, '/stream'),
      h2Request(session, '/trailers-only'),
      h2Request(session, '/echo', { method: 'POST', body: 'ping over h2', headers: { 'content-type': 'application/octet-stream' } }),
    ])
    const resetMid = await h2Request(session, '/reset-mid')
    const resetBefore = await h2Request(session, '/reset-before')
    return { hello, stream, only, echo, resetMid, resetBefore }
  } finally {
    session.close()
  }
}

test('an h2 client is recorded over HTTP/2 and strictly replayed with the upstream stopped', async () => {
  const store = createMemoryStore()
  const upstream = await startHttp2Upstream(pki.certs['api.test'])
  const rec = await proxyFor(store, 'h2', 'record', upstream)
  const live = await scenario(rec)
  await rec.close()
  assert.equal(upstream.connections, 1, 'one HTTP/2 connection carried every stream')
  await upstream.close()

  assert.equal(live.hello.status, 200)
  assert.equal(live.hello.headers['x-upstream'], 'h2', 'forwarded over HTTP/2')
  assert.deepEqual(live.hello.chunks, [H2_HELLO])
  assert.deepEqual(live.stream.chunks, H2_CHUNKS)
  assert.deepEqual(live.stream.trailers, { 'x-checksum': 'abc123', 'x-count': '3' })
  assert.equal(live.only.headersEnded, true, 'a Trailers-Only answer stays one HEADERS frame')
  assert.equal(live.only.headers['grpc-status'], '5')
  assert.deepEqual(live.echo.chunks, ['ping over h2'])
  assert.deepEqual(live.resetMid.chunks, [H2_PARTIAL])
  assert.equal(live.resetMid.rstCode, 11, 'the reset reaches the client with its code (ENHANCE_YOUR_CALM)')

  assert.equal(live.resetBefore.status, undefined)
  assert.equal(live.resetBefore.rstCode, 7, 'a reset before any head too (REFUSED_STREAM)')

  const trace = await store.readTrace('h2')
  assert.equal(trace.exchanges.length, 6)
  for (const x of trace.exchanges) {
    assert.ok(!x.request.headers.some(([k]) => k.startsWith(':')), 'no pseudo-header stored as a header')
    assert.match(x.request.url, /^https:\/\/api\.test\//)
  }
  const byPath = (p: string) => trace.exchanges.find((x) => new URL(x.request.url).pathname === p)
  const stream = byPath('/stream')?.outcome
  assert.equal(stream?.kind, 'response')
  if (stream?.kind === 'response') {
    assert.equal(stream.response.statusText, '')
    assert.equal(stream.response.body.chunks.length, 3, 'each DATA frame a chunk')
    assert.deepEqual(stream.response.trailers, [
      ['x-checksum', 'abc123'],
      ['x-count', '3'],
    ])
  }
  const before = byPath('/reset-before')?.outcome
  assert.equal(before?.kind === 'error' ? before.error.phase : before?.kind, 'response-headers')
  const reset = byPath('/reset-mid')?.outcome
  assert.equal(reset?.kind, 'error')
  if (reset?.kind === 'error') {
    assert.equal(reset.error.code, 'ERR_HTTP2_STREAM_ERROR')
    assert.equal(reset.error.phase, 'response-body')
    assert.match(reset.error.message, /NGHTTP2_ENHANCE_YOUR_CALM/)
    assert.equal(Buffer.from(bodyBytes(trace, reset.error.partial?.body ?? { digest: '', size: 0, chunks: [] })).toString(), H2_PARTIAL)
  }

  const rep = await proxyFor(store, 'h2', 'replay', undefined)
  const replayed = await scenario(rep)
  const summary = await rep.close()
  assert.equal(rep.stats.forwarded, 0)
  assert.equal(summary.ok, true, JSON.stringify(summary.misses))
  assert.equal(upstream.connections, 1, 'nothing reached the stopped upstream')
  for (const k of ['hello', 'stream', 'only', 'echo', 'resetMid', 'resetBefore'] as const) {
    const { headers: liveHeaders, ...l } = live[k]
    const { headers: replayHeaders, ...r } = replayed[k]
    assert.deepEqual(r, l, `${k} replays as it was read live`)
    delete liveHeaders.date
    delete replayHeaders.date
    assert.deepEqual(replayHeaders, liveHeaders, `${k}: the same response fields`)
  }
})

test('an HTTP/1.1 recording replays to an h2 client, and an h2 recording to an HTTP/1.1 client', async () => {
  const store = createMemoryStore()
  const upstream = await startHttp2Upstream(pki.certs['api.test'])
  const h1Agent = (proxy: ProxyServer) => new ProxyAgent({ uri: proxy.url, requestTls: { ca: proxy.ca.certPem } })

  const rec1 = await proxyFor(store, 'from-h1', 'record', upstream)
  const a1 = h1Agent(rec1)
  const r1 = await request('https://api.test/hello', { dispatcher: a1 })
  assert.equal(await r1.body.text(), H2_HELLO)
  assert.equal(r1.headers['x-upstream'], 'h1', 'an HTTP/1.1 client is forwarded over HTTP/1.1')
  await a1.close()
  await rec1.close()

  const rec2 = await proxyFor(store, 'from-h2', 'record', upstream)
  const s2 = await connectThroughProxy(rec2.port, 'api.test', rec2.ca.certPem)
  const live2 = await h2Request(s2, '/hello')
  s2.close()
  await rec2.close()
  assert.equal(live2.headers['x-upstream'], 'h2')
  const seen = upstream.connections
  await upstream.close()

  const rep1 = await proxyFor(store, 'from-h1', 'replay', undefined)
  const s1 = await connectThroughProxy(rep1.port, 'api.test', rep1.ca.certPem)
  const got1 = await h2Request(s1, '/hello')
  s1.close()
  const sum1 = await rep1.close()
  assert.equal(sum1.ok, true, JSON.stringify(sum1.misses))
  assert.equal(got1.status, 200)
  assert.deepEqual(got1.chunks, [H2_HELLO])
  assert.equal(got1.headers['x-upstream'], 'h1')
  assert.equal(got1.headers.connection, undefined, 'no connection-specific field over HTTP/2')

  const rep2 = await proxyFor(store, 'from-h2', 'replay', undefined)
  const a2 = h1Agent(rep2)
  const got2 = await request('https://api.test/hello', { dispatcher: a2 })
  assert.equal(got2.statusCode, 200)
  assert.equal(await got2.body.text(), H2_HELLO)
  assert.equal(got2.headers['x-upstream'], 'h2')
  await a2.close()
  const sum2 = await rep2.close()
  assert.equal(sum2.ok, true, JSON.stringify(sum2.misses))
  assert.equal(upstream.connections, seen, 'nothing reached the stopped upstream')
})

/** A reverse-mode proxy serving the h2c `upstream` (its port; nothing listens there in replay) with --h2c. */
async function reverseH2c(store: TraceStore, mode: 'record' | 'replay', port: number): Promise<ProxyServer> {
  const session = await openSession({ mode, trace: 'h2c', store, labels: { recordedWith: 'proxy' } })
  return startProxy({ session, ca: await loadCertificateAuthority(storeDir), reverse: parseReverse([`http://127.0.0.1:${port}`]), h2c: true })
}

test('h2c with prior knowledge in reverse mode (--h2c): recorded over h2c to an h2c upstream, replayed with it stopped', async () => {
  const store = createMemoryStore()
  const upstream = await startHttp2Upstream()
  const port = upstream.port
  const run = async (proxy: ProxyServer) => {
    const session = http2.connect(proxy.url)
    session.on('error', () => {})
    try {
      return await Promise.all([h2Request(session, '/hello'), h2Request(session, '/stream'), h2Request(session, '/trailers-only')])
    } finally {
      session.close()
    }
  }
  const rec = await reverseH2c(store, 'record', port)
  const live = await run(rec)
  await rec.close()
  assert.equal(upstream.connections, 1)
  await upstream.close()
  assert.equal(live[0].headers['x-upstream'], 'h2')
  assert.deepEqual(live[1].chunks, H2_CHUNKS)
  assert.deepEqual(live[1].trailers, { 'x-checksum': 'abc123', 'x-count': '3' })
  assert.equal(live[2].headersEnded, true)
  const trace = await store.readTrace('h2c')
  assert.deepEqual(
    trace.exchanges.map((x) => x.request.url).sort(),
    [`http://127.0.0.1:${port}/hello`, `http://127.0.0.1:${port}/stream`, `http://127.0.0.1:${port}/trailers-only`],
    'recorded under the upstream URL, as reverse mode records HTTP/1.1',
  )

  const rep = await reverseH2c(store, 'replay', port)
  const replayed = await run(rep)
  const summary = await rep.close()
  assert.equal(summary.ok, true, JSON.stringify(summary.misses))
  assert.equal(upstream.connections, 1, 'nothing reached the stopped upstream')
  const noDate = (r: Http2Read) => ({ ...r, headers: { ...r.headers, date: undefined } })
  assert.deepEqual(replayed.map(noDate), live.map(noDate))
})

test('without --h2c the HTTP/2 preface on the proxy port is refused, and HTTP/1.1 keeps working', async () => {
  const store = createMemoryStore()
  const session = await openSession({ mode: 'passthrough', trace: 'no-h2c', store })
  const proxy = await startProxy({ session, ca: await loadCertificateAuthority(storeDir) })
  try {
    const socket = connect(proxy.port, '127.0.0.1')
    await once(socket, 'connect')
    socket.write('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n')
    const [answer] = (await once(socket, 'data')) as [Buffer]
    assert.match(answer.toString(), /^HTTP\/1\.1 400 [\s\S]*only when the proxy is started with --h2c/)
    socket.destroy()
  } finally {
    await proxy.close()
  }
})

test('an upstream that never sends its head is cut at the headers timeout, recorded as UND_ERR_HEADERS_TIMEOUT, replayed alike', async () => {
  const store = createMemoryStore()
  const upstream = await startHttp2Upstream(pki.certs['api.test'])
  const ca = await loadCertificateAuthority(storeDir)
  const proxyFor = async (mode: 'record' | 'replay') =>
    startProxy({
      session: await openSession({ mode, trace: 'h2-timeout', store }),
      ca,
      upstream: { ca: pki.caPem, resolve: { 'api.test': { host: '127.0.0.1', port: upstream.port } }, headersTimeoutMs: 200 },
    })
  const ask = async (proxy: ProxyServer) => {
    const session = await connectThroughProxy(proxy.port, 'api.test', proxy.ca.certPem)
    try {
      return await h2Request(session, '/hang')
    } finally {
      session.close()
    }
  }
  const rec = await proxyFor('record')
  const live = await ask(rec)
  await rec.close()
  await upstream.close()
  assert.equal(live.status, 502)
  assert.equal(live.headers['x-tool-replay-upstream-error'], 'UND_ERR_HEADERS_TIMEOUT')
  const x = (await store.readTrace('h2-timeout')).exchanges[0]
  assert.equal(x?.outcome.kind === 'error' ? `${x.outcome.error.code} ${x.outcome.error.phase}` : x?.outcome.kind, 'UND_ERR_HEADERS_TIMEOUT response-headers')
  const rep = await proxyFor('replay')
  const replayed = await ask(rep)
  await rep.close()
  assert.deepEqual({ ...replayed, headers: { ...replayed.headers, date: undefined } }, { ...live, headers: { ...live.headers, date: undefined } })
})
