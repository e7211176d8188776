/**
 * node:http capture reaches every way an app can hold `request`/`get`: the ESM namespace
 * (`import * as https from 'node:https'`), ESM named bindings (`import { request, get } from 'node:http'`)
 * and a reference taken before install() (CJS code that destructured `request` at load time). Recorded, then
 * replayed strictly with an upstream that counts connections (must see none) and then with it stopped.
 */
import assert from 'node:assert/strict'
import { AsyncResource } from 'node:async_hooks'
import { mkdtemp, rm } from 'node:fs/promises'
import httpCjs, * as nsHttp from 'node:http'
import { get, type IncomingMessage, request } from 'node:http'
import * as https from 'node:https'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { install } from 'tool-replay/interceptor'
import { openStore, type TraceStore } from 'tool-replay/store'
import { Agent, fetch as undiciFetch } from 'undici'
import { createTestPki, HELLO, JSON_BODY, startUpstream } from './support/proxy-upstream.ts'

/** Taken before any install(), as CJS code that destructures at load time holds it. */
const earlyRequest = nsHttp.request

let pki: Awaited<ReturnType<typeof createTestPki>>
let dir: string
let store: TraceStore
before(async () => {
  pki = await createTestPki(['localhost'])
  dir = await mkdtemp(join(tmpdir(), 'tr-node-http-esm-'))
  store = await openStore(join(dir, 'store'))
})
after(async () => {
  await store.close()
  await rm(dir, { recursive: true, force: true })
})

/** Reads a response to the end; a refusal or a network error shows up as its status or error code. */
function bodyOf(make: (done: (res: IncomingMessage) => void) => nsHttp.ClientRequest): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = make((res) => {
      let body = ''
      res.setEncoding('latin1')
      res.on('data', (c: string) => {
        body += c
      })
      res.on('end', () => resolve(`${res.statusCode} ${body}`))
    })
    req.on('error', (err: Error & { code?: string }) => resolve(`error ${err.code ?? err.message}`))
    req.setTimeout(5000, () => reject(new Error('no answer in 5 s')))
  })
}

test('ESM namespace, ESM named imports and a pre-install reference are captured: strict replay opens no connection', async () => {
  const tlsUp = await startUpstream(pki.certs.localhost)
  const plainUp = await startUpstream()
  const plain = `http://127.0.0.1:${plainUp.port}`
  // Each call starts in the test's own async context: one made from an earlier request's callback would
  // inherit msw's context for that request and be captured however it was called (as would one reusing a
  // kept-alive socket a captured request opened, hence `agent: false` for the pre-install reference).
  const calls = [
    (done: (res: IncomingMessage) => void) => https.request(`https://localhost:${tlsUp.port}/json`, { ca: pki.caPem }, done).end(),
    (done: (res: IncomingMessage) => void) => https.get(`https://localhost:${tlsUp.port}/hello`, { ca: pki.caPem }, done),
    (done: (res: IncomingMessage) => void) => request(`${plain}/hello`, done).end(),
    (done: (res: IncomingMessage) => void) => get(`${plain}/json`, done),
    (done: (res: IncomingMessage) => void) => earlyRequest(`${plain}/hello?early=1`, { agent: false }, done).end(),
  ].map((call) => AsyncResource.bind(() => bodyOf(call)))
  const scenario = async () => {
    const out: string[] = []
    for (const call of calls) out.push(await call())
    return out
  }
  const expected = [`200 ${JSON_BODY}`, `200 ${HELLO}`, `200 ${HELLO}`, `200 ${JSON_BODY}`, `200 ${HELLO}`]

  const rec = await install({ mode: 'record', trace: 'esm', store })
  let recorded: string[]
  try {
    // The named bindings follow msw's patch (so requests made through them carry msw's request context)...
    assert.equal(request, httpCjs.request, 'the ESM binding is the patched http.request')
    assert.notEqual(request, earlyRequest)
    recorded = await scenario()
  } finally {
    await rec.close()
  }
  // ...and return to Node's own once the capture is gone.
  assert.equal(request, earlyRequest, 'uninstall restored the ESM binding')
  assert.deepEqual(recorded, expected)
  assert.equal((await store.readTrace('esm')).exchanges.length, 5, 'all five requests were recorded')

  const connections = tlsUp.connections + plainUp.connections
  for (const stopped of [false, true]) {
    if (stopped) await Promise.all([tlsUp.close(), plainUp.close()])
    const rep = await install({ mode: 'replay', trace: 'esm', store })
    try {
      assert.deepEqual(await scenario(), expected, stopped ? 'upstreams stopped' : 'upstreams running')
      rep.assertDone()
    } finally {
      await rep.close()
    }
    if (!stopped) assert.equal(tlsUp.connections + plainUp.connections, connections, 'strict replay opened no connection')
  }
})

test("strict replay refuses, not sends, what it cannot capture: an app's own undici Agent gets the refusal and a ledger entry", async () => {
  const tlsUp = await startUpstream(pki.certs.localhost)
  const plainUp = await startUpstream()
  // A per-request dispatcher bypasses the global one install() sets: Tool Replay neither records nor replays it.
  const own = new Agent({ connect: { ca: pki.caPem } })
  const urls = [`http://127.0.0.1:${plainUp.port}/hello`, `https://localhost:${tlsUp.port}/json`]
  const scenario = () =>
    Promise.all(
      urls.map(async (url) => {
        const res = await undiciFetch(url, { dispatcher: own })
        return `${res.status} ${res.headers.get('x-tool-replay-error') ?? (await res.text())}`
      }),
    )
  try {
    // Live modes leave it to the network, unrecorded, as before.
    const rec = await install({ mode: 'record', trace: 'own-agent', store })
    try {
      assert.deepEqual(await scenario(), [`200 ${HELLO}`, `200 ${JSON_BODY}`])
    } finally {
      assert.equal((await rec.close()).recorded, 0)
    }
    const connections = tlsUp.connections + plainUp.connections
    const rep = await install({ mode: 'replay', trace: 'own-agent', store })
    try {
      assert.deepEqual(await scenario(), ['403 TR_REPLAY_MISS', '403 TR_REPLAY_MISS'])
      assert.deepEqual(
        rep.summary().misses.map((m) => m.code),
        ['TR_REPLAY_MISS', 'TR_REPLAY_MISS'],
      )
      assert.throws(
        () => rep.assertDone(),
        (err: Error & { code?: string }) => err.code === 'TR_REPLAY_INCOMPLETE',
      )
    } finally {
      await rep.close()
    }
    assert.equal(tlsUp.connections + plainUp.connections, connections, 'strict replay opened no connection')
  } finally {
    await own.close()
    await Promise.all([tlsUp.close(), plainUp.close()])
  }
})
