/**
 * Recording through the proxy against the same traffic not recorded: the 2,000 mixed calls in sequence from a
 * client in another process (bench/clients/sequential.ts, undici `fetch` through the proxy as HTTP_PROXY
 * clients send: absolute-form), interleaved in rounds.
 *
 * Sides: `record` (a fresh trace each round, LevelDB store as `tr-proxy record` uses, and the memory store;
 * the LevelDB one also with `--durability fsync`, whose ratio to the default is the cost of syncing each answer),
 * `passthrough` (the same proxy forwarding without recording: the live baseline of this path, so the ratio is
 * the cost of recording alone), and direct live (no proxy, for reference). Each proxy side's time includes
 * closing the proxy, which waits for the recording to be written.
 *
 *   node --conditions=tool-replay-source bench/suites/proxy-record.ts
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createMemoryStore, type Mode, openSession, type SessionOptions, type TraceStore } from 'tool-replay'
import { loadCertificateAuthority, startProxy } from 'tool-replay/proxy'
import { openStore } from 'tool-replay/store'
import { interleave, PROFILE, runSuite, type Side, timeRow } from '../lib/harness.ts'
import { profiled, summarizeProfile } from '../lib/profile.ts'
import { runChild } from '../lib/servers.ts'
import { startWorkloadServer, workload } from '../lib/workload.ts'

const CALLS = Number(process.env.BENCH_CALLS ?? 2000)

await runSuite('proxy-record', `Record vs live through the proxy: ${CALLS} mixed calls`, async (report) => {
  const upstream = await startWorkloadServer(workload(CALLS))
  const dir = await mkdtemp(join(tmpdir(), 'tr-bench-proxy-rec-'))
  const ca = await loadCertificateAuthority(join(dir, 'store'))
  const level = await openStore(join(dir, 'store'))
  const memory = createMemoryStore()
  report.setup(`${CALLS} sequential calls (the in-process workload), client: undici fetch in a child process via the proxy (absolute-form)`)

  const client = (proxy?: string) =>
    runChild<{ ms: number }>('clients/sequential.ts', [JSON.stringify({ base: upstream.url, calls: CALLS, ...(proxy ? { proxy } : {}) })])
  let traceNo = 0
  const viaProxy = (mode: Mode, store: TraceStore, durability?: SessionOptions['durability']) => async () => {
    const session = await openSession({ mode, trace: `proxy-rec-${++traceNo}`, store, ...(durability ? { durability } : {}) })
    const proxy = await startProxy({ session, ca })
    const { ms } = await client(proxy.url)
    const t0 = performance.now()
    const summary = await proxy.close()
    if (!summary.ok) throw new Error(`bench: proxy ${mode} run was not clean`)
    return ms + (performance.now() - t0)
  }
  const oursSides: Record<string, Side> = {
    'record (LevelDB store)': viaProxy('record', level),
    'record (memory store)': viaProxy('record', memory),
    'record (LevelDB store, durability fsync)': viaProxy('record', level, 'fsync'),
  }
  const ms = await interleave({
    ...oursSides,
    passthrough: viaProxy('passthrough', memory),
    'live, no proxy': async () => (await client()).ms,
  })
  for (const [id, name] of [
    ['proxy.record.level.vs-passthrough', 'record (LevelDB store)'],
    ['proxy.record.memory.vs-passthrough', 'record (memory store)'],
  ] as const) {
    timeRow(
      report,
      ms,
      { id, metric: `proxy ${name} vs the same proxy passing through (time)`, ours: name, peer: 'passthrough', ratioText: 'x passthrough time' },
      { target: { kind: 'max', value: 1.1, text: '<= 1.10x' } },
    )
  }
  timeRow(report, ms, {
    id: 'proxy.record.fsync.vs-write',
    metric: 'proxy record (LevelDB store) with --durability fsync vs the default (time: the cost of a synced group commit per answer)',
    ours: 'record (LevelDB store, durability fsync)',
    peer: 'record (LevelDB store)',
    peerName: 'durability write',
    ratioText: 'x default durability time',
  })
  timeRow(report, ms, {
    id: 'proxy.record.level.vs-direct',
    metric: 'proxy record (LevelDB store) vs live without the proxy (time)',
    ours: 'record (LevelDB store)',
    peer: 'live, no proxy',
    peerName: 'direct',
    ratioText: 'x direct time',
  })
  if (PROFILE) {
    const { file } = await profiled('proxy record (LevelDB store)', oursSides['record (LevelDB store)'] as Side)
    report.profile(summarizeProfile('proxy record, LevelDB store (the proxy process; client in a child)', file))
  }
  await level.close()
  await memory.close()
  upstream.close()
  await rm(dir, { recursive: true, force: true })
})
