import { type ErrorCode, ErrorCodes } from '../trace/index.ts'

/**
 * The one table from error codes to process exit codes. Stable: scripts and CI branch on these.
 * 0 success; 1 unexpected failure; 2 usage. README "Errors and exit codes" mirrors this table.
 */
export const EXIT_CODES: Readonly<Record<ErrorCode, number>> = {
  [ErrorCodes.INVALID_OPTION]: 2,
  [ErrorCodes.INVALID_PATCH]: 2,
  [ErrorCodes.USAGE]: 2,
  [ErrorCodes.TRACE_NOT_FOUND]: 3,
  [ErrorCodes.TRACE_EXISTS]: 3,
  [ErrorCodes.TRACE_INVALID]: 4,
  [ErrorCodes.TRACE_FILE_INVALID]: 4,
  [ErrorCodes.TRACE_DIGEST_MISMATCH]: 4,
  [ErrorCodes.BODY_MISSING]: 4,
  [ErrorCodes.STORE_CORRUPT]: 4,
  [ErrorCodes.STORE_LOCKED]: 5,
  [ErrorCodes.STORE_CLOSED]: 5,
  [ErrorCodes.STORE_IO]: 5,
  [ErrorCodes.STORE_NOT_FOUND]: 5,
  [ErrorCodes.REPLAY_MISS]: 6,
  [ErrorCodes.REPLAY_EXHAUSTED]: 6,
  [ErrorCodes.REPLAY_UNUSED]: 6,
  [ErrorCodes.REPLAY_INCOMPLETE]: 6,
  [ErrorCodes.CASE_INTEGRITY]: 7,
  [ErrorCodes.CASE_EXISTS]: 3,
  [ErrorCodes.CASE_REGRESSION]: 8,
  [ErrorCodes.CASE_APP_ERROR]: 9,
  [ErrorCodes.PROXY_START_FAILED]: 10,
  [ErrorCodes.PROXY_BAD_REQUEST]: 10,
  [ErrorCodes.REQUEST_TOO_LARGE]: 10,
  [ErrorCodes.UPSTREAM_FAILED]: 10,
  [ErrorCodes.COMMAND_FAILED]: 10,
  [ErrorCodes.INTERNAL]: 1,
}

export const EXIT_OK = 0
export const EXIT_UNEXPECTED = 1
export const EXIT_USAGE = 2

/** The exit code for any thrown value. */
export function exitCodeFor(err: unknown): number {
  const code = (err as { code?: unknown } | null)?.code
  if (typeof code === 'string' && Object.hasOwn(EXIT_CODES, code)) return EXIT_CODES[code as ErrorCode]
  return EXIT_UNEXPECTED
}
