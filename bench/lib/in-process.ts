/**
 * The sides and rows both in-process replay suites share (bench/suites/in-process.ts and in-process-no-als.ts):
 * ours recording and replaying through undici's fetch, SnapshotAgent in playback mode, and a calls/s row against a peer.
 */
import { join } from 'node:path'
import { openSession, type TraceStore } from 'tool-replay'
import { createRecordReplayDispatcher } from 'tool-replay/interceptor'
import { type Dispatcher, SnapshotAgent, fetch as undiciFetch } from 'undici'
import { faster, median, type Side, type SuiteReport } from './harness.ts'
import { type Call, drive, type FetchLike } from './workload.ts'

/** undici's fetch through `dispatcher` (the `dispatcher:` form; `install()` sets the same dispatcher globally). */
export const viaDispatcher =
  (dispatcher: Dispatcher): FetchLike =>
  (url, init) =>
    undiciFetch(url, { ...init, dispatcher })

/** Ours: a strict replay of `trace`, a fresh session per run (each recording used once, checked by assertDone). */
export const replaySide =
  (base: string, calls: readonly Call[], store: TraceStore, trace: string): Side =>
  async () => {
    const session = await openSession({ mode: 'replay', trace, store })
    const ms = await drive(base, calls, viaDispatcher(createRecordReplayDispatcher({ session })))
    session.assertDone()
    await session.close()
    return ms
  }

/**
 * Ours recording: the workload into `trace` through `live`, returning the time including close() (the recording
 * is not done until close() has written it: a store that defers work must not look free).
 */
export async function recordInto(base: string, calls: readonly Call[], live: Dispatcher, store: TraceStore, trace: string): Promise<number> {
  const session = await openSession({ mode: 'record', trace, store })
  const ms = await drive(base, calls, viaDispatcher(createRecordReplayDispatcher({ session, upstream: live })))
  const t0 = performance.now()
  await session.close()
  return ms + (performance.now() - t0)
}

/** SnapshotAgent: a snapshot recorded from the upstream once, then played back (`resetCallCounts` per run). */
export async function snapshotSide(base: string, calls: readonly Call[], dir: string): Promise<{ side: Side; close(): Promise<void> }> {
  const snapshotPath = join(dir, 'snapshot.json')
  const recorder = new SnapshotAgent({ mode: 'record', snapshotPath })
  await drive(base, calls, viaDispatcher(recorder))
  await recorder.saveSnapshots()
  await recorder.close()
  const snapshot = new SnapshotAgent({ mode: 'playback', snapshotPath })
  await snapshot.loadSnapshots()
  return {
    side: () => {
      snapshot.resetCallCounts()
      return drive(base, calls, viaDispatcher(snapshot))
    },
    close: () => snapshot.close(),
  }
}

/** A calls/s row, ours against `peer` (both names of `ms`), with the in-process replay target when asked. */
export function replayRateRow(
  report: SuiteReport,
  ms: Record<string, number[]>,
  callCount: number,
  row: { id: string; name: string; peer: string; target: boolean; condition?: string },
): void {
  const rate = (side: string) => (callCount / median(ms[side] as number[])) * 1000
  report.row({
    id: row.id,
    metric: `in-process strict ${row.name} vs ${row.peer}${row.condition ? `, ${row.condition}` : ''} (calls/s)`,
    ours: rate(row.name),
    unit: 'calls/s',
    peer: { name: row.peer, value: rate(row.peer) },
    ratio: faster(rate(row.name), rate(row.peer)),
    ratioOf: 'peer/ours',
    ratioText: `x ${row.peer}`,
    ...(row.target ? { target: { kind: 'min' as const, value: 1.1, text: '>= 1.1x' } } : {}),
    rounds: { ours: ms[row.name] as number[], peer: ms[row.peer] as number[] },
  })
}
