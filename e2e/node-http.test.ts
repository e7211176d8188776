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
import { type InstallOptions, install } from 'tool-replay/interceptor'
import { createMemoryStore, openStore, type TraceStore } from 'tool-replay/store'
import type { Exchange } from 'tool-replay/trace'
import { filesUnder } from './support/files-under.ts'
import { type NodeHttpResult, nodeHttpCall } from './support/node-http-client.ts'
import { BIG_BODY, createTestPki, GZIP_TEXT, HELLO, JSON_BODY, RESET_PARTIAL, startUpstream, type TestUpstream } from './support/proxy-upstream.ts'

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
async function inSession<T>(mode: InstallOptions['mode'], trace: string, scenario: () => Promise<T>, extra: Partial<InstallOptions> = {}) {
  const tr = await install({ mode, trace, store, ...extra })
  try {
    const result = await scenario()
    return { result, summary: tr.summary(), assertDone: () => tr.assertDone() }
  } finally {
    await tr.close()
  }
}

/** What a test compares between record and replay: the app's view without timing. */
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
    for (const path of ['/hello', '/json', '/hello']) out.push(await nodeHttpCall(`https://localhost:${up.port}${path}`, { agent, headers: { connection: 'close' } }))
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
