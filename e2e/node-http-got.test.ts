/**
 * got (on `http.request`/`https.request`) through install(): recorded against a local HTTPS upstream and
 * replayed strictly with zero connections and then with the upstream stopped; its streams read chunk by
 * chunk; its own retries of a reset kept as occurrences; a miss refused without retries.
 */
import assert from 'node:assert/strict'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, test } from 'node:test'
import got, { type HTTPError, type RequestError } from 'got'
import type { InstallOptions } from 'tool-replay/interceptor'
import { createMemoryStore, type TraceStore } from 'tool-replay/store'
import { inSession as runInSession } from './support/node-http-client.ts'
import { createTestPki, HELLO, JSON_BODY, startUpstream, type TestUpstream } from './support/proxy-upstream.ts'

let pki: Awaited<ReturnType<typeof createTestPki>>
let up: TestUpstream
let client: typeof got
const store: TraceStore = createMemoryStore()
before(async () => {
  pki = await createTestPki(['localhost'])
  up = await startUpstream(pki.certs.localhost)
  client = got.extend({ prefixUrl: `https://localhost:${up.port}`, https: { certificateAuthority: pki.caPem }, retry: { limit: 0 } })
})
after(() => up.close())

let traceCounter = 0
const traceName = (label: string) => `got-${label}-${++traceCounter}`

const inSession = <T>(mode: InstallOptions['mode'], trace: string, scenario: () => Promise<T>) => runInSession(store, mode, trace, scenario)

test('got records over HTTPS and replays strictly: no connection to a running upstream, then with it stopped', async () => {
  const own = await startUpstream(pki.certs.localhost)
  const c = client.extend({ prefixUrl: `https://localhost:${own.port}` })
  const scenario = async () => {
    const json = await c.get('json').json()
    const echo = await c.post('echo', { json: { q: 'got', list: [1, 2] } }).json()
    const hello = await c.get('hello')
    return { json, echo, hello: { status: hello.statusCode, body: hello.body, upstream: hello.headers['x-upstream'] } }
  }
  const trace = traceName('core')
  const recorded = await inSession('record', trace, scenario)
  assert.deepEqual(recorded.result, { json: JSON.parse(JSON_BODY), echo: { q: 'got', list: [1, 2] }, hello: { status: 200, body: HELLO, upstream: 'yes' } })
  const connections = own.connections
  const requests = own.requests.length
  const replayed = await inSession('replay', trace, scenario)
  replayed.assertDone()
  assert.deepEqual(replayed.result, recorded.result)
  assert.equal(own.connections, connections, 'no connection reached the upstream')
  assert.equal(own.requests.length, requests)
  await own.close()
  const offline = await inSession('replay', trace, scenario)
  offline.assertDone()
  assert.deepEqual(offline.result, recorded.result)
})

test('got.stream reads one chunk per recorded chunk on replay', async () => {
  const read = async () => {
    let reads = 0
    let text = ''
    for await (const chunk of client.stream('sse?n=12&gap=5')) {
      reads++
      text += String(chunk)
    }
    return { reads, text }
  }
  const trace = traceName('stream')
  const recorded = await inSession('record', trace, read)
  const outcome = (await store.readTrace(trace)).exchanges[0]?.outcome
  const chunks = outcome?.kind === 'response' ? outcome.response.body.chunks.length : 0
  assert.ok(chunks >= 8, `events arrived apart (${chunks} chunks)`)
  assert.equal(recorded.result.reads, chunks)
  const replayed = await inSession('replay', trace, read)
  replayed.assertDone()
  assert.deepEqual(replayed.result, recorded.result)
})

test("got's own retries (a 503, then a connection reset) are recorded as occurrences and replay the same way", async (t) => {
  let n = 0
  const server = http.createServer((req, res) => {
    n++
    if (n === 1) res.writeHead(503, { 'content-type': 'text/plain' }).end('busy')
    else if (n === 2) req.socket.destroy()
    else res.writeHead(200, { 'content-type': 'text/plain' }).end(`ok after ${n} attempts`)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => server.close())
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/flaky`
  const attempt = async () => {
    const retries: string[] = []
    const res = await got(url, {
      retry: { limit: 2, backoffLimit: 20 },
      hooks: { beforeRetry: [(error, count) => void retries.push(`${count} ${error.code}`)] },
    })
    return { status: res.statusCode, body: res.body, retries }
  }
  const trace = traceName('retries')
  const recorded = await inSession('record', trace, attempt)
  assert.deepEqual(recorded.result, { status: 200, body: 'ok after 3 attempts', retries: ['1 ERR_NON_2XX_3XX_RESPONSE', '2 ECONNRESET'] })
  assert.deepEqual(
    (await store.readTrace(trace)).exchanges.map((x) =>
      x.outcome.kind === 'error' ? `${x.outcome.error.code} ${x.outcome.error.phase}` : String(x.outcome.response.status),
    ),
    // The closed connection in undici's vocabulary, as every path records it; got still sees Node's ECONNRESET.
    ['503', 'UND_ERR_SOCKET response-headers', '200'],
    'each attempt is its own exchange, in order',
  )
  server.close()
  const replayed = await inSession('replay', trace, attempt)
  replayed.assertDone()
  assert.deepEqual(replayed.result, recorded.result)
  assert.equal(n, 3, 'replay reached no server')
})

test('a reset mid-body fails got the way it does live, in record and in replay', async (t) => {
  const plain = await startUpstream()
  t.after(() => plain.close())
  const attempt = () =>
    got(`http://127.0.0.1:${plain.port}/reset`, { retry: { limit: 0 } }).then(
      () => assert.fail('the reset must fail'),
      (e: RequestError) => ({ name: e.name, code: e.code, message: e.message }),
    )
  const live = await attempt()
  const trace = traceName('reset')
  const recorded = await inSession('record', trace, attempt)
  assert.deepEqual(recorded.result, live)
  await plain.close()
  const replayed = await inSession('replay', trace, attempt)
  replayed.assertDone()
  assert.deepEqual(replayed.result, live)
})

test('a miss through got is refused with 403 at once, not retried', async () => {
  const trace = traceName('miss')
  await inSession('record', trace, () => client.get('json').json())
  const retried = { count: 0 }
  const replayed = await inSession('replay', trace, async () => {
    const err = (await client.get('json', { searchParams: { changed: 1 }, retry: { limit: 2 }, hooks: { beforeRetry: [() => void retried.count++] } }).then(
      () => assert.fail('a miss must not succeed'),
      (e: unknown) => e,
    )) as HTTPError
    return { status: err.response.statusCode, code: err.response.headers['x-tool-replay-error'], body: String(err.response.body) }
  })
  assert.equal(replayed.result.status, 403)
  assert.equal(replayed.result.code, 'TR_REPLAY_MISS')
  assert.match(replayed.result.body, /Failed to replay \\"GET https:\/\/localhost:\d+\/json\?changed=1\\"/)
  assert.equal(retried.count, 0, 'got does not retry a 403')
  assert.equal(replayed.summary.misses.length, 1)
})
