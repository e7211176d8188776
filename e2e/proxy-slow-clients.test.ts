/**
 * Clients that never read cannot hold the proxy (issue 17, "Why" 4): 520 clients that send a request head one
 * byte a second and never read used to keep 512 slots after their 408 (an `end()` leaves the socket half-open
 * while the client keeps writing), so every valid client got 503 for as long as they stayed.
 * - Under those 520, valid clients — each on a new connection, so each needs a slot — are all served, none is
 *   refused (the proxy hands a newcomer the slot of the connection that has held one longest without a whole
 *   request), and every slow client is closed by the proxy within its head timeout plus the close grace,
 *   although it neither reads nor stops sending.
 * - Clients that ask for a big answer and never read it lose their slot: to a newcomer at the cap, and after
 *   clientReadTimeoutMs without one.
 * No timing is asserted beyond generous bounds; the p99 of the valid requests is reported (bench/slow-clients.ts
 * measures it).
 */
import assert from 'node:assert/strict'
import { request as httpRequest } from 'node:http'
import { connect, type Socket } from 'node:net'
import { performance } from 'node:perf_hooks'
import { after, before, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { type TLSSocket, connect as tlsConnect } from 'node:tls'
import { openSession } from '../engine/index.ts'
import { DEFAULT_PROXY_LIMITS, loadCertificateAuthority, type ProxyServer, startProxy } from '../proxy/index.ts'
import { createMemoryStore } from '../store/index.ts'
import { tempDir } from './support/proxy-harness.ts'
import { HELLO, startUpstream, type TestUpstream } from './support/proxy-upstream.ts'

let up: TestUpstream
before(async () => {
  up = await startUpstream()
})
after(() => up.close())

async function proxyWith(limits: Parameters<typeof startProxy>[0]['limits']): Promise<ProxyServer> {
  const session = await openSession({ mode: 'passthrough', trace: 'slow', store: createMemoryStore() })
  return startProxy({ session, ca: await loadCertificateAuthority(tempDir('tr-slow-clients-')), limits })
}

/** A client that never reads: it connects, sends `first`, then (if `drip`) one more head byte a second. */
interface Deaf {
  socket: Socket | TLSSocket
  /** When its socket closed (ms since the attack began), or undefined while open. */
  closedAt: number | undefined
}

/** Opens `count` deaf clients at once; resolves when all are connected. `stop()` destroys what is left. */
async function deafClients(port: number, count: number, first: string, drip: boolean): Promise<{ clients: Deaf[]; stop: () => void; began: number }> {
  const began = performance.now()
  const clients = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<Deaf>((resolve, reject) => {
          const socket = connect(port, '127.0.0.1')
          socket.pause() // never reads
          const client: Deaf = { socket, closedAt: undefined }
          socket.on('error', () => {})
          socket.once('close', () => (client.closedAt = performance.now() - began))
          socket.once('connect', () => {
            socket.write(first)
            resolve(client)
          })
          socket.once('error', reject)
        }),
    ),
  )
  const timer = drip
    ? setInterval(() => {
        for (const c of clients) if (c.closedAt === undefined && c.socket.writable) c.socket.write('a')
      }, 1000)
    : undefined
  return {
    clients,
    began,
    stop: () => {
      clearInterval(timer)
      for (const c of clients) c.socket.destroy()
    },
  }
}

/** One valid request through the proxy on a new connection: its status (0 for a failure) and how long it took. */
function validRequest(proxyPort: number): Promise<{ ok: boolean; status: number; ms: number; why?: string }> {
  const start = performance.now()
  return new Promise((resolve) => {
    const req = httpRequest({
      host: '127.0.0.1',
      port: proxyPort,
      path: `http://127.0.0.1:${up.port}/hello`,
      headers: { host: `127.0.0.1:${up.port}`, connection: 'close' },
      agent: false,
    })
    req.setTimeout(20_000, () => req.destroy(new Error('no answer in 20 s')))
    req.once('error', (err: NodeJS.ErrnoException) => resolve({ ok: false, status: 0, ms: performance.now() - start, why: err.code ?? err.message }))
    req.once('response', (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (d: string) => (body += d))
      res.once('end', () => resolve({ ok: res.statusCode === 200 && body === HELLO, status: res.statusCode ?? 0, ms: performance.now() - start }))
      res.once('error', () => resolve({ ok: false, status: res.statusCode ?? 0, ms: performance.now() - start, why: 'aborted' }))
    })
    req.end()
  })
}

/** `workers` clients in parallel, each sending `each` requests one after the other, `gapMs` apart. */
async function validLoad(proxyPort: number, workers: number, each: number, gapMs: number) {
  const results: Array<Awaited<ReturnType<typeof validRequest>>> = []
  await Promise.all(
    Array.from({ length: workers }, async () => {
      for (let i = 0; i < each; i++) {
        results.push(await validRequest(proxyPort))
        await sleep(gapMs)
      }
    }),
  )
  const ms = results.map((r) => r.ms).sort((a, b) => a - b)
  const p = (q: number) => ms[Math.min(ms.length - 1, Math.floor(q * ms.length))] ?? 0
  return { results, served: results.filter((r) => r.ok).length, p50: p(0.5), p99: p(0.99) }
}

test('520 clients that send a head one byte a second and never read: every valid request is served, none refused; each slow one is closed', async (t) => {
  const headersTimeoutMs = 4000
  const proxy = await proxyWith({ headersTimeoutMs })
  const attack = await deafClients(proxy.port, 520, `GET http://127.0.0.1:${up.port}/hello HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: `, true)
  try {
    // Every slot is held (512 of 520 got one) and old enough to be given up for a newcomer.
    await sleep(1200)
    // 8 workers x 25 requests, each on a new connection, for about 6 s: before and after the head timeout.
    const load = await validLoad(proxy.port, 8, 25, 200)
    const failed = load.results.filter((r) => !r.ok)
    t.diagnostic(`valid requests: ${load.served} of ${load.results.length} served; p50 ${load.p50.toFixed(1)} ms, p99 ${load.p99.toFixed(1)} ms`)
    assert.deepEqual(
      failed.map((r) => `${r.status} ${r.why ?? ''}`),
      [],
      'no valid request refused or failed',
    )
    assert.equal(load.served, 200)
    // Every slow client is closed by the proxy (they never read, and keep sending): within the head timeout,
    // the close grace and a second for its next byte to meet the closed socket, plus slack for a loaded machine.
    const bound = headersTimeoutMs + DEFAULT_PROXY_LIMITS.closeGraceMs + 1000 + 10_000
    for (let waited = 0; attack.clients.some((c) => c.closedAt === undefined) && waited < bound; waited += 100) await sleep(100)
    const open = attack.clients.filter((c) => c.closedAt === undefined).length
    assert.equal(open, 0, `${open} of 520 slow clients still hold a connection ${Math.round(performance.now() - attack.began)} ms into the attack`)
  } finally {
    attack.stop()
    await proxy.close({ graceMs: 100 })
  }
})

/** Deaf clients inside TLS tunnels: CONNECT, the proxy's TLS, then a head one byte a second; never read. */
async function deafTlsTunnels(port: number, count: number): Promise<{ clients: Deaf[]; stop: () => void }> {
  const began = performance.now()
  const clients = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<Deaf>((resolve, reject) => {
          const raw = connect(port, '127.0.0.1')
          raw.on('error', () => {})
          raw.once('error', reject)
          raw.once('connect', () => raw.write(`CONNECT api.test:443 HTTP/1.1\r\nHost: api.test:443\r\n\r\n`))
          raw.once('data', () => {
            const socket = tlsConnect({ socket: raw, servername: 'api.test', rejectUnauthorized: false })
            const client: Deaf = { socket, closedAt: undefined }
            socket.on('error', () => {})
            socket.once('close', () => (client.closedAt = performance.now() - began))
            socket.once('secureConnect', () => {
              socket.pause() // never reads
              socket.write('GET /hello HTTP/1.1\r\nHost: api.test\r\nX-Slow: ')
              resolve(client)
            })
          })
        }),
    ),
  )
  const timer = setInterval(() => {
    for (const c of clients) if (c.closedAt === undefined && c.socket.writable) c.socket.write('a')
  }, 1000)
  return {
    clients,
    stop: () => {
      clearInterval(timer)
      for (const c of clients) c.socket.destroy()
    },
  }
}

test('inside CONNECT tunnels too (plain and TLS): a head dripped to a client that never reads is answered 408 and closed', async () => {
  const headersTimeoutMs = 1500
  const proxy = await proxyWith({ headersTimeoutMs, closeGraceMs: 500 })
  // Plain HTTP inside the tunnel (as clients that tunnel http:// do), and HTTPS through the proxy's MITM.
  const plain = await deafClients(
    proxy.port,
    10,
    `CONNECT 127.0.0.1:${up.port} HTTP/1.1\r\nHost: 127.0.0.1:${up.port}\r\n\r\nGET /hello HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: `,
    true,
  )
  const tls = await deafTlsTunnels(proxy.port, 10)
  const all = [...plain.clients, ...tls.clients]
  try {
    // Head timeout, a sweep, the close grace and a second for the next byte to meet the closed socket, plus slack.
    const bound = headersTimeoutMs + 375 + 500 + 1000 + 10_000
    for (let waited = 0; all.some((c) => c.closedAt === undefined) && waited < bound; waited += 100) await sleep(100)
    assert.deepEqual(
      [plain.clients, tls.clients].map((list) => list.filter((c) => c.closedAt === undefined).length),
      [0, 0],
      'slow tunnels still open (plain, TLS)',
    )
  } finally {
    plain.stop()
    tls.stop()
    await proxy.close({ graceMs: 100 })
  }
})

/** A request for the upstream's 10 MB answer. */
const bigRequest = () => `GET http://127.0.0.1:${up.port}/big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`

test('at the cap, clients that never read a big answer give their slots to newcomers', async () => {
  // clientReadTimeoutMs far away: only eviction can free a slot within this test.
  const proxy = await proxyWith({ maxConnections: 10, clientReadTimeoutMs: 120_000 })
  const deaf = await deafClients(proxy.port, 10, bigRequest(), false)
  try {
    // Once their answers have stalled a while, a newcomer gets a slot; before that it may be refused.
    let valid = await validRequest(proxy.port)
    for (let tries = 1; !valid.ok && tries < 40; tries++) {
      await sleep(250)
      valid = await validRequest(proxy.port)
    }
    assert.equal(valid.ok, true, `the newcomer got ${valid.status} ${valid.why ?? ''} for 10 s`)
  } finally {
    deaf.stop()
    await proxy.close({ graceMs: 100 })
  }
})

test('a client that never reads its answer is dropped after clientReadTimeoutMs, without any newcomer', async () => {
  const clientReadTimeoutMs = 2000
  const proxy = await proxyWith({ clientReadTimeoutMs })
  const deaf = await deafClients(proxy.port, 10, bigRequest(), false)
  try {
    // It cannot see that until it reads: then it must find its answer cut and the connection gone (a kept
    // connection would deliver all 10 MB and stay open for keep-alive). Timeout + a sweep + slack.
    await sleep(clientReadTimeoutMs + 1000 + 3000)
    const full = 10 * 1024 * 1024
    const seen = await Promise.all(
      deaf.clients.map(
        (c) =>
          new Promise<string>((resolve) => {
            let got = 0
            const done = () => resolve(c.closedAt !== undefined && got < full ? 'dropped' : `kept (${got} bytes read)`)
            c.socket.on('data', (d: Buffer) => (got += d.byteLength))
            c.socket.once('close', done)
            setTimeout(done, 3000).unref()
            c.socket.resume()
          }),
      ),
    )
    assert.deepEqual(seen, Array(10).fill('dropped'), 'every client that never read was dropped')
  } finally {
    deaf.stop()
    await proxy.close({ graceMs: 100 })
  }
})

test('520 clients that trickle a request body (one byte a second) and never read: a valid client is served within 5 s, then every valid request; tricklers give their slots up', async (t) => {
  const proxy = await proxyWith({})
  // Whole heads, then a body announced at 100 kB that comes one byte a second: each is "a request in progress".
  const head = `POST http://127.0.0.1:${up.port}/hello HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\n`
  const attack = await deafClients(proxy.port, 520, head, true)
  try {
    // Every slot is held, each for longer than a newcomer must wait to take one.
    await sleep(1200)
    const deadline = performance.now() + 5000
    let valid = await validRequest(proxy.port)
    const refusals: string[] = []
    while (!valid.ok && performance.now() < deadline) {
      refusals.push(`${valid.status} ${valid.why ?? ''}`)
      await sleep(100)
      valid = await validRequest(proxy.port)
    }
    t.diagnostic(`valid client: ${valid.ok ? 'served' : 'not served'} in ${valid.ms.toFixed(0)} ms after ${refusals.length} refusal(s)`)
    assert.equal(valid.ok, true, `a valid client was not served within 5 s of 520 trickling bodies: ${refusals.slice(0, 3).join(', ')}`)
    // 4 workers x 10 requests, each on a new connection: each takes a trickler's slot.
    const load = await validLoad(proxy.port, 4, 10, 100)
    t.diagnostic(`then: ${load.served} of ${load.results.length} served; p50 ${load.p50.toFixed(1)} ms, p99 ${load.p99.toFixed(1)} ms`)
    assert.deepEqual(
      load.results.filter((r) => !r.ok).map((r) => `${r.status} ${r.why ?? ''}`),
      [],
      'no valid request refused or failed',
    )
    // The trickler whose slot was taken is closed by the proxy (answered 503, destroyed after the grace); the valid
    // clients close their connections, so one free slot serves them all.
    const bound = DEFAULT_PROXY_LIMITS.closeGraceMs + 10_000
    for (let waited = 0; attack.clients.every((c) => c.closedAt === undefined) && waited < bound; waited += 100) await sleep(100)
    assert.ok(
      attack.clients.some((c) => c.closedAt !== undefined),
      'a trickler gave its slot up and was closed',
    )
  } finally {
    attack.stop()
    await proxy.close({ graceMs: 100 })
  }
})
