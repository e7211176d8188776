/**
 * Stream fidelity measured where the app reads: 100 SSE streams of 50 events, recorded and replayed through
 * each capture path, counting the reads the app gets from `for await` over fetch's body (in-process for the
 * interceptor; a separate Node process using fetch through the proxy, NODE_USE_ENV_PROXY). Prints, per path
 * and pace: how many streams were read in exactly their recorded chunks, the time to replay all of them
 * (the cost of `chunks` against `none`), and for `recorded` how many replayed spans (first read to last)
 * are within 10% of the recorded span (first chunk to last).
 *
 *   npm run bench:streams      (STREAMS=20 for a quicker run)
 */
import { execFile } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { createServer as createHttpsServer } from 'node:https'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Agent, fetch as undiciFetch } from 'undici'
import type { PaceOption } from '../capture/index.ts'
import { openSession } from '../engine/index.ts'
import { createRecordReplayDispatcher } from '../interceptor/index.ts'
import { loadCertificateAuthority, proxyEnvironment, startProxy, writeCaBundle } from '../proxy/index.ts'
import { createMemoryStore, type TraceStore } from '../store/index.ts'

const STREAMS = Number(process.env.STREAMS ?? 100)
const EVENTS = 50
const GAP_MS = 2
const CONCURRENCY = 10
const PACES: PaceOption[] = ['chunks', 'none', 'recorded']

interface StreamRead {
  reads: number
  spanMs: number
}

async function inBatches<T>(n: number, fn: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = new Array(n)
  for (let i = 0; i < n; i += CONCURRENCY) {
    await Promise.all(Array.from({ length: Math.min(CONCURRENCY, n - i) }, async (_, k) => (out[i + k] = await fn(i + k))))
  }
  return out
}

/** What the app reads of one response: reads, and the span from its first read to its last. */
async function readStream(res: Response | Awaited<ReturnType<typeof undiciFetch>>): Promise<StreamRead> {
  let reads = 0
  let first = 0
  let last = 0
  for await (const _ of res.body as unknown as AsyncIterable<Uint8Array>) {
    last = performance.now()
    if (reads++ === 0) first = last
  }
  return { reads, spanMs: last - first }
}

/** The recorded chunk count and span (first chunk to last) of each exchange, by URL. */
async function recordedShape(store: TraceStore, trace: string): Promise<Map<string, { chunks: number; spanMs: number }>> {
  const out = new Map<string, { chunks: number; spanMs: number }>()
  for (const x of (await store.readTrace(trace)).exchanges) {
    if (x.outcome.kind !== 'response') throw new Error(`bench: ${x.request.url} failed while recording`)
    const chunks = x.outcome.response.body.chunks
    out.set(x.request.url, { chunks: chunks.length, spanMs: (chunks.at(-1)?.atMs ?? 0) - (chunks[0]?.atMs ?? 0) })
  }
  return out
}

interface Row {
  path: string
  pace: string
  exact: number
  meanReads: number
  ms: number
  withinSpan?: number
}

function summarize(path: string, pace: string, urls: string[], reads: StreamRead[], shape: Map<string, { chunks: number; spanMs: number }>, ms: number): Row {
  let exact = 0
  let within = 0
  reads.forEach((r, i) => {
    const s = shape.get(urls[i] as string)
    if (s && r.reads === s.chunks) exact++
    if (s && Math.abs(r.spanMs - s.spanMs) <= s.spanMs * 0.1) within++
  })
  const row: Row = { path, pace, exact, meanReads: reads.reduce((n, r) => n + r.reads, 0) / reads.length, ms }
  if (pace === 'recorded') row.withinSpan = within
  return row
}

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'tr-bench-streams-'))
  const pki = await loadCertificateAuthority(join(dir, 'upstream-ca'))
  const leaf = await pki.issueLeaf('sse.test')
  const server = createHttpsServer({ cert: leaf.cert, key: leaf.key }, (req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    let i = 0
    const next = () => {
      res.write(`data: {"n":${i},"path":"${req.url}","text":"event ${i} of ${EVENTS}"}\n\n`)
      if (++i < EVENTS) setTimeout(next, GAP_MS)
      else res.end()
    }
    next()
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const port = (server.address() as { port: number }).port
  const urls = Array.from({ length: STREAMS }, (_, i) => `https://sse.test/stream/${i}`)
  const resolve = { 'sse.test': { host: '127.0.0.1', port } }
  const rows: Row[] = []
  process.stderr.write(`stream fidelity bench: ${STREAMS} streams x ${EVENTS} events, ${CONCURRENCY} at a time, Node ${process.version}\n`)

  // ---- interceptor: in-process fetch ----
  const store = createMemoryStore()
  const upstream = new Agent({ connect: { ca: pki.certPem, lookup: (_h, _o, cb) => cb(null, [{ address: '127.0.0.1', family: 4 }]) } })
  const mapped = upstream.compose((dispatch) => (opts, handler) => dispatch({ ...opts, origin: `https://sse.test:${port}` }, handler))
  const rec = await openSession({ mode: 'record', trace: 'in-process', store })
  const recDispatcher = createRecordReplayDispatcher({ session: rec, upstream: mapped })
  await inBatches(STREAMS, async (i) => readStream(await undiciFetch(urls[i] as string, { dispatcher: recDispatcher })))
  await rec.close()
  const inProcessShape = await recordedShape(store, 'in-process')
  for (const pace of PACES) {
    const session = await openSession({ mode: 'replay', trace: 'in-process', store })
    const dispatcher = createRecordReplayDispatcher({ session, pace })
    const t0 = performance.now()
    const reads = await inBatches(STREAMS, async (i) => readStream(await undiciFetch(urls[i] as string, { dispatcher })))
    rows.push(summarize('interceptor', String(pace), urls, reads, inProcessShape, performance.now() - t0))
    session.assertDone()
    await session.close()
  }
  await upstream.close()

  // ---- proxy: a separate Node process reading with fetch through HTTPS_PROXY ----
  const client = join(dir, 'client.mjs')
  writeFileSync(
    client,
    `const urls = JSON.parse(process.argv[2]); const out = new Array(urls.length)
for (let i = 0; i < urls.length; i += ${CONCURRENCY}) await Promise.all(urls.slice(i, i + ${CONCURRENCY}).map(async (u, k) => {
  const res = await fetch(u); let reads = 0, first = 0, last = 0
  for await (const _ of res.body) { last = performance.now(); if (reads++ === 0) first = last }
  out[i + k] = { reads, spanMs: last - first }
}))
console.log(JSON.stringify(out))\n`,
  )
  const storeDir = join(dir, 'store')
  const ca = await loadCertificateAuthority(storeDir)
  const bundle = await writeCaBundle(storeDir, ca)
  const viaProxy = async (mode: 'record' | 'replay', pace?: PaceOption): Promise<{ reads: StreamRead[]; ms: number }> => {
    const session = await openSession({ mode, trace: 'proxy', store })
    const proxy = await startProxy({ session, ca, upstream: { ca: pki.certPem, resolve }, ...(pace !== undefined ? { pace } : {}) })
    const env = { ...process.env, ...proxyEnvironment({ proxyUrl: proxy.url, caPath: ca.certPath, bundlePath: bundle }) }
    const t0 = performance.now()
    const stdout = await new Promise<string>((resolveRun, reject) =>
      execFile(process.execPath, [client, JSON.stringify(urls)], { env, timeout: 300_000, maxBuffer: 64 * 1024 * 1024 }, (err, out, errOut) =>
        err ? reject(new Error(`bench: proxy ${mode} client failed: ${errOut}`)) : resolveRun(out),
      ),
    )
    const ms = performance.now() - t0
    const summary = await proxy.close()
    if (!summary.ok) throw new Error(`bench: proxy ${mode} run was not clean: ${JSON.stringify(summary)}`)
    return { reads: JSON.parse(stdout) as StreamRead[], ms }
  }
  await viaProxy('record')
  const proxyShape = await recordedShape(store, 'proxy')
  for (const pace of PACES) {
    const { reads, ms } = await viaProxy('replay', pace)
    rows.push(summarize('proxy (Node fetch, child process)', String(pace), urls, reads, proxyShape, ms))
  }
  server.close()
  await store.close()
  await rm(dir, { recursive: true, force: true })

  const none = (path: string) => rows.find((r) => r.path === path && r.pace === 'none')?.ms ?? Number.NaN
  const lines = [
    '',
    `Stream fidelity: ${STREAMS} SSE streams x ${EVENTS} events (${GAP_MS} ms apart live), reads counted by the app (for await over fetch's body)`,
    '',
    `${'path'.padEnd(36)}${'pace'.padEnd(10)}${'reads = recorded chunks'.padEnd(26)}${'mean reads'.padStart(11)}${'time, all'.padStart(12)}${'vs none'.padStart(9)}   recorded span ±10%`,
    ...rows.map(
      (r) =>
        `${r.path.padEnd(36)}${r.pace.padEnd(10)}${`${r.exact}/${STREAMS}`.padEnd(26)}${r.meanReads.toFixed(1).padStart(11)}${`${r.ms.toFixed(0)} ms`.padStart(12)}${`${(r.ms / none(r.path)).toFixed(2)}x`.padStart(9)}   ${r.withinSpan === undefined ? '' : `${r.withinSpan}/${STREAMS}`}`,
    ),
    '',
  ]
  process.stdout.write(lines.join('\n'))
}

await main()
