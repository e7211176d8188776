/**
 * How replay times a response, decided once for both capture paths.
 *
 * - `chunks` (default): every recorded chunk reaches the app as its own read, without the recorded waits:
 *   a chunk goes out only after the previous one was handed over and the path's separation step ran (a
 *   macrotask in-process, none on Node 26 whose streams keep chunks apart; a flushed write plus a short
 *   gap through the proxy, never longer than the recorded gap between the two chunks: none for chunks
 *   recorded together, which the proxy writes together, as the client got them live).
 * - `recorded` with a speed factor: the head and each chunk go out at their recorded offsets times the
 *   factor (`1` = as recorded, `0.1` = ten times faster), chunks still kept apart (through the proxy, those
 *   recorded together go out together, as with `chunks`).
 * - `none`: as fast as possible; chunk boundaries are not promised (the client may read several at once).
 */
import { ErrorCodes, type OptionDeclaration, ToolReplayError } from '../trace/index.ts'

/** What users write: `'chunks' | 'none' | 'recorded'` or a speed factor (a number > 0, recorded timing). */
export type PaceOption = 'chunks' | 'none' | 'recorded' | number | Pace

/** A parsed pace. */
export type Pace = { kind: 'chunks' } | { kind: 'none' } | { kind: 'recorded'; factor: number }

export const DEFAULT_PACE: Pace = Object.freeze({ kind: 'chunks' })

/**
 * Parses a pace option from install() or the CLI (`--pace chunks|none|recorded|FACTOR`); `name` is how the
 * caller wrote it (`--pace`, `pace`).
 * @example parsePace('0.1') // { kind: 'recorded', factor: 0.1 }
 */
export function parsePace(input: unknown, name = 'pace'): Pace {
  if (input === undefined || input === 'chunks') return DEFAULT_PACE
  if (isPace(input)) return input
  if (input === 'none') return { kind: 'none' }
  if (input === 'recorded') return { kind: 'recorded', factor: 1 }
  const factor = typeof input === 'number' ? input : typeof input === 'string' && /^\d+(\.\d+)?$/.test(input.trim()) ? Number(input) : Number.NaN
  if (Number.isFinite(factor) && factor > 0 && factor <= 1000) return { kind: 'recorded', factor }
  throw new ToolReplayError(
    ErrorCodes.INVALID_OPTION,
    `Invalid ${name} ${JSON.stringify(input)}: use "chunks" (default: each recorded chunk is its own read, no waiting), "none" (as fast as possible), "recorded" (recorded timing) or a speed factor > 0 such as 0.1 (ten times faster than recorded).`,
  )
}

/**
 * The pace, declared once for every path that replays: `--pace` of `record`, `replay` and `serve`, `pace` of
 * install(), the interceptor's dispatchers, startProxy() and runProxySession(). Code gives a PaceOption and
 * holds the parsed Pace.
 */
export const PACE_OPTION = {
  flag: 'pace',
  type: 'string',
  default: 'chunks',
  help: 'Replay timing: chunks = each recorded chunk its own read, no waiting; recorded = recorded timing; FACTOR (e.g. 0.1 = 10x faster than recorded); none = as fast as possible',
  // Its parameter is what code may give: the command line's text ('0.1') is checked by the same function.
  parse: (value: PaceOption, name: string): Pace => parsePace(value, name),
} as const satisfies OptionDeclaration<Pace, PaceOption>

function isPace(v: unknown): v is Pace {
  const kind = (v as { kind?: unknown } | null)?.kind
  if (kind === 'chunks' || kind === 'none') return true
  const factor = (v as { factor?: unknown }).factor
  return kind === 'recorded' && typeof factor === 'number' && factor > 0 && factor <= 1000
}

/** The pace as users write it, for summaries and generated commands. */
export function formatPace(pace: Pace): string {
  return pace.kind === 'recorded' ? (pace.factor === 1 ? 'recorded' : String(pace.factor)) : pace.kind
}

/**
 * Milliseconds from the start of a playback at which something recorded `atMs` after the request may go
 * out: its recorded offset scaled for `recorded`, 0 (no timing) otherwise.
 */
export function releaseAtMs(pace: Pace, atMs: number): number {
  return pace.kind === 'recorded' ? atMs * pace.factor : 0
}

/** True when consecutive chunks must reach the app as separate reads. */
export function keepsChunksApart(pace: Pace): boolean {
  return pace.kind !== 'none'
}
