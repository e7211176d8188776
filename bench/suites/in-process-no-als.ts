/**
 * In-process strict replay against undici's SnapshotAgent in a process where nothing has used
 * AsyncLocalStorage: the in-process suite's comparison, without the msw and nock set-ups beside it.
 *
 * Why a suite of its own: on Node 22, AsyncLocalStorage is built on promise hooks, which its first use turns on
 * for the rest of the process (Node 24 and later use AsyncContextFrame and have none). The in-process suite runs
 * msw and nock, whose set-ups use it, so every promise there costs several times more, and fetch makes about
 * twelve per body chunk it hands over: a replay that keeps the recorded chunks (ours) pays that more often than
 * one that hands each body over whole (SnapshotAgent). That is what an app with OpenTelemetry, msw or nock in its
 * test process sees; this suite shows what an app without them sees. Both figures are reported; neither
 * replaces the other. Sides, workload and rounds are the in-process suite's (bench/lib/in-process.ts).
 *
 *   node --conditions=tool-replay-source bench/suites/in-process-no-als.ts      (BENCH_QUICK=1, BENCH_ROUNDS=N)
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createMemoryStore } from 'tool-replay'
import { openStore } from 'tool-replay/store'
import { Agent } from 'undici'
import { interleave, promiseCostMs, runSuite } from '../lib/harness.ts'
import { recordInto, replayRateRow, replaySide, snapshotSide } from '../lib/in-process.ts'
import { startWorkloadServer, workload } from '../lib/workload.ts'

const CALLS = Number(process.env.BENCH_CALLS ?? 2000)

await runSuite('in-process-no-als', 'In-process replay, no AsyncLocalStorage in the process: 2,000 mixed fetch calls', async (report) => {
  const calls = workload(CALLS)
  const upstream = await startWorkloadServer(calls)
  const dir = await mkdtemp(join(tmpdir(), 'tr-bench-noals-'))
  const memory = createMemoryStore()
  const level = await openStore(join(dir, 'store'))
  const live = new Agent()

  await recordInto(upstream.url, calls, live, memory, 'bench')
  await recordInto(upstream.url, calls, live, level, 'bench')
  const snapshot = await snapshotSide(upstream.url, calls, dir)

  report.setup(
    `the in-process suite's workload and sides, in a process where nothing used AsyncLocalStorage (1M promises take ${promiseCostMs().toFixed(0)} ms here)`,
  )
  const ms = await interleave({
    'replay (memory store)': replaySide(upstream.url, calls, memory, 'bench'),
    'replay (LevelDB store)': replaySide(upstream.url, calls, level, 'bench'),
    SnapshotAgent: snapshot.side,
  })
  const condition = 'no AsyncLocalStorage'
  replayRateRow(report, ms, CALLS, {
    id: 'inproc-noals.replay.memory.vs-snapshot',
    name: 'replay (memory store)',
    peer: 'SnapshotAgent',
    target: true,
    condition,
  })
  replayRateRow(report, ms, CALLS, {
    id: 'inproc-noals.replay.level.vs-snapshot',
    name: 'replay (LevelDB store)',
    peer: 'SnapshotAgent',
    target: true,
    condition,
  })

  await snapshot.close()
  await live.close()
  await level.close()
  await memory.close()
  upstream.close()
  await rm(dir, { recursive: true, force: true })
})
