import { type ErrorCode, ErrorCodes, type HeaderPairs, headerValue, type ToolReplayError } from '../trace/index.ts'
import type { UnusedRecording } from './replay-index.ts'

/** One strictness violation seen during a session. Kept even when the app swallowed the error. */
export interface LedgerEntry {
  /** Usually TR_REPLAY_MISS / _EXHAUSTED / _UNUSED; also what a request the engine could not read failed with. */
  code: ErrorCode
  /** "GET https://api.test/users/1" (#n for the occurrence when relevant). */
  request: string
  message: string
  /**
   * Requests folded into this entry: an SDK's retries of one refused request count once, with their
   * number here (see RetryFolding). Absent means 1.
   */
  attempts?: number
}

/** What a session saw, reported when it ends. */
export interface SessionSummary {
  trace: string
  mode: string
  /** Exchanges served from the recording. */
  replayed: number
  /** Exchanges forwarded live and written to the store. */
  recorded: number
  /** Exchanges forwarded live and not written (passthrough). */
  passedThrough: number
  misses: LedgerEntry[]
  exhausted: LedgerEntry[]
  unused: LedgerEntry[]
  /**
   * Replay with a live tail: the requests that went to the real upstream (the first is the one nothing
   * matched). Not failures, and not offline: the run completed, partly live.
   */
  live: LedgerEntry[]
  /** Update mode: recordings the run did not request, left out of the new trace. */
  dropped: LedgerEntry[]
  /** Update mode with keepUnused: recordings the run did not request, kept in the new trace after the others. */
  kept: LedgerEntry[]
  /** True when strict replay saw no miss, no overrun and no unused recording (a live tail is not a failure). */
  ok: boolean
}

/** Formats a summary for humans: one line per problem, bounded. */
export function formatSummary(s: SessionSummary, max = 20): string {
  const extra = [
    s.live.length > 0 ? `${s.live.length} went LIVE (not offline)` : '',
    s.dropped.length > 0 ? `${s.dropped.length} dropped (not requested; keepUnused / --keep-unused keeps them)` : '',
    s.kept.length > 0 ? `${s.kept.length} kept unrequested` : '',
  ].filter(Boolean)
  const lines = [
    `Tool Replay ${s.mode} of trace "${s.trace}": ${s.replayed} replayed, ${s.recorded} recorded, ${s.passedThrough} passed through; ${s.misses.length} unmatched, ${s.exhausted.length} over the recorded count, ${s.unused.length} unused${extra.length > 0 ? `; ${extra.join('; ')}` : ''}.`,
  ]
  const problems = [...s.misses, ...s.exhausted, ...s.unused]
  for (const p of problems.slice(0, max)) lines.push(`  ${p.code} ${p.request}${(p.attempts ?? 1) > 1 ? ` (${p.attempts} attempts)` : ''}: ${p.message}`)
  if (problems.length > max) lines.push(`  ... and ${problems.length - max} more`)
  for (const [label, list] of [
    ['LIVE', s.live],
    ['DROPPED', s.dropped],
    ['KEPT', s.kept],
  ] as const) {
    for (const p of list.slice(0, max)) lines.push(`  ${label} ${p.request}: ${p.message}`)
    if (list.length > max) lines.push(`  ... and ${list.length - max} more ${label.toLowerCase()}`)
  }
  return lines.join('\n')
}

/** A ledger entry for a refusal. */
export function entryFromError(err: ToolReplayError, request: string): LedgerEntry {
  return { code: err.code, request, message: err.message }
}

/** The SDK retry attempt a request announces (`x-stainless-retry-count`, sent by openai and @anthropic-ai/sdk); 0 when absent. */
export function retryAttempt(headers: HeaderPairs): number {
  const n = Number(headerValue(headers, 'x-stainless-retry-count'))
  return Number.isInteger(n) && n > 0 ? n : 0
}

/**
 * Folds an SDK's retries of one refused request into one ledger entry with an attempt count, so one
 * changed prompt is one miss, not 3 or 7. A refusal is a retry of an earlier entry when it has the same
 * identity and either announces a retry (`x-stainless-retry-count` > 0: SDKs that retry concurrently
 * interleave) or comes right after it (clients that do not announce retries: LangChain's own retry loop,
 * plain HTTP clients).
 * @note Two deliberate identical requests in a row also fold; the entry then says "2 attempts", and the
 * run fails either way.
 */
export class RetryFolding {
  readonly #byIdentity = new Map<string, LedgerEntry>()
  #last: { identity: string; seq: number } | undefined

  /**
   * True when `entry` was folded into an earlier one (do not add it); false when it is new (add it).
   * `seq` numbers every request the session handled, so "right after" means nothing came in between.
   */
  fold(entry: LedgerEntry, identity: string, headers: HeaderPairs, seq: number): boolean {
    const earlier = this.#byIdentity.get(identity)
    const inARow = this.#last?.identity === identity && this.#last.seq === seq - 1
    this.#last = { identity, seq }
    if (earlier && (retryAttempt(headers) > 0 || inARow)) {
      earlier.attempts = (earlier.attempts ?? 1) + 1
      return true
    }
    this.#byIdentity.set(identity, entry)
    return false
  }
}

/** The ledger entry of a recording the run never requested. */
export function unusedEntry(u: UnusedRecording): LedgerEntry {
  return {
    code: ErrorCodes.REPLAY_UNUSED,
    request: `${u.label} #${u.occurrence}`,
    message: `never requested (it is exchange #${u.seq} of the trace). The app did less than when it was recorded; re-record, or check what changed.`,
  }
}
