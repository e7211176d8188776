/**
 * The replay verdict of a run of the app against a trace (`tr-proxy replay --record-as`, a rerun from the
 * page), read from what the run recorded: the requests strict replay refused are kept as TR_* failures,
 * the live tail's exchanges are marked `origin: live`, and every other exchange is a recording it replayed,
 * so the recordings it never used are the trace's exchanges less the replayed ones. The app's exit code says
 * what the app made of its run; this says whether the run was the recording: only a complete strict replay
 * can be promoted to a test.
 */
import type { TraceInfo, TraceReader, TraceStore } from '../store/index.ts'
import type { Exchange } from '../trace/index.ts'

/** How a run against a trace went. */
export interface ReplayVerdict {
  /** The trace the run replayed. */
  against: string
  /** complete: every request replayed, every recording used; incomplete: misses or unused; live: a live tail. */
  state: 'complete' | 'incomplete' | 'live'
  replayed: number
  /** Requests strict replay refused (no recording matched, or more than recorded). */
  misses: number
  firstMiss?: number
  /** Recordings never requested; absent when it cannot be known (the trace is gone, or was replaced after the run). */
  unused?: number
  /** Exchanges forwarded live by a live tail. */
  live: number
  firstLive?: number
  /** One line for the page: "strict replay complete", "strict replay: 1 miss (#2)", "live tail from #2". */
  summary: string
}

/** What the verdict counts, exchange by exchange. */
export interface VerdictTally {
  replayed: number
  misses: number
  firstMiss?: number
  live: number
  firstLive?: number
}

/** An empty tally. */
export const newTally = (): VerdictTally => ({ replayed: 0, misses: 0, live: 0 })

/** Counts one exchange of a run. */
export function tally(t: VerdictTally, x: Exchange): void {
  if (x.origin === 'live') {
    t.live++
    t.firstLive ??= x.seq
  } else if (x.outcome.kind === 'error' && x.outcome.error.code.startsWith('TR_')) {
    // A refusal strict replay kept in the run (TR_REPLAY_MISS, TR_REPLAY_EXHAUSTED, ...): never answered by anything.
    t.misses++
    t.firstMiss ??= x.seq
  } else t.replayed++
}

/** The verdict of a run read whole (for the actions; the statistics tally as they read). */
export async function verdictOf(store: TraceStore, reader: TraceReader): Promise<ReplayVerdict | undefined> {
  if (reader.info.meta.labels?.observedAgainst === undefined) return undefined
  const t = newTally()
  for await (const x of reader.exchanges()) tally(t, x)
  return replayVerdict(store, reader.info, t)
}

/** The verdict of a run, or undefined when it is not a run against a trace. */
export async function replayVerdict(store: TraceStore, run: TraceInfo, t: VerdictTally): Promise<ReplayVerdict | undefined> {
  const against = run.meta.labels?.observedAgainst
  if (against === undefined) return undefined
  const v: ReplayVerdict = { against, state: 'complete', replayed: t.replayed, misses: t.misses, live: t.live, summary: '' }
  if (t.firstMiss !== undefined) v.firstMiss = t.firstMiss
  if (t.firstLive !== undefined) v.firstLive = t.firstLive
  // A live tail's unreached recordings are where the run went another way: not unused (as the session reports it).
  if (t.live === 0) {
    const source = await store.openTrace(against).catch(() => undefined)
    if (source && source.info.createdAt <= run.createdAt) v.unused = Math.max(0, source.info.count - t.replayed)
  }
  v.state = t.live > 0 ? 'live' : t.misses > 0 || v.unused !== 0 ? 'incomplete' : 'complete'
  v.summary = summarize(v)
  return v
}

function summarize(v: ReplayVerdict): string {
  if (v.state === 'live') return `live tail from #${v.firstLive}: ${v.live} exchange${v.live === 1 ? '' : 's'} went to the real services`
  const parts: string[] = []
  if (v.misses > 0) parts.push(`${v.misses} miss${v.misses === 1 ? '' : 'es'} (first #${v.firstMiss})`)
  if (v.unused === undefined) parts.push(`unused unknown ("${v.against}" is gone or newer than the run)`)
  else if (v.unused > 0) parts.push(`${v.unused} unused`)
  if (parts.length === 0) return 'strict replay complete'
  return `strict replay ${v.misses > 0 || (v.unused ?? 0) > 0 ? 'incomplete' : 'not known complete'}: ${parts.join(', ')}`
}
