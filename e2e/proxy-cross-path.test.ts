/**
 * One trace format for both capture paths: a proxy-recorded trace replays through the interceptor, and
 * an interceptor-recorded trace replays through the proxy (matching lives once, in the engine).
 */
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { Agent, ProxyAgent, request } from 'undici'
import { openSession } from '../engine/index.ts'
import { createRecordReplayDispatcher } from '../interceptor/index.ts'
import { createMemoryStore } from '../store/index.ts'
import { startTestProxy, tempDir } from './support/proxy-harness.ts'
import { createTestPki, HELLO, JSON_BODY, startUpstream, type TestUpstream } from './support/proxy-upstream.ts'

const POST_BODY = JSON.stringify({ q: 'cross' })

let pki: Awaited<ReturnType<typeof createTestPki>>
let up: TestUpstream
const storeDir = tempDir('tr-proxy-cross-')

before(async () => {
  // An IP-literal upstream: the interceptor reaches it directly, the proxy intercepts CONNECT 127.0.0.1:PORT.
  pki = await createTestPki(['127.0.0.1'])
  up = await startUpstream(pki.certs['127.0.0.1'])
})
after(async () => {
  await up.close()
})

async function exercise(dispatcher: import('undici').Dispatcher): Promise<string[]> {
  const base = `https://127.0.0.1:${up.port}`
  const out: string[] = []
  for (const path of ['/hello', '/json']) {
    const r = await request(`${base}${path}`, { dispatcher })
    out.push(`${r.statusCode} ${await r.body.text()}`)
  }
  const r = await request(`${base}/echo`, { dispatcher, method: 'POST', headers: { 'content-type': 'application/json' }, body: POST_BODY })
  out.push(`${r.statusCode} ${await r.body.text()}`)
  return out
}

const EXPECTED = [`200 ${HELLO}`, `200 ${JSON_BODY}`, `200 ${POST_BODY}`]

test('a proxy-recorded trace replays through the interceptor', async () => {
  const store = createMemoryStore()
  const proxy = await startTestProxy({ store, storeDir, mode: 'record', trace: 'by-proxy', upstreamCaPem: pki.caPem, resolve: {} })
  const viaProxy = new ProxyAgent({ uri: proxy.url, requestTls: { ca: proxy.ca.certPem } })
  assert.deepEqual(await exercise(viaProxy), EXPECTED)
  await viaProxy.close()
  await proxy.close()

  const before = up.connections
  const session = await openSession({ mode: 'replay', trace: 'by-proxy', store })
  const dispatcher = createRecordReplayDispatcher({ session })
  assert.deepEqual(await exercise(dispatcher), EXPECTED)
  await dispatcher.close()
  const summary = await session.close()
  assert.ok(summary.ok, JSON.stringify(summary))
  assert.equal(up.connections, before)
})

test('an interceptor-recorded trace replays through the proxy', async () => {
  const store = createMemoryStore()
  const session = await openSession({ mode: 'record', trace: 'by-interceptor', store })
  const upstream = new Agent({ connect: { ca: pki.caPem } })
  const dispatcher = createRecordReplayDispatcher({ session, upstream })
  assert.deepEqual(await exercise(dispatcher), EXPECTED)
  await dispatcher.close()
  await upstream.close()
  await session.close()

  const before = up.connections
  const proxy = await startTestProxy({ store, storeDir, mode: 'replay', trace: 'by-interceptor', upstreamCaPem: pki.caPem, resolve: {} })
  const viaProxy = new ProxyAgent({ uri: proxy.url, requestTls: { ca: proxy.ca.certPem } })
  assert.deepEqual(await exercise(viaProxy), EXPECTED)
  await viaProxy.close()
  const summary = await proxy.close()
  assert.ok(summary.ok, JSON.stringify(summary))
  assert.equal(up.connections, before)
})
