/**
 * Strict replay refuses pass-through, upstream failures are recorded and replayed, and bad input never
 * takes the proxy down.
 */
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { type AddressInfo, connect, createServer } from 'node:net'
import { after, before, describe, test } from 'node:test'
import { connect as tlsConnect } from 'node:tls'
import { ProxyAgent, request } from 'undici'
import { ERROR_HEADER, type ProxyServer, REFUSED_STATUS } from '../proxy/index.ts'
import { createMemoryStore, type TraceStore } from '../store/index.ts'
import { bodyBytes, parseJson } from '../trace/index.ts'
import { clientEnv, run, startTestProxy, tempDir, writeBundle } from './support/proxy-harness.ts'
import { createTestPki, HELLO, RESET_PARTIAL, startUpstream, type TestUpstream } from './support/proxy-upstream.ts'

const MISS_MESSAGE = 'TR_REPLAY_MISS: Failed to replay "GET https://api.test/json": no recorded exchange in trace'
const EXHAUSTED_MESSAGE =
  'TR_REPLAY_EXHAUSTED: Failed to replay "GET https://api.test/hello #1": trace "strict" recorded this request 1 time(s) (#0) and this is #1'

let pki: Awaited<ReturnType<typeof createTestPki>>
let tlsUp: TestUpstream
let plainUp: TestUpstream
let closedPort: number
const storeDir = tempDir('tr-proxy-strict-')

before(async () => {
  pki = await createTestPki(['api.test', 'dead.test'])
  tlsUp = await startUpstream(pki.certs['api.test'])
  plainUp = await startUpstream()
  const probe = createServer().listen(0, '127.0.0.1')
  await once(probe, 'listening')
  closedPort = (probe.address() as AddressInfo).port
  await new Promise<void>((r) => probe.close(() => r()))
})
after(async () => {
  await tlsUp.close()
  await plainUp.close()
})

function base(store: TraceStore, trace: string) {
  return {
    store,
    storeDir,
    trace,
    upstreamCaPem: pki.caPem,
    resolve: {
      'api.test': { host: '127.0.0.1', port: tlsUp.port },
      'plain.test': { host: '127.0.0.1', port: plainUp.port },
      'dead.test': { host: '127.0.0.1', port: closedPort },
    },
  }
}

function agentFor(proxy: ProxyServer, connections?: number): ProxyAgent {
  return new ProxyAgent({ uri: proxy.url, requestTls: { ca: proxy.ca.certPem }, ...(connections ? { connections } : {}) })
}

async function get(agent: ProxyAgent, url: string) {
  const r = await request(url, { dispatcher: agent })
  return { status: r.statusCode, headers: r.headers, body: await r.body.text() }
}

/** The `error.message` of a refusal body (the shape every refusal has; see capture/refusal.ts). */
function errorMessage(body: string): string {
  return (parseJson(body) as { error: { message: string } }).error.message
}

/** Sends raw bytes to the proxy port and returns whatever comes back before the socket closes. */
async function raw(proxy: ProxyServer, bytes: string | Buffer): Promise<string> {
  const socket = connect(proxy.port, '127.0.0.1')
  await once(socket, 'connect')
  socket.end(bytes)
  const chunks: Buffer[] = []
  socket.on('data', (c: Buffer) => chunks.push(c))
  await Promise.race([once(socket, 'close'), new Promise((r) => setTimeout(r, 2000))])
  socket.destroy()
  return Buffer.concat(chunks).toString('latin1')
}

describe('strict replay through the proxy', () => {
  test('an unmatched request gets the 403 refusal + x-tool-replay-error, is in the ledger, and opens no upstream connection', async () => {
    const store = createMemoryStore()
    const rec = await startTestProxy({ ...base(store, 'strict'), mode: 'record' })
    const a = agentFor(rec)
    assert.equal((await get(a, 'https://api.test/hello')).body, HELLO)
    await a.close()
    await rec.close()

    const before = tlsUp.connections
    const rep = await startTestProxy({ ...base(store, 'strict'), mode: 'replay' })
    const b = agentFor(rep)
    const hello = await get(b, 'https://api.test/hello')
    assert.equal(hello.body, HELLO)
    const miss = await get(b, 'https://api.test/json')
    assert.equal(miss.status, REFUSED_STATUS)
    assert.equal(REFUSED_STATUS, 403)
    assert.equal(miss.headers[ERROR_HEADER], 'TR_REPLAY_MISS')
    assert.equal(miss.headers['x-should-retry'], 'false')
    assert.ok(errorMessage(miss.body).startsWith(MISS_MESSAGE), miss.body)
    const again = await get(b, 'https://api.test/hello')
    assert.equal(again.status, REFUSED_STATUS)
    assert.equal(again.headers[ERROR_HEADER], 'TR_REPLAY_EXHAUSTED')
    assert.ok(errorMessage(again.body).startsWith(EXHAUSTED_MESSAGE), again.body)
    await b.close()
    const summary = await rep.close()
    assert.equal(tlsUp.connections, before, 'strict replay opened an upstream connection')
    assert.equal(summary.ok, false)
    assert.deepEqual(
      summary.misses.map((m) => m.request),
      ['GET https://api.test/json'],
    )
    assert.equal(summary.exhausted.length, 1)
  })

  test('unused recordings make the summary not ok', async () => {
    const store = createMemoryStore()
    const rec = await startTestProxy({ ...base(store, 'unused'), mode: 'record' })
    const a = agentFor(rec)
    await get(a, 'https://api.test/hello')
    await get(a, 'https://api.test/json')
    await a.close()
    await rec.close()
    const rep = await startTestProxy({ ...base(store, 'unused'), mode: 'replay' })
    const b = agentFor(rep)
    await get(b, 'https://api.test/hello')
    await b.close()
    const summary = await rep.close()
    assert.equal(summary.ok, false)
    assert.deepEqual(
      summary.unused.map((u) => u.code),
      ['TR_REPLAY_UNUSED'],
    )
  })

  test('a WebSocket upgrade nothing recorded is refused in strict replay without an upstream connection', async () => {
    const store = createMemoryStore()
    const rec = await startTestProxy({ ...base(store, 'ws'), mode: 'record' })
    await rec.close()
    const before = plainUp.connections
    const rep = await startTestProxy({ ...base(store, 'ws'), mode: 'replay' })
    const answer = await raw(
      rep,
      'GET http://plain.test/socket HTTP/1.1\r\nHost: plain.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
    )
    const summary = await rep.close()
    assert.match(answer, /^HTTP\/1\.1 403 Tool Replay Refused\r\n/)
    assert.match(answer, /x-tool-replay-error: TR_REPLAY_MISS/)
    assert.match(answer, /"code":"TR_REPLAY_MISS"/)
    assert.equal(plainUp.connections, before)
    // In the ledger like any miss: the run fails even if the app swallowed the failed socket.
    assert.equal(summary.ok, false)
    assert.deepEqual(
      summary.misses.map((m) => m.request),
      ['GET http://plain.test/socket'],
    )
    assert.match(summary.misses[0]?.message ?? '', /no recorded exchange in trace "ws" matches; trace "ws" has no recorded exchanges/)
  })
})

describe('upstream failures are recorded as error outcomes and replayed', () => {
  test('reset mid-body: partial body recorded; replay sends head + partial body, then drops the connection', async () => {
    const store = createMemoryStore()
    const rec = await startTestProxy({ ...base(store, 'reset'), mode: 'record' })
    const bundle = writeBundle(storeDir, rec.ca.certPem)
    const live = await run('curl', ['-sS', 'http://plain.test/reset'], clientEnv(rec, bundle))
    await rec.close()
    assert.equal(live.code, 18, live.stderr) // curl: transfer closed with bytes remaining
    assert.equal(live.stdout, RESET_PARTIAL)
    const trace = await store.readTrace('reset')
    const x = trace.exchanges[0]
    assert.ok(x && x.outcome.kind === 'error')
    if (x.outcome.kind === 'error') {
      assert.equal(x.outcome.error.phase, 'response-body')
      assert.match(x.outcome.error.code, /^(ECONNRESET|UND_ERR_SOCKET)$/)
      assert.ok(x.outcome.error.partial)
      assert.equal(Buffer.from(bodyBytes(trace, x.outcome.error.partial.body)).toString(), RESET_PARTIAL)
    }
    const rep = await startTestProxy({ ...base(store, 'reset'), mode: 'replay' })
    const replayed = await run('curl', ['-sS', 'http://plain.test/reset'], clientEnv(rep, bundle))
    const summary = await rep.close()
    assert.equal(replayed.code, 18, replayed.stderr)
    assert.equal(replayed.stdout, RESET_PARTIAL)
    assert.ok(summary.ok)
  })

  test('CONNECT to a closed port: 502 with the upstream code, recorded with phase connect, replayed the same', async () => {
    const store = createMemoryStore()
    const rec = await startTestProxy({ ...base(store, 'closed'), mode: 'record' })
    const a = agentFor(rec)
    const live = await get(a, 'https://dead.test/x')
    await a.close()
    await rec.close()
    assert.equal(live.status, 502)
    assert.equal(live.headers[ERROR_HEADER], 'TR_UPSTREAM_FAILED')
    assert.equal(live.headers['x-tool-replay-upstream-error'], 'ECONNREFUSED')
    const trace = await store.readTrace('closed')
    const x = trace.exchanges[0]
    assert.ok(x && x.outcome.kind === 'error' && x.outcome.error.code === 'ECONNREFUSED' && x.outcome.error.phase === 'connect')
    const rep = await startTestProxy({ ...base(store, 'closed'), mode: 'replay' })
    const b = agentFor(rep)
    const replayed = await get(b, 'https://dead.test/x')
    await b.close()
    await rep.close()
    assert.equal(replayed.status, 502)
    assert.equal(replayed.body, live.body)
  })
})

describe('bad input never takes the proxy down', () => {
  test('garbage, origin-form and malformed requests get 400; the next request is answered', async () => {
    const store = createMemoryStore()
    const proxy = await startTestProxy({ ...base(store, 'garbage'), mode: 'passthrough' })
    const agent = agentFor(proxy)
    try {
      assert.match(await raw(proxy, Buffer.from([0, 1, 2, 3, 255, 254, 13, 10, 13, 10])), /^HTTP\/1\.1 400 /)
      const origin = await raw(proxy, 'GET /status HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n')
      assert.match(origin, /^HTTP\/1\.1 400 /)
      assert.match(origin, /x-tool-replay-error: TR_PROXY_BAD_REQUEST/)
      assert.match(origin, /It is a forward proxy/)
      assert.match(await raw(proxy, 'CONNECT nonsense HTTP/1.1\r\n\r\n'), /^HTTP\/1\.1 400 /)
      assert.match(await raw(proxy, 'GET http://plain.test/hello HTTP/1.1\r\nHost: plain.test\r\nContent-Length: abc\r\n\r\n'), /^HTTP\/1\.1 400 /)
      // A CONNECT tunnel that sends garbage instead of a TLS ClientHello.
      assert.match(await raw(proxy, 'CONNECT api.test:443 HTTP/1.1\r\nHost: api.test:443\r\n\r\n\x16\x03\x01\x00\x05hello'), /^HTTP\/1\.1 200 /)
      const ok = await get(agent, 'https://api.test/hello')
      assert.equal(ok.body, HELLO)
    } finally {
      await agent.close()
      await proxy.close()
    }
  })

  test('client abort mid-stream: recorded as an error outcome, the upstream read stops, the proxy keeps serving', async () => {
    const store = createMemoryStore()
    const proxy = await startTestProxy({ ...base(store, 'abort'), mode: 'record' })
    const agent = agentFor(proxy)
    const controller = new AbortController()
    const r = await request('https://api.test/slow', { dispatcher: agent, signal: controller.signal })
    for await (const _chunk of r.body) {
      controller.abort()
      break
    }
    await new Promise((res) => setTimeout(res, 100))
    const ok = await get(agent, 'https://api.test/hello')
    assert.equal(ok.body, HELLO)
    await agent.close()
    await proxy.close()
    const [summary] = await store.listTraces()
    assert.equal(summary?.status, 'complete')
    const trace = await store.readTrace('abort')
    const slow = trace.exchanges.find((x) => x.request.url === 'https://api.test/slow')
    assert.ok(slow && slow.outcome.kind === 'error')
    if (slow.outcome.kind === 'error') {
      assert.equal(slow.outcome.error.code, 'UND_ERR_ABORTED')
      assert.equal(slow.outcome.error.phase, 'response-body')
    }
  })

  test('50 concurrent connections record and replay; every exchange stored whole', async () => {
    const store = createMemoryStore()
    const N = 50
    const urls = Array.from({ length: N }, (_, i) => `https://api.test/echo?i=${i}`)
    const rec = await startTestProxy({ ...base(store, 'concurrent'), mode: 'record' })
    const a = agentFor(rec, N)
    const live = await Promise.all(urls.map((u) => get(a, u)))
    assert.ok(live.every((r) => r.status === 200))
    await a.close()
    await rec.close()
    const trace = await store.readTrace('concurrent')
    assert.equal(trace.exchanges.length, N)
    const before = tlsUp.connections
    const rep = await startTestProxy({ ...base(store, 'concurrent'), mode: 'replay' })
    const b = agentFor(rep, N)
    const replayed = await Promise.all(urls.map((u) => get(b, u)))
    assert.ok(replayed.every((r) => r.status === 200))
    await b.close()
    const summary = await rep.close()
    assert.ok(summary.ok, JSON.stringify(summary))
    assert.equal(summary.replayed, N)
    assert.equal(tlsUp.connections, before)
  })
})

describe('exposure and protocol', () => {
  test('binds 127.0.0.1 unless told otherwise', async () => {
    const proxy = await startTestProxy({ ...base(createMemoryStore(), 'bind'), mode: 'passthrough' })
    try {
      assert.equal(proxy.host, '127.0.0.1')
      assert.equal(proxy.url, `http://127.0.0.1:${proxy.port}`)
    } finally {
      await proxy.close()
    }
  })

  test('ALPN follows the client: h2 for an h2-only client, the no_application_protocol alert for one offering neither; curl --http2 works', async () => {
    const proxy = await startTestProxy({ ...base(createMemoryStore(), 'alpn'), mode: 'passthrough' })
    try {
      const socket = connect(proxy.port, '127.0.0.1')
      await once(socket, 'connect')
      socket.write('CONNECT api.test:443 HTTP/1.1\r\nHost: api.test:443\r\n\r\n')
      await once(socket, 'data')
      const h2only = tlsConnect({ socket, servername: 'api.test', ca: proxy.ca.certPem, ALPNProtocols: ['h2'] })
      await once(h2only, 'secureConnect')
      assert.equal(h2only.alpnProtocol, 'h2')
      h2only.destroy()
      const other = connect(proxy.port, '127.0.0.1')
      await once(other, 'connect')
      other.write('CONNECT api.test:443 HTTP/1.1\r\nHost: api.test:443\r\n\r\n')
      await once(other, 'data')
      const spdy = tlsConnect({ socket: other, servername: 'api.test', ca: proxy.ca.certPem, ALPNProtocols: ['spdy/3'] })
      const [err] = (await once(spdy, 'error')) as [Error & { code?: string }]
      assert.equal(err.code, 'ERR_SSL_TLSV1_ALERT_NO_APPLICATION_PROTOCOL')
      const bundle = writeBundle(storeDir, proxy.ca.certPem)
      const r = await run('curl', ['-sS', '--http2', 'https://api.test/hello'], clientEnv(proxy, bundle))
      assert.equal(r.code, 0, r.stderr)
      assert.equal(r.stdout, HELLO)
    } finally {
      await proxy.close()
    }
  })
})

describe('other modes', () => {
  test('an upgrade whose bytes are not WebSocket frames is relayed byte for byte; the recording keeps its 101 and says why it stopped', async () => {
    const store = createMemoryStore()
    const proxy = await startTestProxy({ ...base(store, 'ws-record'), mode: 'record' })
    const socket = connect(proxy.port, '127.0.0.1')
    await once(socket, 'connect')
    socket.write('GET http://plain.test/socket HTTP/1.1\r\nHost: plain.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n')
    const [head] = (await once(socket, 'data')) as [Buffer]
    assert.match(head.toString(), /^HTTP\/1\.1 101 /)
    socket.write('ping')
    const [echo] = (await once(socket, 'data')) as [Buffer]
    assert.equal(echo.toString(), 'ping')
    socket.destroy()
    await proxy.close()
    const [x] = (await store.readTrace('ws-record')).exchanges
    assert.equal(x?.outcome.kind === 'response' && x.outcome.response.status, 101)
    assert.deepEqual(x?.websocket?.messages, [])
    assert.equal(x?.websocket?.end?.code, 'TR_WEBSOCKET_PROTOCOL')
  })

  test('update replays what matches and records the rest; passthrough stores nothing', async () => {
    const store = createMemoryStore()
    const rec = await startTestProxy({ ...base(store, 'upd'), mode: 'record' })
    let a = agentFor(rec)
    await get(a, 'https://api.test/hello')
    await a.close()
    await rec.close()
    const seen = tlsUp.requests.length
    const upd = await startTestProxy({ ...base(store, 'upd'), mode: 'update' })
    a = agentFor(upd)
    assert.equal((await get(a, 'https://api.test/hello')).body, HELLO)
    assert.equal((await get(a, 'https://api.test/json')).status, 200)
    await a.close()
    await upd.close()
    assert.deepEqual(tlsUp.requests.slice(seen), ['GET /json'], 'only the unmatched request went upstream')
    assert.deepEqual((await store.readTrace('upd')).exchanges.map((x) => x.request.url).sort(), ['https://api.test/hello', 'https://api.test/json'])
    const pass = await startTestProxy({ ...base(store, 'never-stored'), mode: 'passthrough' })
    a = agentFor(pass)
    assert.equal((await get(a, 'https://api.test/hello')).body, HELLO)
    await a.close()
    const summary = await pass.close()
    assert.equal(summary.passedThrough, 1)
    assert.equal(await store.hasTrace('never-stored'), false)
  })
})
