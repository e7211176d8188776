/**
 * One trace format for every capture path: a trace recorded through node:http replays through the proxy
 * and through fetch in-process when the requests are the same, and a fetch-recorded trace replays through
 * node:http (matching lives once, in the engine).
 */
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { Agent, ProxyAgent, request } from 'undici'
import { install } from '../interceptor/index.ts'
import { createMemoryStore } from '../store/index.ts'
import { nodeHttpCall } from './support/node-http-client.ts'
import { startTestProxy, tempDir } from './support/proxy-harness.ts'
import { createTestPki, HELLO, JSON_BODY, startUpstream, type TestUpstream } from './support/proxy-upstream.ts'

const POST_BODY = JSON.stringify({ q: 'cross', path: 'node:http' })
const EXPECTED = [`200 ${HELLO}`, `200 ${JSON_BODY}`, `200 ${POST_BODY}`]

let pki: Awaited<ReturnType<typeof createTestPki>>
let up: TestUpstream
let base: string
const storeDir = tempDir('tr-node-http-cross-')

before(async () => {
  // An IP-literal upstream: reached directly in-process, and as CONNECT 127.0.0.1:PORT through the proxy.
  pki = await createTestPki(['127.0.0.1'])
  up = await startUpstream(pki.certs['127.0.0.1'])
  base = `https://127.0.0.1:${up.port}`
})
after(() => up.close())

/** The same three requests through node:http. */
async function viaNodeHttp(): Promise<string[]> {
  const out: string[] = []
  for (const path of ['/hello', '/json']) {
    const r = await nodeHttpCall(`${base}${path}`, { ca: pki.caPem })
    out.push(`${r.status} ${r.body}`)
  }
  const r = await nodeHttpCall(`${base}/echo`, { ca: pki.caPem, method: 'POST', headers: { 'content-type': 'application/json' }, body: POST_BODY })
  out.push(`${r.status} ${r.body}`)
  return out
}

/** The same three requests through undici's request API on `dispatcher` (the proxy path). */
async function viaDispatcher(dispatcher: import('undici').Dispatcher): Promise<string[]> {
  const out: string[] = []
  for (const path of ['/hello', '/json']) {
    const r = await request(`${base}${path}`, { dispatcher })
    out.push(`${r.statusCode} ${await r.body.text()}`)
  }
  const r = await request(`${base}/echo`, { dispatcher, method: 'POST', headers: { 'content-type': 'application/json' }, body: POST_BODY })
  out.push(`${r.statusCode} ${await r.body.text()}`)
  return out
}

/** The same three requests through Node's built-in fetch. */
async function viaFetch(): Promise<string[]> {
  const out: string[] = []
  for (const path of ['/hello', '/json']) {
    const r = await fetch(`${base}${path}`)
    out.push(`${r.status} ${await r.text()}`)
  }
  const r = await fetch(`${base}/echo`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: POST_BODY })
  out.push(`${r.status} ${await r.text()}`)
  return out
}

test('a node:http-recorded trace replays through the proxy and through fetch, opening no connection', async () => {
  const store = createMemoryStore()
  const rec = await install({ mode: 'record', trace: 'by-node-http', store })
  assert.deepEqual(await viaNodeHttp(), EXPECTED)
  await rec.close()
  const stored = await store.readTrace('by-node-http')
  assert.ok(
    stored.exchanges.every((x) => x.request.headers.some(([k]) => k === 'host')),
    'recorded through node:http (its requests carry the Host field)',
  )

  const before = up.connections
  const proxy = await startTestProxy({ store, storeDir, mode: 'replay', trace: 'by-node-http', upstreamCaPem: pki.caPem, resolve: {} })
  const viaProxy = new ProxyAgent({ uri: proxy.url, requestTls: { ca: proxy.ca.certPem } })
  assert.deepEqual(await viaDispatcher(viaProxy), EXPECTED)
  await viaProxy.close()
  const proxied = await proxy.close()
  assert.ok(proxied.ok, JSON.stringify(proxied))

  const rep = await install({ mode: 'replay', trace: 'by-node-http', store })
  try {
    assert.deepEqual(await viaFetch(), EXPECTED)
    rep.assertDone()
  } finally {
    await rep.close()
  }
  assert.equal(up.connections, before, 'neither replay reached the upstream')
})

test('a fetch-recorded trace replays through node:http', async () => {
  const store = createMemoryStore()
  const upstream = new Agent({ connect: { ca: pki.caPem } })
  const rec = await install({ mode: 'record', trace: 'by-fetch', store, upstream })
  assert.deepEqual(await viaFetch(), EXPECTED)
  await rec.close()
  await upstream.close()

  const before = up.connections
  const rep = await install({ mode: 'replay', trace: 'by-fetch', store })
  try {
    assert.deepEqual(await viaNodeHttp(), EXPECTED)
    rep.assertDone()
  } finally {
    await rep.close()
  }
  assert.equal(up.connections, before)
})
