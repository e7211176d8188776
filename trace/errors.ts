/**
 * Every error Tool Replay throws on purpose is a `ToolReplayError` with a stable `code`.
 * Callers branch on `err.code`; the CLI maps codes to exit codes in one table (cli/exit-codes.ts).
 */

/** Stable error codes. Adding one means adding it to docs/errors.md and to cli/exit-codes.ts. */
export const ErrorCodes = {
  // replay contract
  REPLAY_MISS: 'TR_REPLAY_MISS',
  REPLAY_EXHAUSTED: 'TR_REPLAY_EXHAUSTED',
  REPLAY_UNUSED: 'TR_REPLAY_UNUSED',
  REPLAY_INCOMPLETE: 'TR_REPLAY_INCOMPLETE',
  // input / traces
  TRACE_NOT_FOUND: 'TR_TRACE_NOT_FOUND',
  TRACE_EXISTS: 'TR_TRACE_EXISTS',
  TRACE_INVALID: 'TR_TRACE_INVALID',
  TRACE_FILE_INVALID: 'TR_TRACE_FILE_INVALID',
  TRACE_DIGEST_MISMATCH: 'TR_TRACE_DIGEST_MISMATCH',
  BODY_MISSING: 'TR_BODY_MISSING',
  INVALID_OPTION: 'TR_INVALID_OPTION',
  INVALID_PATCH: 'TR_INVALID_PATCH',
  USAGE: 'TR_USAGE',
  // interop (HAR in, HAR and MSW out)
  HAR_INVALID: 'TR_HAR_INVALID',
  EXPORT_UNSUPPORTED: 'TR_EXPORT_UNSUPPORTED',
  // store
  STORE_LOCKED: 'TR_STORE_LOCKED',
  STORE_CORRUPT: 'TR_STORE_CORRUPT',
  STORE_CLOSED: 'TR_STORE_CLOSED',
  STORE_IO: 'TR_STORE_IO',
  STORE_NOT_FOUND: 'TR_STORE_NOT_FOUND',
  STORE_READ_ONLY: 'TR_STORE_READ_ONLY',
  // proxy
  PROXY_START_FAILED: 'TR_PROXY_START_FAILED',
  PROXY_BAD_REQUEST: 'TR_PROXY_BAD_REQUEST',
  PROXY_BUSY: 'TR_PROXY_BUSY',
  REQUEST_TOO_LARGE: 'TR_REQUEST_TOO_LARGE',
  LINE_TOO_LONG: 'TR_LINE_TOO_LONG',
  UPSTREAM_FAILED: 'TR_UPSTREAM_FAILED',
  COMMAND_FAILED: 'TR_COMMAND_FAILED',
  SESSION_UNKNOWN: 'TR_SESSION_UNKNOWN',
  SESSION_EXISTS: 'TR_SESSION_EXISTS',
  /** A sealed run (`--sealed`) cannot be set up here: the kernel, the sandbox or a missing tool refuses it. */
  SEAL_UNAVAILABLE: 'TR_SEAL_UNAVAILABLE',
  // interceptor
  CAPTURE_UNAVAILABLE: 'TR_CAPTURE_UNAVAILABLE',
  // cases
  CASE_INTEGRITY: 'TR_CASE_INTEGRITY',
  CASE_EXISTS: 'TR_CASE_EXISTS',
  CASE_REGRESSION: 'TR_CASE_REGRESSION',
  CASE_APP_ERROR: 'TR_CASE_APP_ERROR',
  // faults and behaviour contracts
  INVALID_FAULTS: 'TR_INVALID_FAULTS',
  FAULT_NOT_FIRED: 'TR_FAULT_NOT_FIRED',
  CONTRACT_VIOLATED: 'TR_CONTRACT_VIOLATED',
  // secrets
  SECRET_FOUND: 'TR_SECRET_FOUND',
  BODY_NOT_REDACTED: 'TR_BODY_NOT_REDACTED',
  // inspector
  INSPECT_START_FAILED: 'TR_INSPECT_START_FAILED',
  INSPECT_REFUSED: 'TR_INSPECT_REFUSED',
  COMMAND_UNCONFIRMED: 'TR_COMMAND_UNCONFIRMED',
  // shared recordings in a git assets repository
  ASSETS_INVALID: 'TR_ASSETS_INVALID',
  ASSETS_TAG_NOT_FOUND: 'TR_ASSETS_TAG_NOT_FOUND',
  ASSETS_TAG_EXISTS: 'TR_ASSETS_TAG_EXISTS',
  ASSETS_LOCKED: 'TR_ASSETS_LOCKED',
  ASSETS_GIT_FAILED: 'TR_ASSETS_GIT_FAILED',
  // generic
  INTERNAL: 'TR_INTERNAL',
} as const

export type ErrorCode = (typeof ErrorCodes)[keyof typeof ErrorCodes]

/**
 * The brand every ToolReplayError carries, registered globally (as undici brands its errors): an app holding two
 * copies of the package (its own and a dependency's) gets two classes, and each must recognise the other's errors.
 */
const BRAND = Symbol.for('tool-replay.error')

/** Base class for every deliberate Tool Replay failure, after abstract-level's ModuleError. */
export class ToolReplayError extends Error {
  readonly code: ErrorCode
  /** Structured facts about the failure (request, candidates, ...) for `--json` output and tests. */
  readonly details: Record<string, unknown> | undefined
  constructor(code: ErrorCode, message: string, options?: ErrorOptions & { details?: Record<string, unknown> }) {
    super(message, options)
    this.code = code
    this.name = new.target.name
    this.details = options?.details
    Object.defineProperty(this, BRAND, { value: true })
  }

  /** `err instanceof ToolReplayError` holds for an error of any copy of the package (by its brand). */
  static [Symbol.hasInstance](value: unknown): boolean {
    return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[BRAND] === true
  }
}

/** True when `err` is a ToolReplayError (of any copy of the package), optionally with the given code. */
export function isToolReplayError(err: unknown, code?: ErrorCode): err is ToolReplayError {
  return err instanceof ToolReplayError && (code === undefined || err.code === code)
}
