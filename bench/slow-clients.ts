/**
 * Slow-client benchmark: how valid clients fare while hundreds of clients hold connections to the proxy without
 * doing their part (issue 17, "Why" 4). The proxy runs with its default limits (512 connections, 30 s head
 * timeout, 2 s close grace, 30 s unread-answer timeout) in this process; the clients run in a worker thread, so
 * the proxy's event loop is its own. Each row: valid GETs of 1 KB through the proxy, 8 at a time, each on a new
 * connection (so each needs a slot), for BENCH_SECONDS, while the slow clients hold theirs:
 * - "heads": connect, send a request head one byte a second, never read;
 * - "unread": ask for a 2 MB answer and never read it.
 *
 *   node --conditions=tool-replay-source bench/slow-clients.ts        (BENCH_SECONDS=5 for a quicker run)
 *
 * Reported: valid requests sent, served (200 with the whole body), refused or failed, p50 and p99 latency, and
 * how many slow clients still held a connection when the row ended.
 */
import { once } from 'node:events'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer, request as httpRequest } from 'node:http'
import { type AddressInfo, connect, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads'
import { openSession } from '../engine/index.ts'
import { loadCertificateAuthority, startProxy } from '../proxy/index.ts'
import { createMemoryStore } from '../store/index.ts'

const SECONDS = Number(process.env.BENCH_SECONDS ?? 20)
const WORKERS = 8
const SMALL = Buffer.alloc(1024, 'x')
const LARGE = Buffer.alloc(2 * 1024 * 1024, 'y')

interface Scenario {
  name: string
  heads: number
  unread: number
}
const SCENARIOS: Scenario[] = [
  { name: 'no slow clients', heads: 0, unread: 0 },
  { name: '500 slow: 400 heads + 100 unread', heads: 400, unread: 100 },
  { name: '520 slow heads (over the cap)', heads: 520, unread: 0 },
]

interface RowResult {
  sent: number
  served: number
  failed: string[]
  p50: number
  p99: number
  slowStillOpen: number
  slow: number
}

if (isMainThread) await main()
else await clientSide(workerData as { proxyPort: number; upstreamPort: number; scenario: Scenario; seconds: number })

async function main(): Promise<void> {
  const upstream = createServer((req, res) => {
    const body = req.url === '/large' ? LARGE : SMALL
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(body.byteLength) })
    res.end(body)
  })
  upstream.listen(0, '127.0.0.1')
  await once(upstream, 'listening')
  const upstreamPort = (upstream.address() as AddressInfo).port
  const dir = mkdtempSync(join(tmpdir(), 'tr-bench-slow-'))
  const rows: Array<[Scenario, RowResult]> = []
  try {
    for (const scenario of SCENARIOS) {
      const session = await openSession({ mode: 'passthrough', trace: 'bench', store: createMemoryStore() })
      const proxy = await startProxy({ session, ca: await loadCertificateAuthority(dir) })
      const worker = new Worker(new URL(import.meta.url), { workerData: { proxyPort: proxy.port, upstreamPort, scenario, seconds: SECONDS } })
      const [result] = (await once(worker, 'message')) as [RowResult]
      await worker.terminate()
      await proxy.close({ graceMs: 100 })
      rows.push([scenario, result])
      console.error(`${scenario.name}: done`)
    }
  } finally {
    upstream.closeAllConnections()
    upstream.close()
    rmSync(dir, { recursive: true, force: true })
  }
  console.log(`Valid GETs (1 KB, new connection each, ${WORKERS} at a time, ${SECONDS} s) through the proxy with default limits:`)
  console.log('scenario                              sent  served  refused/failed   p50 ms   p99 ms  slow clients still open')
  for (const [s, r] of rows) {
    const fails = r.failed.length === 0 ? '0' : `${r.failed.length} (${[...new Set(r.failed)].join(', ')})`
    console.log(
      `${s.name.padEnd(36)}${String(r.sent).padStart(6)}${String(r.served).padStart(8)}  ${fails.padEnd(15)}${r.p50.toFixed(1).padStart(8)}${r.p99.toFixed(1).padStart(9)}  ${r.slow === 0 ? '-' : `${r.slowStillOpen} of ${r.slow}`}`,
    )
  }
}

/** The worker: opens the slow clients, then runs the valid load and reports. */
async function clientSide(o: { proxyPort: number; upstreamPort: number; scenario: Scenario; seconds: number }): Promise<void> {
  const target = `http://127.0.0.1:${o.upstreamPort}`
  const slow: Array<{ socket: Socket; closed: boolean }> = []
  const open = (first: string) =>
    new Promise<void>((resolve) => {
      const socket = connect(o.proxyPort, '127.0.0.1')
      socket.pause() // never reads
      const c = { socket, closed: false }
      slow.push(c)
      socket.on('error', () => {})
      socket.once('close', () => (c.closed = true))
      socket.once('connect', () => {
        socket.write(first)
        resolve()
      })
    })
  await Promise.all([
    ...Array.from({ length: o.scenario.heads }, () => open(`GET ${target}/small HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: `)),
    ...Array.from({ length: o.scenario.unread }, () => open(`GET ${target}/large HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`)),
  ])
  const heads = slow.slice(0, o.scenario.heads)
  const drip = setInterval(() => {
    for (const c of heads) if (!c.closed && c.socket.writable) c.socket.write('a')
  }, 1000)
  // The slow clients hold their slots long enough to be evictable before the valid load starts.
  if (slow.length > 0) await sleep(1500)

  const times: number[] = []
  const failed: string[] = []
  const end = performance.now() + o.seconds * 1000
  await Promise.all(
    Array.from({ length: WORKERS }, async () => {
      while (performance.now() < end) {
        const r = await validRequest(o.proxyPort, `${target}/small`)
        times.push(r.ms)
        if (!r.ok) failed.push(r.why)
      }
    }),
  )
  clearInterval(drip)
  times.sort((a, b) => a - b)
  const at = (q: number) => times[Math.min(times.length - 1, Math.floor(q * times.length))] ?? 0
  const result: RowResult = {
    sent: times.length,
    served: times.length - failed.length,
    failed,
    p50: at(0.5),
    p99: at(0.99),
    slowStillOpen: slow.filter((c) => !c.closed).length,
    slow: slow.length,
  }
  for (const c of slow) c.socket.destroy()
  parentPort?.postMessage(result)
}

function validRequest(proxyPort: number, url: string): Promise<{ ok: boolean; ms: number; why: string }> {
  const start = performance.now()
  return new Promise((resolve) => {
    const done = (ok: boolean, why: string) => resolve({ ok, ms: performance.now() - start, why })
    const req = httpRequest({ host: '127.0.0.1', port: proxyPort, path: url, headers: { connection: 'close' }, agent: false })
    req.setTimeout(30_000, () => req.destroy(new Error('timeout')))
    req.once('error', (err: NodeJS.ErrnoException) => done(false, err.code ?? 'error'))
    req.once('response', (res) => {
      let size = 0
      res.on('data', (d: Buffer) => (size += d.byteLength))
      res.once('end', () => done(res.statusCode === 200 && size === SMALL.byteLength, String(res.statusCode)))
      res.once('error', () => done(false, 'aborted'))
    })
    req.end()
  })
}
