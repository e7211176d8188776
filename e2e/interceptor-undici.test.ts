/**
 * The interceptor with the `undici` package (v8, controller handler API) next to Node's bundled fetch
 * (legacy handler API): global install, per-request `dispatcher:`, undici.fetch and undici.request.
 */
import assert from 'node:assert/strict'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { Readable } from 'node:stream'
import { test } from 'node:test'
import { openSession } from 'tool-replay/engine'
import { createRecordReplayDispatcher, install } from 'tool-replay/interceptor'
import { createMemoryStore } from 'tool-replay/store'
import { fetch as undiciFetch, request as undiciRequest, upgrade as undiciUpgrade } from 'undici'

async function startServer(handler: http.RequestListener): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer(handler)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    async close() {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

const app: http.RequestListener = (req, res) => {
  const parts: Buffer[] = []
  req.on('data', (c: Buffer) => parts.push(c))
  req.on('end', () => {
    res.setHeader('set-cookie', ['a=1; Path=/', 'b=2; Path=/'])
    res.setHeader('content-type', 'application/json')
    res.write('{"path":')
    setTimeout(() => res.end(`${JSON.stringify(req.url)},"body":${JSON.stringify(Buffer.concat(parts).toString())}}`), 5)
  })
}

/** Everything a client can observe, through each client API. */
async function exercise(base: string, dispatcher?: import('undici').Dispatcher) {
  const withDispatcher = dispatcher ? { dispatcher } : {}
  const nodeFetch = await fetch(`${base}/node-fetch`, { method: 'POST', body: 'from node fetch', ...withDispatcher } as RequestInit)
  const uFetch = await undiciFetch(`${base}/undici-fetch`, { method: 'POST', body: 'from undici fetch', ...withDispatcher })
  const reqIterable = await undiciRequest(`${base}/request-iterable`, {
    method: 'POST',
    // undici.request accepts async iterables; its types list only Readable.
    body: (async function* () {
      yield 'async '
      yield Buffer.from('iterable')
    })() as unknown as Readable,
    ...withDispatcher,
  })
  const reqReadable = await undiciRequest(`${base}/request-readable`, { method: 'PUT', body: Readable.from(['node ', 'stream']), ...withDispatcher })
  return {
    nodeFetch: { json: await nodeFetch.json(), cookies: nodeFetch.headers.getSetCookie() },
    undiciFetch: { json: await uFetch.json(), cookies: uFetch.headers.getSetCookie() },
    requestIterable: { status: reqIterable.statusCode, json: await reqIterable.body.json(), cookies: reqIterable.headers['set-cookie'] },
    requestReadable: { status: reqReadable.statusCode, json: await reqReadable.body.json() },
  }
}

test('global install: Node fetch, undici.fetch and undici.request all record and replay', async () => {
  const server = await startServer(app)
  const store = createMemoryStore()
  const rec = await install({ mode: 'record', trace: 'undici-global', store })
  const live = await exercise(server.url)
  await rec.close()
  await server.close()
  assert.deepEqual(live.nodeFetch.json, { path: '/node-fetch', body: 'from node fetch' })
  assert.deepEqual(live.requestIterable.json, { path: '/request-iterable', body: 'async iterable' })
  assert.deepEqual(live.requestReadable.json, { path: '/request-readable', body: 'node stream' })

  const rep = await install({ mode: 'replay', trace: 'undici-global', store })
  const replayed = await exercise(server.url)
  rep.assertDone()
  await rep.close()
  const redacted = ['a=[REDACTED]; Path=/', 'b=[REDACTED]; Path=/']
  assert.deepEqual(replayed, {
    nodeFetch: { json: live.nodeFetch.json, cookies: redacted },
    undiciFetch: { json: live.undiciFetch.json, cookies: redacted },
    requestIterable: { status: 200, json: live.requestIterable.json, cookies: redacted },
    requestReadable: { status: 200, json: live.requestReadable.json },
  })
})

test('per-request dispatcher option, without a global install, works with every client', async () => {
  const server = await startServer(app)
  const store = createMemoryStore()
  const recording = createRecordReplayDispatcher({ session: await openSession({ mode: 'record', trace: 'per-request', store }) })
  const live = await exercise(server.url, recording)
  await recording.session.close()
  await recording.close()
  await server.close()

  const session = await openSession({ mode: 'replay', trace: 'per-request', store })
  const replaying = createRecordReplayDispatcher({ session })
  const replayed = await exercise(server.url, replaying)
  session.assertDone()
  await session.close()
  await replaying.close()
  assert.deepEqual(replayed.requestReadable, live.requestReadable)
  assert.deepEqual(replayed.undiciFetch.json, live.undiciFetch.json)
  assert.equal(replayed.undiciFetch.cookies.length, 2)
  assert.equal(replayed.nodeFetch.cookies.length, 2)
})

test('undici.request and undici.fetch get a miss as the refusal response: 403, x-should-retry false, the miss in JSON', async () => {
  const store = createMemoryStore()
  const server = await startServer(app)
  const rec = await install({ mode: 'record', trace: 'undici-miss', store })
  await (await undiciFetch(`${server.url}/known`)).text()
  await rec.close()
  await server.close()
  const rep = await install({ mode: 'replay', trace: 'undici-miss', store })
  const viaRequest = await undiciRequest(`${server.url}/unknown`)
  assert.equal(viaRequest.statusCode, 403)
  assert.equal(viaRequest.headers['x-tool-replay-error'], 'TR_REPLAY_MISS')
  assert.equal(viaRequest.headers['x-should-retry'], 'false')
  const requestBody = (await viaRequest.body.json()) as { error: { code: string; message: string } }
  assert.equal(requestBody.error.code, 'TR_REPLAY_MISS')
  assert.ok(requestBody.error.message.startsWith(`TR_REPLAY_MISS: Failed to replay "GET ${server.url}/unknown"`), requestBody.error.message)
  const viaFetch = await undiciFetch(`${server.url}/unknown-too`)
  assert.equal(viaFetch.status, 403)
  assert.equal(viaFetch.statusText, 'Tool Replay Refused')
  assert.equal(viaFetch.headers.get('x-tool-replay-error'), 'TR_REPLAY_MISS')
  const fetchBody = (await viaFetch.json()) as { error: { message: string } }
  assert.match(fetchBody.error.message, /closest recorded: "GET http:\/\/127\.0\.0\.1:\d+\/known" \(differs: path \/known → \/unknown-too\)/)
  assert.equal(rep.summary().misses.length, 2)
  await rep.close()
})

test('a refused connection through undici.fetch replays with the same cause code', async () => {
  const probe = await startServer(() => {})
  await probe.close()
  const store = createMemoryStore()
  const causeCode = async () =>
    undiciFetch(`${probe.url}/down`).then(
      () => 'no error',
      (e: Error & { cause?: { code?: string } }) => e.cause?.code,
    )
  const rec = await install({ mode: 'record', trace: 'undici-refused', store })
  const live = await causeCode()
  await rec.close()
  const rep = await install({ mode: 'replay', trace: 'undici-refused', store })
  const replayed = await causeCode()
  rep.assertDone()
  await rep.close()
  assert.equal(live, 'ECONNREFUSED')
  assert.equal(replayed, live)
})

test('a WebSocket upgrade nothing recorded is refused in strict replay as TR_REPLAY_MISS and counts in the ledger', async () => {
  const store = createMemoryStore()
  const rec = await install({ mode: 'record', trace: 'upgrade', store, global: false })
  await rec.close()
  const rep = await install({ mode: 'replay', trace: 'upgrade', store, global: false })
  await assert.rejects(
    undiciUpgrade('http://ws.test/socket', { dispatcher: rep.dispatcher, protocol: 'websocket' }),
    (err: unknown) => (err as { code?: string }).code === 'TR_REPLAY_MISS' && /no recorded exchange in trace "upgrade" matches/.test((err as Error).message),
  )
  assert.equal(rep.summary().misses.length, 1)
  assert.throws(() => rep.assertDone(), /1 unmatched/)
  await rep.close()
})
