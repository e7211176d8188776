import type { ErrorCode, ToolReplayError } from '../trace/index.ts'

/** One strictness violation seen during a session. Kept even when the app swallowed the error. */
export interface LedgerEntry {
  /** Usually TR_REPLAY_MISS / _EXHAUSTED / _UNUSED; also what a request the engine could not read failed with. */
  code: ErrorCode
  /** "GET https://api.test/users/1" (#n for the occurrence when relevant). */
  request: string
  message: string
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
  /** True when strict replay saw no miss, no overrun and no unused recording. */
  ok: boolean
}

/** Formats a summary for humans: one line per problem, bounded. */
export function formatSummary(s: SessionSummary, max = 20): string {
  const lines = [
    `Tool Replay ${s.mode} of trace "${s.trace}": ${s.replayed} replayed, ${s.recorded} recorded, ${s.passedThrough} passed through; ${s.misses.length} unmatched, ${s.exhausted.length} over the recorded count, ${s.unused.length} unused.`,
  ]
  const problems = [...s.misses, ...s.exhausted, ...s.unused]
  for (const p of problems.slice(0, max)) lines.push(`  ${p.code} ${p.request}: ${p.message}`)
  if (problems.length > max) lines.push(`  ... and ${problems.length - max} more`)
  return lines.join('\n')
}

export function entryFromError(err: ToolReplayError, request: string): LedgerEntry {
  return { code: err.code, request, message: err.message }
}
