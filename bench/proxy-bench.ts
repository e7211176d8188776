/**
 * Proxy benchmark: strict replay through the proxy vs a bare node:http(s) server answering the same
 * 1 KB, 50 connections, about 5 s per row; plus the time a new host's MITM handshake costs.
 *
 *   node --conditions=tool-replay-source bench/proxy-bench.ts          (BENCH_SECONDS=2 BENCH_ROUNDS=1 for a quicker run)
 *
 * Strict occurrence accounting: replay never repeats a recording, so each row first measures the bare
 * server for BENCH_SECONDS, then replays a bench-only trace holding exactly that many recordings of the
 * GET (plus the warm-up's), and drives exactly that many requests through the proxy (autocannon `amount`),
 * after the same warm-up the bare server had. Each row is the median of BENCH_ROUNDS such pairs. The session summary
 * must come out ok (every recording used once, no miss, no overrun): the accounting is checked under load.
 *
 * HTTP rows use autocannon's programmatic API in a child process (so the measured server has this
 * process to itself), sending absolute-form requests to the proxy. autocannon cannot CONNECT, so the HTTPS rows drive undici
 * from a worker instead, for both sides: bare = undici Agent to a node:https server; proxy = undici
 * ProxyAgent (CONNECT + TLS to the proxy's leaf). Both keep 50 TLS connections alive, so they compare.
 */
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer as createHttpServer, type Server } from 'node:http'
import { createServer as createHttpsServer } from 'node:https'
import { type AddressInfo, connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { connect as tlsConnect } from 'node:tls'
import { fileURLToPath } from 'node:url'
import { Worker } from 'node:worker_threads'
import autocannon from 'autocannon'
import { openSession } from '../engine/index.ts'
import { loadCertificateAuthority, startProxy } from '../proxy/index.ts'
import { createMemoryStore } from '../store/index.ts'
import { bodyFromBytes, type Exchange, TRACE_FORMAT_VERSION } from '../trace/index.ts'

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5)
/** Bare/proxy pairs per row, run one after the other; the row reports the median pair's ratio. */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
const CONNECTIONS = 50
const BODY = Buffer.alloc(1024, 'x')
const HEADERS: Array<[string, string]> = [
  ['content-type', 'application/octet-stream'],
  ['content-length', String(BODY.byteLength)],
]
const NEW_HOSTS = 30
/** Requests sent before each measured side, to the bare server and to the proxy alike. */
const WARM_UP = 2000
const AUTOCANNON_FLAG = '--autocannon-child'

interface Row {
  name: string
  bare: number
  proxy: number
  target: number
  note: string
}

/**
 * Runs `pair` (one bare measurement, then the proxy on the same amount) ROUNDS times and keeps the pair
 * with the median ratio: the machine's load drifts over seconds, and a bare and a proxy side measured
 * back to back see the same load far more often than two sides measured once each.
 */
async function medianPair(pair: () => Promise<Row>): Promise<Row> {
  const rows: Row[] = []
  for (let i = 0; i < ROUNDS; i++) rows.push(await pair())
  rows.sort((a, b) => a.proxy / a.bare - b.proxy / b.bare)
  const mid = rows[Math.floor(rows.length / 2)] as Row
  const ratios = rows.map((r) => `${((r.proxy / r.bare) * 100).toFixed(0)}%`).join(' / ')
  return { ...mid, note: `${mid.note}; ratios of ${ROUNDS} rounds: ${ratios}` }
}

/** A bench-only trace: `n` recordings of GET `url`, all sharing one 1 KB body. */
function benchTrace(name: string, url: string, n: number) {
  const body = bodyFromBytes(BODY)
  const exchanges: Exchange[] = []
  for (let i = 0; i < n; i++) {
    exchanges.push({
      seq: i,
      request: { method: 'GET', url, headers: [], body: null },
      outcome: { kind: 'response', response: { status: 200, statusText: 'OK', headers: HEADERS, body: body.ref, trailers: [] } },
      timing: { startMs: 0, headersMs: 0 },
    })
  }
  return { meta: { name, format: TRACE_FORMAT_VERSION }, exchanges, bodies: new Map([[body.ref.digest, body.bytes]]) }
}

async function listen(server: Server): Promise<number> {
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  return (server.address() as AddressInfo).port
}

function bareHandler(_req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse): void {
  res.writeHead(200, HEADERS)
  res.end(BODY)
}

interface Load {
  total: number
  rps: number
  errors: number
}

/** autocannon (programmatic API) in a child process, so the measured server has this process to itself. */
async function cannon(opts: { url: string; path: string; amount?: number; host?: string }): Promise<Load> {
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url), AUTOCANNON_FLAG, JSON.stringify(opts)], { stdio: ['ignore', 'pipe', 'inherit'] })
  let out = ''
  child.stdout.on('data', (c: Buffer) => (out += c))
  await once(child, 'exit')
  return JSON.parse(out) as Load
}

async function autocannonChild(opts: { url: string; path: string; amount?: number; host?: string }): Promise<Load> {
  const result = await autocannon({
    url: opts.url,
    connections: CONNECTIONS,
    ...(opts.amount ? { amount: opts.amount } : { duration: SECONDS }),
    // `requests` keeps an absolute-form path verbatim in the request line; the top-level `path` option does not.
    requests: [{ method: 'GET', path: opts.path, ...(opts.host ? { headers: { host: opts.host } } : {}) }],
  })
  const total = result['2xx']
  return { total, rps: total / result.duration, errors: result.errors + result.non2xx + result.timeouts }
}

// The HTTPS load generator, run in a worker: 50 concurrent keep-alive loops until `amount` or `seconds`.
const HTTPS_WORKER = `
const { workerData, parentPort } = require('node:worker_threads')
const { Agent, ProxyAgent, request } = require(workerData.undici)
;(async () => {
  const d = workerData.proxy
    ? new ProxyAgent({ uri: workerData.proxy, requestTls: { ca: workerData.ca }, connections: workerData.connections })
    : new Agent({ connect: { ca: workerData.ca }, connections: workerData.connections })
  let done = 0, started = 0, errors = 0
  const t0 = performance.now()
  const deadline = t0 + workerData.seconds * 1000
  const more = () => workerData.amount ? started < workerData.amount : performance.now() < deadline
  await Promise.all(Array.from({ length: workerData.connections }, async () => {
    while (more()) {
      started++
      try {
        const r = await request(workerData.url, { dispatcher: d })
        await r.body.arrayBuffer()
        if (r.statusCode === 200) done++; else errors++
      } catch { errors++ }
    }
  }))
  const secs = (performance.now() - t0) / 1000
  await d.close()
  parentPort.postMessage({ total: done, rps: done / secs, errors })
})()
`

function httpsLoad(opts: { url: string; ca: string; proxy?: string; amount?: number }): Promise<Load> {
  const worker = new Worker(HTTPS_WORKER, {
    eval: true,
    workerData: {
      ...opts,
      seconds: SECONDS,
      connections: CONNECTIONS,
      undici: fileURLToPath(import.meta.resolve('undici')),
    },
  })
  return once(worker, 'message').then(([m]) => m as Load)
}

async function replayProxy(storeDir: string, trace: ReturnType<typeof benchTrace>) {
  const store = createMemoryStore()
  await store.putTrace(trace)
  const session = await openSession({ mode: 'replay', trace: trace.meta.name, store })
  const ca = await loadCertificateAuthority(storeDir)
  return startProxy({ session, ca })
}

async function httpRow(storeDir: string): Promise<Row> {
  const bare = createHttpServer(bareHandler)
  const port = await listen(bare)
  await cannon({ url: `http://127.0.0.1:${port}`, path: '/kb', amount: WARM_UP }) // warm-up
  const b = await cannon({ url: `http://127.0.0.1:${port}`, path: '/kb' })
  bare.close()
  bare.closeAllConnections()
  // The proxy gets the same warm-up as the bare server, so the trace holds that many recordings more.
  const proxy = await replayProxy(storeDir, benchTrace('bench-http', 'http://bench.test/kb', WARM_UP + b.total))
  // Absolute-form request line, as HTTP_PROXY clients send it.
  await cannon({ url: proxy.url, path: 'http://bench.test/kb', host: 'bench.test', amount: WARM_UP })
  const p = await cannon({ url: proxy.url, path: 'http://bench.test/kb', host: 'bench.test', amount: b.total })
  const summary = await proxy.close()
  return {
    name: 'HTTP GET 1 KB (absolute-form)',
    bare: b.rps,
    proxy: p.rps,
    target: 0.8,
    note: `${WARM_UP} warm-up + ${p.total} measured replayed / ${WARM_UP + b.total} recorded, errors ${p.errors}, summary ${summary.ok ? 'ok' : `NOT ok (${summary.misses.length} miss, ${summary.exhausted.length} over, ${summary.unused.length} unused)`}`,
  }
}

async function httpsRow(storeDir: string): Promise<Row> {
  const pkiDir = mkdtempSync(join(tmpdir(), 'tr-bench-pki-'))
  const testCa = await loadCertificateAuthority(pkiDir)
  const leaf = await testCa.issueLeaf('127.0.0.1')
  rmSync(pkiDir, { recursive: true, force: true })
  const bare = createHttpsServer({ cert: leaf.cert, key: leaf.key }, bareHandler)
  const port = await listen(bare)
  await httpsLoad({ url: `https://127.0.0.1:${port}/kb`, ca: testCa.certPem, amount: WARM_UP })
  const b = await httpsLoad({ url: `https://127.0.0.1:${port}/kb`, ca: testCa.certPem })
  bare.close()
  bare.closeAllConnections()
  const proxy = await replayProxy(storeDir, benchTrace('bench-https', 'https://bench.test/kb', WARM_UP + b.total))
  await httpsLoad({ url: 'https://bench.test/kb', ca: proxy.ca.certPem, proxy: proxy.url, amount: WARM_UP })
  const p = await httpsLoad({ url: 'https://bench.test/kb', ca: proxy.ca.certPem, proxy: proxy.url, amount: b.total })
  const summary = await proxy.close()
  return {
    name: 'HTTPS GET 1 KB (CONNECT + MITM)',
    bare: b.rps,
    proxy: p.rps,
    target: 0.5,
    note: `${WARM_UP} warm-up + ${p.total} measured replayed / ${WARM_UP + b.total} recorded, errors ${p.errors}, summary ${summary.ok ? 'ok' : 'NOT ok'}; undici both sides`,
  }
}

/** ms from sending CONNECT to a finished TLS handshake, for `host`. */
async function handshakeMs(proxyPort: number, host: string, ca: string): Promise<number> {
  const t0 = performance.now()
  const socket = connect(proxyPort, '127.0.0.1')
  await once(socket, 'connect')
  socket.write(`CONNECT ${host}:443 HTTP/1.1\r\nHost: ${host}:443\r\n\r\n`)
  await once(socket, 'data')
  const tls = tlsConnect({ socket, servername: host, ca })
  await once(tls, 'secureConnect')
  const ms = performance.now() - t0
  tls.destroy()
  return ms
}

async function handshakeRow(storeDir: string): Promise<{ newHost: number; cached: number; leaves: number }> {
  const store = createMemoryStore()
  await store.putTrace(benchTrace('bench-hosts', 'https://bench.test/kb', 1))
  const session = await openSession({ mode: 'replay', trace: 'bench-hosts', store })
  const ca = await loadCertificateAuthority(storeDir)
  const proxy = await startProxy({ session, ca })
  await handshakeMs(proxy.port, 'warmup.bench.test', ca.certPem)
  const fresh: number[] = []
  const cached: number[] = []
  for (let i = 0; i < NEW_HOSTS; i++) {
    fresh.push(await handshakeMs(proxy.port, `h${i}.bench.test`, ca.certPem))
    cached.push(await handshakeMs(proxy.port, `h${i}.bench.test`, ca.certPem))
  }
  await proxy.close()
  return { newHost: median(fresh), cached: median(cached), leaves: ca.leafCount }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)] as number
}

/** Runs every row and returns the printed table. */
export async function runProxyBench(): Promise<string> {
  const storeDir = mkdtempSync(join(tmpdir(), 'tr-proxy-bench-'))
  const rows = [await medianPair(() => httpRow(storeDir)), await medianPair(() => httpsRow(storeDir))]
  const hs = await handshakeRow(storeDir)
  rmSync(storeDir, { recursive: true, force: true })
  const lines = [
    `tr-proxy benchmark: ${CONNECTIONS} connections, ~${SECONDS} s per side, median of ${ROUNDS} back-to-back bare/proxy rounds, Node ${process.version}, strict replay`,
    '',
    'row                               bare req/s   proxy req/s   ratio   target  result',
  ]
  for (const r of rows) {
    const ratio = r.proxy / r.bare
    lines.push(
      `${r.name.padEnd(34)}${r.bare.toFixed(0).padStart(10)}   ${r.proxy.toFixed(0).padStart(11)}   ${(ratio * 100).toFixed(0).padStart(4)}%   >=${(r.target * 100).toFixed(0)}%   ${ratio >= r.target ? 'PASS' : 'FAIL'}`,
    )
    lines.push(`    ${r.note}`)
  }
  lines.push(
    `new-host MITM handshake (CONNECT + TLS, median of ${NEW_HOSTS}): ${hs.newHost.toFixed(1)} ms; same host again: ${hs.cached.toFixed(1)} ms; leaf cost ~${(hs.newHost - hs.cached).toFixed(1)} ms; target new host <= 10 ms: ${hs.newHost <= 10 ? 'PASS' : 'FAIL'}`,
  )
  const table = lines.join('\n')
  console.log(table)
  return table
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (process.argv[2] === AUTOCANNON_FLAG) process.stdout.write(JSON.stringify(await autocannonChild(JSON.parse(process.argv[3] as string))))
  else await runProxyBench()
}
