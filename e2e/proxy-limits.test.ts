/**
 * Slow and numerous clients cannot exhaust the proxy: incomplete request heads and silent tunnels time out,
 * valid clients are served meanwhile, and connections over the cap are refused with an explanation.
 */
import assert from 'node:assert/strict'
import { connect, type Socket } from 'node:net'
import { after, before, test } from 'node:test'
import { ProxyAgent, request } from 'undici'
import { openSession } from '../engine/index.ts'
import { loadCertificateAuthority, type ProxyServer, startProxy } from '../proxy/index.ts'
import { createMemoryStore } from '../store/index.ts'
import { tempDir } from './support/proxy-harness.ts'
import { HELLO, startUpstream, type TestUpstream } from './support/proxy-upstream.ts'

let up: TestUpstream
before(async () => {
  up = await startUpstream()
})
after(() => up.close())

async function proxyWith(limits: Parameters<typeof startProxy>[0]['limits']): Promise<ProxyServer> {
  const session = await openSession({ mode: 'passthrough', trace: 'limits', store: createMemoryStore() })
  return startProxy({ session, ca: await loadCertificateAuthority(tempDir('tr-limits-')), limits })
}

/** Opens a raw connection to the proxy and resolves once connected; collects what comes back. */
function rawClient(port: number, first: string): Promise<{ socket: Socket; received: () => string; closed: Promise<void> }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1')
    let data = ''
    socket.setEncoding('latin1')
    socket.on('data', (d: string) => {
      data += d
    })
    const closed = new Promise<void>((r) => socket.once('close', () => r()))
    socket.once('error', () => {})
    socket.once('connect', () => {
      socket.write(first)
      resolve({ socket, received: () => data, closed })
    })
    socket.once('error', reject)
  })
}

const within = <T>(p: Promise<T>, ms: number, what: string) =>
  Promise.race([p, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${what} did not happen within ${ms} ms`)), ms).unref())])

test('200 slow clients (incomplete heads, silent tunnels) time out while valid clients are served', async () => {
  const proxy = await proxyWith({ headersTimeoutMs: 600, maxConnections: 1000 })
  try {
    const slow = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        rawClient(
          proxy.port,
          i % 2 === 0 ? `GET http://127.0.0.1:${up.port}/hello HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ` : `CONNECT 127.0.0.1:${up.port} HTTP/1.1\r\n\r\n`,
        ),
      ),
    )
    // Valid clients, while all 200 slow ones hold their connections.
    const agent = new ProxyAgent(proxy.url)
    const bodies = await Promise.all(
      Array.from({ length: 20 }, async () => (await request(`http://127.0.0.1:${up.port}/hello`, { dispatcher: agent })).body.text()),
    )
    assert.deepEqual(new Set(bodies), new Set([HELLO]))
    await agent.close()
    // Then every slow client is dropped: heads get 408, silent tunnels are closed.
    await within(Promise.all(slow.map((s) => s.closed)), 5000, 'closing all 200 slow clients')
    const heads = slow.filter((_, i) => i % 2 === 0)
    assert.ok(
      heads.every((s) => /^HTTP\/1\.1 408 /.test(s.received())),
      heads.map((s) => s.received().split('\r\n')[0]).find((l) => !l?.startsWith('HTTP/1.1 408')),
    )
  } finally {
    await proxy.close({ graceMs: 100 })
  }
})

test('connections over the cap are refused with a 503 that says why; the others keep working', async () => {
  const proxy = await proxyWith({ maxConnections: 5 })
  try {
    const held = await Promise.all(Array.from({ length: 5 }, () => rawClient(proxy.port, '')))
    const over = await rawClient(proxy.port, '')
    await within(over.closed, 3000, 'refusing the sixth connection')
    assert.match(over.received(), /^HTTP\/1\.1 503 /)
    assert.match(over.received(), /x-tool-replay-error: TR_PROXY_BUSY/)
    assert.match(over.received(), /--max-connections/)
    // A held connection still gets answered.
    const first = held[0] as (typeof held)[number]
    first.socket.write(`GET http://127.0.0.1:${up.port}/hello HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`)
    await within(first.closed, 3000, 'answering a held connection')
    assert.match(first.received(), /^HTTP\/1\.1 200 /)
    assert.ok(first.received().includes(HELLO), JSON.stringify(first.received()))
    for (const h of held) h.socket.destroy()
  } finally {
    await proxy.close({ graceMs: 100 })
  }
})

test('at the cap, a request body trickling in below the minimum rate gives its slot up with a 503 TR_PROXY_BUSY that says why; a fast one keeps it', async () => {
  const proxy = await proxyWith({ maxConnections: 2, minBodyBytesPerSecond: 500 })
  const head = (length: number) => `POST http://127.0.0.1:${up.port}/hello HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: ${length}\r\n\r\n`
  const slow = await rawClient(proxy.port, head(10_000))
  // The fast one sends 2 kB every 100 ms (20 kB/s) of its 2 MB body for the whole test.
  const fast = await rawClient(proxy.port, head(2_000_000))
  const pump = setInterval(() => fast.socket.write('y'.repeat(2000)), 100)
  const drip = setInterval(() => slow.socket.write('s'), 200)
  try {
    await new Promise((r) => setTimeout(r, 1300))
    const newcomer = await rawClient(proxy.port, `GET http://127.0.0.1:${up.port}/hello HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`)
    await within(newcomer.closed, 5000, 'serving the newcomer')
    assert.match(newcomer.received(), /^HTTP\/1\.1 200 /)
    await within(slow.closed, 5000, 'closing the trickling body')
    assert.match(slow.received(), /^HTTP\/1\.1 503 /)
    assert.match(slow.received(), /x-tool-replay-error: TR_PROXY_BUSY/)
    assert.match(slow.received(), /this request's body came at \d+ bytes\/s for \d+ ms, below the minimum of 500: it was closed to serve another/)
    assert.equal(fast.received(), '', 'the body that arrives fast keeps its slot')
  } finally {
    clearInterval(pump)
    clearInterval(drip)
    slow.socket.destroy()
    fast.socket.destroy()
    await proxy.close({ graceMs: 100 })
  }
})
