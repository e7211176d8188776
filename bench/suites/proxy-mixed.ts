/**
 * A realistic mixed load replayed through the proxy (issue 33): 10,000 requests over 50 keep-alive connections
 * (bench/lib/mixed.ts: answers 100 B to 256 KiB, JSON/text/binary, 30% chunked; 30% POSTs up to 64 KiB; 10%
 * repeats), from a client in another process (bench/clients/mixed.ts, undici through the proxy as HTTP_PROXY
 * clients send), every answer's bytes checked. The trace is recorded once through the proxy into a LevelDB
 * store, as `tr-proxy record` does; its bodies (~330 MB) are more than replay holds in memory.
 *
 * Sides, interleaved: strict replay as `tr-proxy replay --strict` runs it (default preload: the exchanges and
 * small bodies held, big bodies read from the store as played); the same with `preload: 'none'` (every request
 * looked up and read through the store); and live (the client against the upstream itself). A replay side fails
 * the run if the upstream sees a connection, an answer is wrong or lost, or the replay is not clean.
 *
 *   node --conditions=tool-replay-source bench/suites/proxy-mixed.ts      (BENCH_REQUESTS=N, BENCH_ROUNDS=N)
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type Mode, openSession, type SessionOptions } from 'tool-replay'
import { loadCertificateAuthority, startProxy } from 'tool-replay/proxy'
import { openStore } from 'tool-replay/store'
import { interleave, pick, runSuite, timeRow } from '../lib/harness.ts'
import { startMixedServer } from '../lib/mixed.ts'
import { assertCleanReplay, runChild } from '../lib/servers.ts'

const REQUESTS = Number(process.env.BENCH_REQUESTS ?? pick(5000, 10_000))

interface Run {
  ms: number
  wrong: number
  lost: number
}

await runSuite('proxy-mixed', `Proxy replay of a mixed load: ${REQUESTS} requests over 50 connections`, async (report) => {
  const upstream = await startMixedServer()
  const dir = await mkdtemp(join(tmpdir(), 'tr-bench-proxy-mixed-'))
  const ca = await loadCertificateAuthority(join(dir, 'store'))
  const store = await openStore(join(dir, 'store'))
  report.setup(`${REQUESTS} requests, 50 keep-alive connections, answers 100 B-256 KiB (30% chunked), 30% POSTs up to 64 KiB, 10% repeats`)
  report.setup('client: undici in a child process via the proxy (absolute-form); LevelDB store; every answer checked byte for byte')

  const client = async (proxy?: string): Promise<Run> => {
    const r = await runChild<Run>('clients/mixed.ts', [JSON.stringify({ base: upstream.url, requests: REQUESTS, ...(proxy ? { proxy } : {}) })])
    if (r.wrong + r.lost > 0) throw new Error(`bench: ${r.wrong} wrong and ${r.lost} lost answers ${proxy ? 'through the proxy' : 'live'}`)
    return r
  }
  const viaProxy = async (mode: Mode, preload?: SessionOptions['preload']): Promise<number> => {
    const session = await openSession({ mode, trace: 'mixed', store, ...(preload ? { preload } : {}) })
    const proxy = await startProxy({ session, ca })
    const before = upstream.connections()
    const { ms } = await client(proxy.url)
    const t0 = performance.now()
    const summary = await proxy.close()
    if (mode === 'replay') {
      assertCleanReplay(summary, 'the mixed load')
      if (upstream.connections() !== before) throw new Error('bench: the upstream was reached during a strict replay')
    }
    return ms + (performance.now() - t0)
  }
  await viaProxy('record')

  const ms = await interleave({
    'strict replay': () => viaProxy('replay'),
    "strict replay, preload 'none'": () => viaProxy('replay', 'none'),
    live: async () => (await client()).ms,
  })
  timeRow(report, ms, {
    id: 'proxy.mixed.replay.vs-live',
    metric: 'proxy strict replay of the mixed load (LevelDB store) vs live (time)',
    ours: 'strict replay',
    peer: 'live',
    ratioText: 'x live time',
  })
  timeRow(report, ms, {
    id: 'proxy.mixed.replay.vs-store-reads',
    metric: "proxy strict replay of the mixed load vs the same read through the store per request (preload 'none') (time)",
    ours: 'strict replay',
    peer: "strict replay, preload 'none'",
    peerName: "preload 'none'",
    ratioText: "x preload 'none' time",
  })
  await store.close()
  upstream.close()
  await rm(dir, { recursive: true, force: true })
})
