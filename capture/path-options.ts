/**
 * What a caller gives every capture path (install(), the fetch dispatcher, the node:http and node:http2
 * captures): the pace, the body limit and the drain after an abort, typed from their declarations and checked
 * in one place, so each path holds the same CaptureOptions and a bad value fails the same way everywhere.
 */
import { DEFAULT_MAX_BODY_BYTES, SESSION_OPTIONS } from '../engine/index.ts'
import { ErrorCodes, type OptionDeclaration, type OptionInputs, optionsFromCode, ToolReplayError } from '../trace/index.ts'
import type { CaptureOptions, CaptureSession } from './lifecycle.ts'
import { DEFAULT_PACE, PACE_OPTION } from './pacing.ts'
import { DEFAULT_DRAIN_AFTER_ABORT_MS } from './transport-rules.ts'

/** The declared options of a capture path: `pace` (PACE_OPTION) and `maxBodyBytes` (SESSION_OPTIONS). */
export const PATH_OPTIONS = { pace: PACE_OPTION, maxBodyBytes: SESSION_OPTIONS.maxBodyBytes } as const satisfies Record<string, OptionDeclaration>

/** The options of a capture path as code gives them. */
export interface PathOptions extends OptionInputs<typeof PATH_OPTIONS> {
  /**
   * When the app aborts a response that is being recorded, keep reading it from upstream for up to this many
   * ms so the trace holds the whole response, not an abort. Default 1000; 0 records the abort. (No flag: the
   * proxy takes it from startProxy's options.)
   */
  drainAfterAbortMs?: number
}

/**
 * A path's options checked and completed with their defaults: TR_INVALID_OPTION naming the option as code
 * spells it (the same check as its flag's) for a bad one.
 * @example checkPathOptions({ pace: 'recorded' }) // { pace: { kind: 'recorded', factor: 1 }, maxBodyBytes: 67108864, drainAfterAbortMs: 1000 }
 */
export function checkPathOptions(options: PathOptions): Omit<CaptureOptions, 'session' | 'onDecision'> {
  const { pace, maxBodyBytes } = optionsFromCode(PATH_OPTIONS, options)
  return { pace: pace ?? DEFAULT_PACE, maxBodyBytes: maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES, drainAfterAbortMs: drainAfterAbortMs(options.drainAfterAbortMs) }
}

/** What a path holds for `session`: its options checked (checkPathOptions). */
export function captureOptions(session: CaptureSession, options: PathOptions): CaptureOptions {
  return { session, ...checkPathOptions(options) }
}

function drainAfterAbortMs(value: unknown): number {
  if (value === undefined) return DEFAULT_DRAIN_AFTER_ABORT_MS
  if (typeof value === 'number' && Number.isFinite(value) && value >= 0) return value
  throw new ToolReplayError(
    ErrorCodes.INVALID_OPTION,
    `Invalid drainAfterAbortMs ${JSON.stringify(value) ?? String(value)}: give a number of milliseconds >= 0 (default ${DEFAULT_DRAIN_AFTER_ABORT_MS}; 0 records the abort).`,
  )
}
