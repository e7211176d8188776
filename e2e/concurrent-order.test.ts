/**
 * Ten concurrent identical requests pair up with the same responses on every replay, through the
 * interceptor and through the proxy over HTTP and HTTPS: the engine numbers requests in the order the app
 * issued them (dispatch order in-process; connection order through the proxy, taken before CONNECT and TLS
 * handshakes that finish in any order), when recording and when replaying.
 */
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { createServer } from 'node:http'
import { createServer as createHttpsServer } from 'node:https'
import { connect, type Socket } from 'node:net'
import { after, before, test } from 'node:test'
import { setTimeout as delay } from 'node:timers/promises'
import { type TLSSocket, connect as tlsConnect } from 'node:tls'
import { install } from '../interceptor/index.ts'
import { createMemoryStore, type TraceStore } from '../store/index.ts'
import { startTestProxy, tempDir } from './support/proxy-harness.ts'
import { createTestPki } from './support/proxy-upstream.ts'

const CALLERS = 10
const REPLAYS = 20
let pki: Awaited<ReturnType<typeof createTestPki>>
let plainPort = 0
let tlsPort = 0
let servers: Array<{ close: () => void }> = []

/** Answers each request with its arrival number, after a small random delay: arrival order is not answer order. */
function counting() {
  let n = 0
  return (_req: unknown, res: import('node:http').ServerResponse) => {
    const mine = n++
    setTimeout(() => res.end(`response ${mine}`), Math.floor(Math.random() * 15))
  }
}

before(async () => {
  pki = await createTestPki(['count.test'])
  const plain = createServer(counting())
  const tls = createHttpsServer(pki.certs['count.test'] as { cert: string; key: string }, counting())
  await new Promise<void>((r) => plain.listen(0, '127.0.0.1', r))
  await new Promise<void>((r) => tls.listen(0, '127.0.0.1', r))
  plainPort = (plain.address() as { port: number }).port
  tlsPort = (tls.address() as { port: number }).port
  servers = [plain, tls]
})
after(() => {
  for (const s of servers) s.close()
})

/** What each of ten concurrent callers got. */
async function burst(get: () => Promise<string>): Promise<string[]> {
  return Promise.all(Array.from({ length: CALLERS }, () => get()))
}

test('interceptor: ten concurrent identical requests get the same response each, on 20 replays', async () => {
  const store: TraceStore = createMemoryStore()
  const url = `http://127.0.0.1:${plainPort}/count`
  const rec = await install({ mode: 'record', trace: 'burst', store })
  const recorded = await burst(async () => (await fetch(url)).text())
  await rec.close()
  assert.equal(new Set(recorded).size, CALLERS, 'every caller got a different response live')
  for (let i = 0; i < REPLAYS; i++) {
    const tr = await install({ mode: 'replay', trace: 'burst', store })
    assert.deepEqual(await burst(async () => (await fetch(url)).text()), recorded, `replay ${i + 1}`)
    tr.assertDone()
    await tr.close()
  }
})

/**
 * One client connection per caller, opened in caller order (each TCP connect completes before the next
 * starts), then a random delay before the TLS handshake (https) or the request (http): the requests reach
 * the proxy in a different order every run, while the order the app issued them stays observable.
 */
async function rawCaller(
  proxyPort: number,
  scheme: 'http' | 'https',
  caPem: string,
  connected: Promise<void>,
): Promise<{ socket: Socket; response: Promise<string> }> {
  const socket = connect(proxyPort, '127.0.0.1')
  await once(socket, 'connect')
  const response = (async () => {
    await connected
    await delay(Math.floor(Math.random() * 30))
    let stream: Socket | TLSSocket = socket
    if (scheme === 'https') {
      socket.write('CONNECT count.test:443 HTTP/1.1\r\nHost: count.test:443\r\n\r\n')
      const [head] = (await once(socket, 'data')) as [Buffer]
      assert.match(head.toString(), /^HTTP\/1\.1 200/)
      await delay(Math.floor(Math.random() * 30))
      stream = tlsConnect({ socket, servername: 'count.test', ca: caPem })
      await once(stream, 'secureConnect')
      stream.write('GET /count HTTP/1.1\r\nHost: count.test\r\nConnection: close\r\n\r\n')
    } else {
      stream.write('GET http://count.test/count HTTP/1.1\r\nHost: count.test\r\nConnection: close\r\n\r\n')
    }
    const parts: Buffer[] = []
    stream.on('data', (d: Buffer) => parts.push(d))
    await once(stream, 'end')
    return Buffer.concat(parts).toString().split('\r\n\r\n').slice(1).join('\r\n\r\n')
  })()
  return { socket, response }
}

for (const scheme of ['http', 'https'] as const) {
  test(`proxy over ${scheme}: ten concurrent identical requests whose handshakes finish in any order get the same response each, on 20 replays`, async () => {
    const store: TraceStore = createMemoryStore()
    const storeDir = tempDir('tr-order-')
    const resolve = { 'count.test': { host: '127.0.0.1', port: scheme === 'https' ? tlsPort : plainPort } }
    const base = { store, storeDir, trace: 'burst', upstreamCaPem: pki.caPem, resolve }
    const through = async (mode: 'record' | 'replay') => {
      const proxy = await startTestProxy({ ...base, mode })
      try {
        let go = () => {}
        const connected = new Promise<void>((r) => (go = r))
        const callers = []
        for (let i = 0; i < CALLERS; i++) callers.push(await rawCaller(proxy.port, scheme, proxy.ca.certPem, connected))
        go()
        return await Promise.all(callers.map((c) => c.response))
      } finally {
        const summary = await proxy.close()
        assert.ok(summary.ok, JSON.stringify(summary))
      }
    }
    const recorded = await through('record')
    assert.equal(new Set(recorded).size, CALLERS, recorded.join(' | '))
    for (let i = 0; i < REPLAYS; i++) assert.deepEqual(await through('replay'), recorded, `replay ${i + 1}`)
  })
}
