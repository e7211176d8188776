/**
 * One behaviour per event across both capture paths: the same scenario (JSON, SSE, gzip, a reset mid-body,
 * a refused connection, a client abort, a 10 MB body) recorded through the interceptor and through the
 * proxy gives two traces `tr-proxy diff` finds no difference between.
 */
import assert from 'node:assert/strict'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { type Dispatcher, fetch, ProxyAgent } from 'undici'
import { runCli } from '../cli/index.ts'
import { install } from '../interceptor/index.ts'
import { createUpstreamAgent } from '../proxy/upstream.ts'
import { openStore } from '../store/index.ts'
import { startTestProxy, tempDir } from './support/proxy-harness.ts'
import { BIG_BODY, createTestPki, GZIP_TEXT, JSON_BODY, RESET_PARTIAL, startUpstream, type TestUpstream } from './support/proxy-upstream.ts'

let pki: Awaited<ReturnType<typeof createTestPki>>
let up: TestUpstream
let closedPort: number
const dir = tempDir('tr-cross-path-')
const storeDir = join(dir, 'store')

before(async () => {
  pki = await createTestPki(['api.test'])
  up = await startUpstream(pki.certs['api.test'])
  // A port nothing listens on: take one, then free it.
  const probe = createServer().listen(0, '127.0.0.1')
  await new Promise((r) => probe.once('listening', r))
  closedPort = (probe.address() as { port: number }).port
  await new Promise((r) => probe.close(r))
})
after(() => up.close())

/** The app: every kind of event, observed the same way on both paths. Returns what it saw. */
async function scenario(dispatcher: Dispatcher | undefined): Promise<string[]> {
  const seen: string[] = []
  const get = (path: string, init: Parameters<typeof fetch>[1] = {}) => fetch(`https://api.test${path}`, { ...init, ...(dispatcher ? { dispatcher } : {}) })
  seen.push(`json ${await (await get('/json')).text()}`)
  seen.push(`sse ${await (await get('/sse?n=8&gap=3')).text()}`)
  seen.push(`gzip ${(await (await get('/gzip')).text()) === GZIP_TEXT}`)
  try {
    const res = await get('/reset')
    await res.text()
    seen.push('reset: no error')
  } catch (err) {
    seen.push(`reset ${(err as Error & { cause?: { code?: string } }).cause?.code}`)
  }
  try {
    const r = await fetch(`https://refused.test/`, dispatcher ? { dispatcher } : {})
    // Through a proxy the client's own connection succeeded: the proxy answers for the upstream (README).
    seen.push(`refused ${r.status} ${r.headers.get('x-tool-replay-upstream-error')}`)
  } catch (err) {
    seen.push(`refused ${(err as Error & { cause?: { code?: string } }).cause?.code}`)
  }
  // The app reads one event and aborts; the stream ends 60 ms later, inside the drain window.
  const ac = new AbortController()
  const res = await get('/sse?n=4&gap=20', { signal: ac.signal })
  const reader = (res.body as ReadableStream<Uint8Array>).getReader()
  seen.push(`abort first ${new TextDecoder().decode((await reader.read()).value).length > 0}`)
  ac.abort()
  await reader.read().catch(() => {})
  const big = new Uint8Array(await (await get('/big')).arrayBuffer())
  seen.push(`big ${big.byteLength === BIG_BODY.byteLength && Buffer.from(big).equals(BIG_BODY)}`)
  return seen
}

test('the interceptor and the proxy record the same scenario identically: tr-proxy diff finds no difference', async () => {
  const resolve = { 'api.test': { host: '127.0.0.1', port: up.port }, 'refused.test': { host: '127.0.0.1', port: closedPort } }
  const store = await openStore(storeDir)
  let viaInterceptor: string[]
  let viaProxy: string[]
  try {
    const upstream = createUpstreamAgent({ ca: pki.caPem, resolve }, await import('undici'))
    const tr = await install({ mode: 'record', trace: 'by-interceptor', store, upstream })
    try {
      viaInterceptor = await scenario(undefined)
    } finally {
      await tr.close()
      await upstream.close()
    }
    const proxy = await startTestProxy({ store, storeDir, mode: 'record', trace: 'by-proxy', upstreamCaPem: pki.caPem, resolve })
    const agent = new ProxyAgent({ uri: proxy.url, requestTls: { ca: proxy.ca.certPem } })
    try {
      viaProxy = await scenario(agent)
    } finally {
      await agent.close()
      await proxy.close()
    }
    // What both traces must hold (so a diff that ignored everything could not pass this test).
    const outline = async (name: string) =>
      (await store.readTrace(name)).exchanges.map((x) =>
        x.outcome.kind === 'error'
          ? `${x.request.url} ${x.outcome.error.code} ${x.outcome.error.phase} ${x.outcome.error.partial?.body.size ?? '-'}`
          : `${x.request.url} ${x.outcome.response.status} ${x.outcome.response.body.size}`,
      )
    const expected = [
      `https://api.test/json 200 ${JSON_BODY.length}`,
      'https://api.test/sse?n=8&gap=3 200 296',
      `https://api.test/gzip 200 ${(await store.readTrace('by-interceptor')).exchanges[2]?.outcome.kind === 'response' ? 49 : -1}`,
      `https://api.test/reset UND_ERR_SOCKET response-body ${RESET_PARTIAL.length}`,
      'https://refused.test/ ECONNREFUSED connect -',
      'https://api.test/sse?n=4&gap=20 200 148',
      `https://api.test/big 200 ${BIG_BODY.byteLength}`,
    ]
    assert.deepEqual(await outline('by-interceptor'), expected)
    assert.deepEqual(await outline('by-proxy'), expected)
  } finally {
    await store.close()
  }
  // The one documented difference for the app: a refused upstream is a failed fetch in-process, a 502
  // naming the code through the proxy. The traces hold the same failure (checked by diff below).
  assert.ok(viaInterceptor.includes('refused ECONNREFUSED'), viaInterceptor.join('\n'))
  assert.ok(viaProxy.includes('refused 502 ECONNREFUSED'), viaProxy.join('\n'))
  const same = (lines: string[]) => lines.filter((l) => !l.startsWith('refused '))
  assert.deepEqual(same(viaProxy), same(viaInterceptor), 'the app saw the same things live on both paths')
  assert.ok(viaInterceptor.includes(`json ${JSON_BODY}`))
  assert.ok(viaInterceptor.some((l) => l.startsWith('reset ')) && !viaInterceptor.includes('reset: no error'), RESET_PARTIAL)

  const out: string[] = []
  const err: string[] = []
  const code = await runCli(['diff', 'by-interceptor', 'by-proxy', '--store', storeDir, '--exit-code'], { out: (t) => out.push(t), err: (t) => err.push(t) })
  assert.equal(code, 0, `tr-proxy diff reported differences:\n${out.join('\n')}\n${err.join('\n')}`)
})
