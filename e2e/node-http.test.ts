/**
 * node:http capture end to end: `https.request` and `http.get` against real local upstreams (TLS with a
 * test CA the app trusts), recorded into a LevelDB store through install(), replayed strictly with an
 * upstream that counts connections and with the upstream stopped. What the app reads is measured where it
 * reads: `'data'` events and `for await` over the response.
 */
import assert from 'node:assert/strict'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import http from 'node:http'
import https from 'node:https'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { gunzipSync } from 'node:zlib'
import { ClientRequestInterceptor } from '@mswjs/interceptors/ClientRequest'
import { type InstallOptions, install } from 'tool-replay/interceptor'
import { openStore, type TraceStore } from 'tool-replay/store'
import type { Exchange } from 'tool-replay/trace'
import { Agent, getGlobalDispatcher } from 'undici'
import { filesUnder } from './support/files-under.ts'
import { type NodeHttpResult, nodeHttpCall, inSession as runInSession } from './support/node-http-client.ts'
import { BIG_BODY, createTestPki, GZIP_TEXT, HELLO, JSON_BODY, RESET_PARTIAL, startUpstream } from './support/proxy-upstream.ts'

let pki: Awaited<ReturnType<typeof createTestPki>>
let dir: string
let store: TraceStore
before(async () => {
  pki = await createTestPki(['localhost'])
  dir = await mkdtemp(join(tmpdir(), 'tr-node-http-'))
  store = await openStore(join(dir, 'store'))
})
after(async () => {
  await store.close()
  await rm(dir, { recursive: true, force: true })
})

let traceCounter = 0
const traceName = (label: string) => `${label}-${++traceCounter}`

/** Runs `scenario` inside an install() of `mode`, closes it, and returns the scenario's result and the session summary. */
const inSession = <T>(mode: InstallOptions['mode'], trace: string, scenario: () => Promise<T>, extra: Partial<InstallOptions> = {}) =>
  runInSession(store, mode, trace, scenario, extra)

/** What a test compares between record and replay: the app's view without timing. */
/** A header's value in a raw header list (names compared case-insensitively). */
const headerOf = (raw: string[] | undefined, name: string) => {
  const i = (raw ?? []).findIndex((v, n) => n % 2 === 0 && v.toLowerCase() === name)
  return i < 0 ? undefined : raw?.[i + 1]
}
const view = (r: NodeHttpResult) => ({ status: r.status, statusText: r.statusText, rawHeaders: r.rawHeaders, body: r.body, error: r.error })

async function exchangesOf(trace: string): Promise<Exchange[]> {
  return (await store.readTrace(trace)).exchanges
}

test('https.request and http.get record live and replay strictly offline: zero connections, then the upstream stopped', async () => {
  const tlsUp = await startUpstream(pki.certs.localhost)
  const plainUp = await startUpstream()
  const ca = pki.caPem
  const scenario = async () => [
    await nodeHttpCall(`https://localhost:${tlsUp.port}/json`, { ca }),
    await nodeHttpCall(`http://127.0.0.1:${plainUp.port}/hello`),
    await nodeHttpCall(`https://localhost:${tlsUp.port}/echo`, { ca, method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"q":"node"}' }),
    // Compressed bodies pass as on the wire: node:http apps decompress themselves.
    await nodeHttpCall(`http://127.0.0.1:${plainUp.port}/gzip`),
    await new Promise<NodeHttpResult>((resolve) => {
      // http.get, the shorthand apps use most.
      http.get(`http://127.0.0.1:${plainUp.port}/json`, (res) => {
        let body = ''
        res.setEncoding('latin1')
        res.on('data', (c: string) => {
          body += c
        })
        res.on('end', () => resolve({ status: res.statusCode as number, statusText: res.statusMessage as string, rawHeaders: res.rawHeaders, body, reads: 0 }))
      })
    }),
  ]
  const trace = traceName('core')
  const recorded = await inSession('record', trace, scenario)
  assert.equal(recorded.summary.recorded, 5)
  assert.equal(recorded.result[0]?.body, JSON_BODY)
  assert.equal(recorded.result[1]?.body, HELLO)
  assert.equal(recorded.result[2]?.body, '{"q":"node"}')
  assert.equal(gunzipSync(Buffer.from(recorded.result[3]?.body ?? '', 'latin1')).toString(), GZIP_TEXT)
  assert.deepEqual(tlsUp.requests, ['GET /json', 'POST /echo'])
  assert.deepEqual(plainUp.requests, ['GET /hello', 'GET /gzip', 'GET /json'])
  // The trace holds the five in the order they were made, once each.
  assert.deepEqual(
    (await exchangesOf(trace)).map((x) => `${x.request.method} ${new URL(x.request.url).pathname}`),
    ['GET /json', 'GET /hello', 'POST /echo', 'GET /gzip', 'GET /json'],
  )

  const connections = tlsUp.connections + plainUp.connections
  const replayed = await inSession('replay', trace, scenario)
  replayed.assertDone()
  assert.equal(tlsUp.connections + plainUp.connections, connections, 'strict replay opened no connection to a running upstream')
  assert.equal(tlsUp.requests.length + plainUp.requests.length, 5)
  assert.deepEqual(replayed.result.map(view), recorded.result.map(view))

  await tlsUp.close()
  await plainUp.close()
  const offline = await inSession('replay', trace, scenario)
  offline.assertDone()
  assert.deepEqual(offline.result.map(view), recorded.result.map(view))
})

test('Connection: close requests on a keep-alive https agent: each opens a new TLS connection, and replay serves them all', async () => {
  const up = await startUpstream(pki.certs.localhost)
  // Connection: close makes every request open a new TLS socket on the same agent, which offers the
  // agent's cached TLS session from the connection before (msw's emulated handshake reports a fake one),
  // and the answer must close the connection (a recorded Connection: keep-alive would make Node reuse it).
  const agent = new https.Agent({ keepAlive: true, ca: pki.caPem })
  const scenario = async () => {
    const out: NodeHttpResult[] = []
    for (const path of ['/hello', '/json', '/hello'])
      out.push(await nodeHttpCall(`https://localhost:${up.port}${path}`, { agent, headers: { connection: 'close' } }))
    return out
  }
  const trace = traceName('tls-sessions')
  const recorded = await inSession('record', trace, scenario)
  assert.deepEqual(
    recorded.result.map((r) => r.body),
    [HELLO, JSON_BODY, HELLO],
  )
  await up.close()
  const replayed = await inSession('replay', trace, scenario)
  replayed.assertDone()
  assert.deepEqual(replayed.result.map(view), recorded.result.map(view))
  agent.destroy()
})

test('a streamed response replays as the app read it: one read per recorded chunk, with data events, for await and read()', async () => {
  const up = await startUpstream()
  const url = `http://127.0.0.1:${up.port}/sse?n=20&gap=5`
  const trace = traceName('stream')
  const recorded = await inSession('record', trace, () => nodeHttpCall(url))
  const [exchange] = await exchangesOf(trace)
  assert.equal(exchange?.outcome.kind, 'response')
  const chunks = exchange?.outcome.kind === 'response' ? exchange.outcome.response.body.chunks.length : 0
  assert.ok(chunks >= 15, `the upstream's 20 events arrived as separate chunks (${chunks})`)
  assert.equal(recorded.result.reads, chunks, 'live, the app read each chunk on its own')
  await up.close()

  for (const read of ['data', 'iterate', 'readable'] as const) {
    const replayed = await inSession('replay', trace, () => nodeHttpCall(url, { read }))
    replayed.assertDone()
    assert.equal(replayed.result.body, recorded.result.body)
    assert.equal(replayed.result.reads, chunks, `${read}: one read per recorded chunk`)
  }
  // The measure can fail: with pace 'none' chunks reach the socket back to back, and an app that reads what is
  // buffered on each 'readable' gets several at once. On Node 26 they were observed to arrive apart even with
  // 'none' (the way from msw's response stream to the socket takes a turn per chunk there): there only the body
  // is checked.
  const merged = await inSession('replay', trace, () => nodeHttpCall(url, { read: 'readable' }), { pace: 'none' })
  assert.equal(merged.result.body, recorded.result.body)
  if (Number(process.versions.node.split('.')[0]) < 26) assert.ok(merged.result.reads < chunks, `pace none merged reads (${merged.result.reads} < ${chunks})`)
})

test('a connection reset mid-body replays as the same error after the same partial body; a refused connection as ECONNREFUSED', async () => {
  const up = await startUpstream()
  const closed = http.createServer()
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve))
  const closedPort = (closed.address() as AddressInfo).port
  await new Promise<void>((resolve) => closed.close(() => resolve()))
  const other = await startUpstream()
  const scenario = async () => [
    await nodeHttpCall(`http://127.0.0.1:${up.port}/reset`),
    await nodeHttpCall(`http://127.0.0.1:${closedPort}/nobody`),
    // Made from another request's callback (msw then names that request as its initiator), on its own connection.
    await new Promise<NodeHttpResult>((resolve) => {
      http.get(`http://127.0.0.1:${other.port}/hello`, (res) => {
        res.resume()
        res.on('end', () => resolve(nodeHttpCall(`http://127.0.0.1:${up.port}/reset`)))
      })
    }),
  ]
  // What the app sees with no Tool Replay at all: recording must not change it.
  const live = await scenario()
  const trace = traceName('errors')
  const recorded = await inSession('record', trace, scenario)
  const outcome = (r: NodeHttpResult) => ({ status: r.status, body: r.body, error: r.error })
  assert.deepEqual(recorded.result.map(outcome), live.map(outcome))
  const [reset, refused, resetAfter] = recorded.result
  assert.deepEqual(resetAfter?.error, reset?.error)
  assert.equal(reset?.status, 200)
  assert.equal(reset?.body, RESET_PARTIAL)
  // A TCP reset: the request gets the socket's error first (then Node aborts the response).
  assert.deepEqual(reset?.error, { on: 'request', code: 'ECONNRESET', message: 'read ECONNRESET', syscall: 'read' })
  assert.equal(refused?.error?.on, 'request')
  assert.equal(refused?.error?.code, 'ECONNREFUSED')
  assert.match(refused?.error?.message ?? '', /^connect ECONNREFUSED 127\.0\.0\.1:\d+$/)
  const [resetX, refusedX] = await exchangesOf(trace)
  await other.close()
  assert.equal(resetX?.outcome.kind === 'error' && resetX.outcome.error.phase, 'response-body')
  assert.equal(resetX?.outcome.kind === 'error' && resetX.outcome.error.partial?.status, 200)
  assert.deepEqual(refusedX?.outcome.kind === 'error' && [refusedX.outcome.error.code, refusedX.outcome.error.phase], ['ECONNREFUSED', 'connect'])
  await up.close()

  const replayed = await inSession('replay', trace, scenario)
  replayed.assertDone()
  assert.deepEqual(replayed.result.map(view), recorded.result.map(view))
  assert.equal(replayed.result[1]?.error?.syscall, 'connect')
})

test('replay honours back-pressure: while the app does not read, chunks stop at its socket instead of piling up', async () => {
  const up = await startUpstream()
  const other = await startUpstream()
  const url = `http://127.0.0.1:${up.port}/big`
  const before = `http://127.0.0.1:${other.port}/hello`
  /** Reads the first chunk, pauses 300 ms (long enough for playback to push all 10 MB if nothing held it back), then reads the rest. */
  const readPaused = () =>
    new Promise<{ buffered: number; total: number }>((resolve, reject) => {
      http
        .get(url, (res) => {
          let total = 0
          res.once('data', (first: Buffer) => {
            total += first.byteLength
            res.pause()
            setTimeout(() => {
              const buffered = res.readableLength + (res.socket?.readableLength ?? 0)
              res.on('data', (c: Buffer) => {
                total += c.byteLength
              })
              res.on('end', () => resolve({ buffered, total }))
              res.resume()
            }, 300)
          })
        })
        .on('error', reject)
    })
  const trace = traceName('big')
  const recorded = await inSession('record', trace, async () => [await nodeHttpCall(url), await nodeHttpCall(before), await nodeHttpCall(url)])
  assert.equal(recorded.result[0]?.body.length, BIG_BODY.byteLength)
  await up.close()
  await other.close()

  const paused = await inSession('replay', trace, async () => {
    const first = await readPaused()
    // Made from another request's callback (msw may then name that request as its initiator), on its own connection.
    const second = await new Promise<{ buffered: number; total: number }>((resolve, reject) => {
      http.get(before, (res) => {
        res.resume()
        res.on('end', () => readPaused().then(resolve, reject))
      })
    })
    return [first, second]
  })
  paused.assertDone()
  for (const [i, r] of paused.result.entries()) {
    assert.equal(r.total, BIG_BODY.byteLength, `#${i}: the whole body arrives once the app reads again`)
    assert.ok(r.buffered < 2 * 1024 * 1024, `#${i}: at most a few chunks wait in the app's buffers while it is paused (${r.buffered} bytes)`)
  }
})

test('occurrences replay in order; one request too many and an unrecorded one get the refusal response and fail assertDone', async () => {
  let n = 0
  const server = http.createServer((_req, res) => res.end(`answer #${++n}`))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/counter`
  const trace = traceName('occurrence')
  const recorded = await inSession('record', trace, async () => [await nodeHttpCall(url), await nodeHttpCall(url), await nodeHttpCall(url)])
  assert.deepEqual(
    recorded.result.map((r) => r.body),
    ['answer #1', 'answer #2', 'answer #3'],
  )
  await new Promise<void>((resolve) => server.close(() => resolve()))

  const replayed = await inSession('replay', trace, async () => [
    await nodeHttpCall(url),
    await nodeHttpCall(url),
    await nodeHttpCall(url),
    await nodeHttpCall(url),
    await nodeHttpCall(`${url}?page=2`),
  ])
  assert.deepEqual(
    replayed.result.slice(0, 3).map((r) => r.body),
    ['answer #1', 'answer #2', 'answer #3'],
  )
  const [exhausted, miss] = replayed.result.slice(3)
  for (const [r, code] of [
    [exhausted, 'TR_REPLAY_EXHAUSTED'],
    [miss, 'TR_REPLAY_MISS'],
  ] as const) {
    assert.equal(r?.status, 403)
    assert.equal(r?.statusText, 'Tool Replay Refused')
    const headers = Object.fromEntries(
      (r?.rawHeaders ?? []).flatMap((v, i, all) => (i % 2 === 0 ? [[v.toLowerCase(), all[i + 1]]] : [])) as Array<[string, string]>,
    )
    assert.equal(headers['x-tool-replay-error'], code)
    assert.equal(headers['x-should-retry'], 'false')
    assert.match(r?.body ?? '', new RegExp(`"code":"${code}"`))
  }
  assert.match(miss?.body ?? '', /closest recorded: \\"GET http:\/\/127\.0\.0\.1:\d+\/counter\\" \(differs: query key \\"page\\"/)
  assert.equal(replayed.summary.exhausted.length, 1)
  assert.equal(replayed.summary.misses.length, 1)
  assert.throws(replayed.assertDone, (err: Error & { code?: string }) => err.code === 'TR_REPLAY_INCOMPLETE')
})

test('fetch and node:http in one run: each request is captured once, even a fetch made inside an http.get callback', async () => {
  const up = await startUpstream()
  const base = `http://127.0.0.1:${up.port}`
  // msw attributes work done in an http.ClientRequest's callbacks to that request: the fetch below goes out
  // (while recording) inside it, and must not be seen as a second node:http request.
  const scenario = () =>
    new Promise<string[]>((resolve, reject) => {
      http
        .get(`${base}/hello`, (res) => {
          let first = ''
          res.setEncoding('utf8')
          res.on('data', (c: string) => {
            first += c
          })
          res.on('end', () => {
            fetch(`${base}/json`)
              .then((r) => r.text())
              .then((second) => resolve([first, second]), reject)
          })
        })
        .on('error', reject)
    })
  for (const upstream of [undefined, new Agent()]) {
    const before = up.requests.length
    const trace = traceName('once')
    const recorded = await inSession('record', trace, scenario, upstream ? { upstream } : {})
    assert.deepEqual(recorded.result, [HELLO, JSON_BODY])
    assert.deepEqual(up.requests.slice(before), ['GET /hello', 'GET /json'], 'the upstream saw each request once')
    assert.deepEqual(
      (await exchangesOf(trace)).map((x) => new URL(x.request.url).pathname),
      ['/hello', '/json'],
      `the trace holds each request once (${upstream ? 'own upstream Agent' : 'default upstream'})`,
    )
    await upstream?.close()
  }
  await up.close()
})

test('a request body over maxBodyBytes is refused with 413 TR_REQUEST_TOO_LARGE (as on every path), and strict replay counts it', async () => {
  const up = await startUpstream()
  const url = `http://127.0.0.1:${up.port}/echo`
  const big = Buffer.alloc(4096, 'x')
  const trace = traceName('limits')
  const recorded = await inSession('record', trace, () => nodeHttpCall(url, { method: 'POST', body: big }), { maxBodyBytes: 1024 })
  const tooLarge = (r: typeof recorded.result) => {
    assert.equal(r.error, undefined, 'a response, not a failed request: SDKs retry failed requests')
    assert.equal(r.status, 413)
    assert.equal(headerOf(r.rawHeaders, 'x-tool-replay-error'), 'TR_REQUEST_TOO_LARGE')
    assert.match(r.body, /Request body of POST http:\/\/127\.0\.0\.1:\d+\/echo is over 1024 bytes.*maxBodyBytes/)
  }
  tooLarge(recorded.result)
  assert.deepEqual(up.requests, [], 'nothing went live')
  await up.close()
  const replayed = await inSession('replay', trace, () => nodeHttpCall(url, { method: 'POST', body: big }), { maxBodyBytes: 1024 })
  tooLarge(replayed.result)
  assert.deepEqual(
    replayed.summary.misses.map((m) => m.code),
    ['TR_REQUEST_TOO_LARGE'],
  )
})

test('secrets in node:http requests and responses never reach the store', async (t) => {
  const SECRET = 'sk-planted-node-4e1d2c3b'
  const CONTROL = 'control-marker-node-77aa'
  const server = https.createServer({ cert: pki.certs.localhost?.cert, key: pki.certs.localhost?.key }, (req, res) => {
    const gotSecret = [req.headers.authorization, req.headers['x-api-key'], req.url].every((v) => String(v).includes(SECRET))
    res.setHeader('set-cookie', [`session=${SECRET}; Path=/`])
    res.setHeader('content-type', 'application/json')
    res.end(JSON.stringify({ gotSecret, token: SECRET }))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => server.close())
  const storeDir = join(dir, 'secrets-store')
  const own = await openStore(storeDir)
  const url = `https://localhost:${(server.address() as AddressInfo).port}/v1/things?api_key=${SECRET}`
  const call = () =>
    nodeHttpCall(url, {
      ca: pki.caPem,
      method: 'POST',
      headers: { authorization: `Bearer ${SECRET}`, 'x-api-key': SECRET, 'content-type': 'text/plain' },
      body: CONTROL,
    })
  const rec = await install({ mode: 'record', trace: 'secrets', store: own, redaction: { bodyPaths: ['$.token'] } })
  const live = await call()
  await rec.close()
  assert.deepEqual(JSON.parse(live.body), { gotSecret: true, token: SECRET }, 'the app got the real response')
  await own.close()
  let controlHits = 0
  for await (const file of filesUnder(storeDir)) {
    const bytes = await readFile(file)
    assert.equal(bytes.includes(SECRET), false, file)
    if (bytes.includes(CONTROL)) controlHits++
  }
  assert.ok(controlHits > 0, 'the search sees stored request bodies, so it would see the secret')
  const reopened = await openStore(storeDir)
  const stored = await reopened.readTrace('secrets')
  const decoded = JSON.stringify(stored.exchanges) + [...stored.bodies.values()].map((b) => Buffer.from(b).toString('latin1')).join('')
  assert.ok(decoded.includes(CONTROL))
  assert.equal(decoded.includes(SECRET), false, 'the decoded trace holds no secret')
  await reopened.close()
})

test('update and passthrough: update replays what matches and records what is missing; passthrough stores nothing', async () => {
  const up = await startUpstream()
  const base = `http://127.0.0.1:${up.port}`
  const trace = traceName('modes')
  await inSession('record', trace, () => nodeHttpCall(`${base}/hello`))
  const requestsBefore = up.requests.length
  const updated = await inSession('update', trace, async () => [await nodeHttpCall(`${base}/hello`), await nodeHttpCall(`${base}/json`)])
  assert.deepEqual(
    updated.result.map((r) => r.body),
    [HELLO, JSON_BODY],
  )
  assert.deepEqual(up.requests.slice(requestsBefore), ['GET /json'], 'update went live only for the missing request')
  assert.deepEqual(
    (await exchangesOf(trace)).map((x) => new URL(x.request.url).pathname),
    ['/hello', '/json'],
  )
  const passed = await inSession('passthrough', traceName('passthrough'), () => nodeHttpCall(`${base}/json`))
  assert.equal(passed.result.body, JSON_BODY)
  assert.equal(passed.summary.passedThrough, 1)
  assert.equal(passed.summary.recorded, 0)
  await up.close()
  const offline = await inSession('replay', trace, async () => [await nodeHttpCall(`${base}/hello`), await nodeHttpCall(`${base}/json`)])
  offline.assertDone()
  assert.deepEqual(
    offline.result.map((r) => r.body),
    [HELLO, JSON_BODY],
  )
})

test('an app that abandons a stream while recording: the trace still holds the whole response (bounded drain)', async () => {
  const up = await startUpstream()
  const url = `http://127.0.0.1:${up.port}/sse?n=10&gap=20`
  const abandon = () =>
    new Promise<string>((resolve, reject) => {
      const req = http.get(url, (res) => {
        res.once('data', (first: Buffer) => {
          req.destroy()
          resolve(first.toString())
        })
      })
      req.on('error', (err: Error & { code?: string }) => {
        if (err.code !== 'ECONNRESET') reject(err)
      })
    })
  // Without the drain the recording is the abort itself: what the default avoids.
  const cut = traceName('abandon-cut')
  await inSession('record', cut, abandon, { drainAfterAbortMs: 0 })
  const [cutX] = await exchangesOf(cut)
  assert.deepEqual(cutX?.outcome.kind === 'error' && [cutX.outcome.error.code, cutX.outcome.error.phase], ['UND_ERR_ABORTED', 'response-body'])

  const trace = traceName('abandon')
  const recorded = await inSession('record', trace, abandon)
  assert.match(recorded.result, /^data: \{"n":0/)
  const [x] = await exchangesOf(trace)
  assert.equal(x?.outcome.kind, 'response', 'recorded as the complete response the upstream sent')
  const body = x?.outcome.kind === 'response' ? Buffer.from((await store.readTrace(trace)).bodies.get(x.outcome.response.body.digest) ?? []).toString() : ''
  assert.equal(body.match(/^data: /gm)?.length, 10)
  await up.close()
})

test('a CONNECT tunnel passes through live unrecorded, and strict replay refuses it and counts it', async (t) => {
  const proxy = http.createServer()
  const seen: string[] = []
  proxy.on('connect', (req, socket) => {
    seen.push(req.url ?? '')
    socket.end('HTTP/1.1 200 Connection Established\r\n\r\n')
  })
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve))
  t.after(() => proxy.close())
  const port = (proxy.address() as AddressInfo).port
  const tunnel = () =>
    new Promise<{ status?: number; code?: string | string[] }>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port, method: 'CONNECT', path: 'api.test:443' })
      req.on('connect', (res, socket) => {
        socket.destroy()
        resolve({ status: res.statusCode, code: res.headers['x-tool-replay-error'] })
      })
      req.on('error', reject)
      req.end()
    })
  const trace = traceName('connect')
  const live = await inSession('record', trace, tunnel)
  assert.deepEqual(live.result, { status: 200, code: undefined })
  assert.deepEqual(seen, ['api.test:443'])
  assert.equal(live.summary.passedThrough, 1)
  assert.deepEqual(await exchangesOf(trace), [], 'tunnels are not recorded')
  const replayed = await inSession('replay', trace, tunnel)
  assert.deepEqual(replayed.result, { status: 403, code: 'TR_REPLAY_MISS' })
  assert.deepEqual(seen, ['api.test:443'], 'strict replay opened no tunnel')
  assert.deepEqual(
    replayed.summary.misses.map((m) => m.code),
    ['TR_REPLAY_MISS'],
  )
})

test('ten concurrent identical node:http requests get the same caller-to-response pairing on every replay', async (t) => {
  let n = 0
  // Answers come back in random order, numbered by arrival: each caller's answer depends on its place.
  const server = http.createServer((_req, res) => {
    const k = ++n
    setTimeout(() => res.end(`answer #${k}`), Math.random() * 20)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => server.close())
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/same`
  const burst = () => Promise.all(Array.from({ length: 10 }, () => nodeHttpCall(url).then((r) => r.body)))
  const trace = traceName('concurrent')
  const recorded = await inSession('record', trace, burst)
  assert.deepEqual(recorded.result.toSorted(), Array.from({ length: 10 }, (_, i) => `answer #${i + 1}`).toSorted())
  server.close()
  for (let round = 0; round < 3; round++) {
    const replayed = await inSession('replay', trace, burst)
    replayed.assertDone()
    assert.deepEqual(replayed.result, recorded.result, `round ${round}`)
  }
})

test('an install() whose node:http capture cannot apply fails with TR_CAPTURE_UNAVAILABLE and leaves nothing behind', async () => {
  // msw's own ClientRequestInterceptor (setupServer in the same process) already holds node:http's patches.
  const foreign = new ClientRequestInterceptor()
  foreign.apply()
  const storeDir = join(dir, 'failed-install-store')
  const previousStore = process.env.TOOL_REPLAY_STORE
  process.env.TOOL_REPLAY_STORE = storeDir
  const dispatcherBefore = getGlobalDispatcher()
  try {
    await assert.rejects(install({ mode: 'record', trace: 'failed-install' }), (err: Error & { code?: string }) => {
      assert.equal(err.code, 'TR_CAPTURE_UNAVAILABLE')
      assert.match(err.message, /Cannot capture node:http requests: .*already replaced.*dispose it before install\(\), or pass `nodeHttp: false`/)
      return true
    })
    assert.equal(getGlobalDispatcher(), dispatcherBefore, 'the global dispatcher is the one from before')
  } finally {
    foreign.dispose()
    if (previousStore === undefined) delete process.env.TOOL_REPLAY_STORE
    else process.env.TOOL_REPLAY_STORE = previousStore
  }
  // The store install() opened was closed (LevelDB holds a lock while open), and holds no completed recording.
  const reopened = await openStore(storeDir)
  assert.deepEqual(
    (await reopened.listTraces()).filter((t) => t.status === 'complete').map((t) => t.name),
    [],
  )
  // With the other interceptor gone, install() applies cleanly: nothing of the failed attempt lingers.
  const up = await startUpstream()
  const tr = await install({ mode: 'record', trace: 'after-failed-install', store: reopened })
  const r = await nodeHttpCall(`http://127.0.0.1:${up.port}/hello`)
  assert.equal((await tr.close()).recorded, 1)
  assert.equal(r.body, HELLO)
  await reopened.close()
  await up.close()
})
