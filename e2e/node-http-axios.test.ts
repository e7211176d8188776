/**
 * axios (its Node http adapter, on `http.request` through follow-redirects) through install(): recorded
 * against a local HTTPS upstream, replayed strictly with the upstream counting connections and then
 * stopped; mixed with fetch in one app and one trace; a miss answered with the refusal response at once.
 */
import assert from 'node:assert/strict'
import https from 'node:https'
import { after, before, test } from 'node:test'
import axios, { type AxiosError, type AxiosResponse } from 'axios'
import { type InstallOptions, install } from 'tool-replay/interceptor'
import { createMemoryStore, type TraceStore } from 'tool-replay/store'
import { inSession as runInSession } from './support/node-http-client.ts'
import { createTestPki, HELLO, JSON_BODY, startUpstream, type TestUpstream } from './support/proxy-upstream.ts'

let pki: Awaited<ReturnType<typeof createTestPki>>
let up: TestUpstream
let httpsAgent: https.Agent
let base: string
const store: TraceStore = createMemoryStore()
before(async () => {
  pki = await createTestPki(['localhost'])
  up = await startUpstream(pki.certs.localhost)
  httpsAgent = new https.Agent({ keepAlive: true, ca: pki.caPem })
  base = `https://localhost:${up.port}`
})
after(async () => {
  httpsAgent.destroy()
  await up.close()
})

let traceCounter = 0
const traceName = (label: string) => `axios-${label}-${++traceCounter}`

const inSession = <T>(mode: InstallOptions['mode'], trace: string, scenario: () => Promise<T>) => runInSession(store, mode, trace, scenario)

/** What the app uses of an axios response. */
const seen = (r: AxiosResponse) => ({ status: r.status, statusText: r.statusText, contentType: r.headers['content-type'], data: r.data as unknown })

test('axios records against a local HTTPS upstream and replays strictly with zero connections, identical data', async () => {
  const client = axios.create({ baseURL: base, httpsAgent })
  const scenario = async () => [
    seen(await client.get('/json')),
    seen(await client.post('/echo', { q: 'axios', n: 1 })),
    seen(await client.get('/hello', { responseType: 'text' })),
  ]
  const trace = traceName('core')
  const recorded = await inSession('record', trace, scenario)
  assert.deepEqual(recorded.result[0]?.data, JSON.parse(JSON_BODY))
  assert.deepEqual(recorded.result[1]?.data, { q: 'axios', n: 1 })
  assert.equal(recorded.result[2]?.data, HELLO)
  const connections = up.connections
  const requests = up.requests.length
  const replayed = await inSession('replay', trace, scenario)
  replayed.assertDone()
  assert.deepEqual(replayed.result, recorded.result)
  assert.equal(up.connections, connections, 'no connection reached the upstream')
  assert.equal(up.requests.length, requests)
})

test('a mixed app (fetch and axios interleaved) records one trace in request order and replays it strictly', async () => {
  const client = axios.create({ baseURL: base, httpsAgent })
  // fetch trusts the test CA through its own dispatcher settings: install's upstream for the live run.
  const { Agent } = await import('undici')
  const upstream = new Agent({ connect: { ca: pki.caPem } })
  const app = async () => {
    const out: unknown[] = []
    out.push(await (await fetch(`${base}/hello`)).text())
    out.push((await client.get('/json')).data)
    out.push(await (await fetch(`${base}/echo`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"step":3}' })).json())
    out.push((await client.post('/echo', { step: 4 })).data)
    out.push(await (await fetch(`${base}/json`)).json())
    return out
  }
  const trace = traceName('mixed')
  const rec = await install({ mode: 'record', trace, store, upstream })
  const recorded = await app()
  await rec.close()
  await upstream.close()
  assert.deepEqual(recorded, [HELLO, JSON.parse(JSON_BODY), { step: 3 }, { step: 4 }, JSON.parse(JSON_BODY)])
  const stored = await store.readTrace(trace)
  assert.deepEqual(
    stored.exchanges.map((x) => `${x.seq} ${x.request.method} ${new URL(x.request.url).pathname}`),
    ['0 GET /hello', '1 GET /json', '2 POST /echo', '3 POST /echo', '4 GET /json'],
    'one trace, both capture paths, in the order the app made the requests',
  )
  assert.match(stored.exchanges[1]?.request.headers.find(([k]) => k === 'user-agent')?.[1] ?? '', /^axios\//, 'exchange 1 came through node:http')

  const connections = up.connections
  const rep = await install({ mode: 'replay', trace, store })
  try {
    assert.deepEqual(await app(), recorded)
    rep.assertDone()
  } finally {
    await rep.close()
  }
  assert.equal(up.connections, connections)
})

test('a miss through axios gets the refusal response: 403, x-tool-replay-error, one ledger entry, nothing live', async () => {
  const trace = traceName('miss')
  await inSession('record', trace, () => axios.get(`${base}/json`, { httpsAgent }))
  const requestsBefore = up.requests.length
  const replayed = await inSession('replay', trace, async () => {
    const err = (await axios.get(`${base}/json?changed=1`, { httpsAgent }).then(
      () => assert.fail('a miss must not succeed'),
      (e: unknown) => e,
    )) as AxiosError
    return { err }
  })
  const { err } = replayed.result
  assert.equal(err.response?.status, 403)
  assert.equal(err.response?.statusText, 'Tool Replay Refused')
  assert.equal(err.response?.headers['x-tool-replay-error'], 'TR_REPLAY_MISS')
  assert.equal((err.response?.data as { error?: { code?: string } } | undefined)?.error?.code, 'TR_REPLAY_MISS')
  assert.match(err.message, /403/)
  // A response, not a connection error: axios has nothing to retry. The ledger counts the one request it made,
  // and the running upstream saw none.
  assert.equal(replayed.summary.misses.length, 1)
  assert.equal(up.requests.length, requestsBefore, 'nothing went live')
  assert.equal(replayed.summary.unused.length, 1, 'the recorded /json was not asked for')
})

test('axios streaming (responseType stream): one read per recorded chunk; a reset mid-body fails as it does live', async (t) => {
  const plain = await startUpstream()
  t.after(() => plain.close())
  const streamUrl = `http://127.0.0.1:${plain.port}/sse?n=12&gap=5`
  const resetUrl = `http://127.0.0.1:${plain.port}/reset`
  const scenario = async () => {
    const res = await axios.get(streamUrl, { responseType: 'stream' })
    let reads = 0
    let text = ''
    for await (const chunk of res.data as AsyncIterable<Buffer>) {
      reads++
      text += chunk.toString()
    }
    const err = (await axios.get(resetUrl).then(
      () => assert.fail('the reset must fail'),
      (e: unknown) => e,
    )) as AxiosError
    return { reads, text, error: { code: err.code, message: err.message } }
  }
  // Without Tool Replay first: recording and replay must show the app exactly this.
  const live = await scenario()
  assert.equal(live.error.code, 'ECONNRESET')
  const trace = traceName('stream')
  const recorded = await inSession('record', trace, scenario)
  const chunks = (await store.readTrace(trace)).exchanges[0]?.outcome
  const recordedChunks = chunks?.kind === 'response' ? chunks.response.body.chunks.length : 0
  assert.ok(recordedChunks >= 8, `events arrived apart (${recordedChunks} chunks)`)
  assert.equal(recorded.result.reads, recordedChunks)
  assert.deepEqual(recorded.result.error, live.error)
  assert.equal(recorded.result.text, live.text)
  const replayed = await inSession('replay', trace, scenario)
  replayed.assertDone()
  assert.deepEqual(replayed.result, recorded.result)
})
