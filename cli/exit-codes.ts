import { type ErrorCode, ErrorCodes } from '../trace/index.ts'

/**
 * The one table from error codes to process exit codes. Stable: scripts and CI branch on these.
 *
 * The rule: Tool Replay's own codes are 64 and above (after sysexits: 64 usage, 65 bad data, 66 no input,
 * 70 internal error), so a wrapped command's own code (`tr-proxy replay -- npm test`), which is passed
 * through only when Tool Replay saw no problem, can be told apart from them: below 64 it is the command's.
 * 0 is success; 1 is `diff --exit-code` finding differences (as git diff), `drift` finding drift and
 * `assets status --exit-code` finding traces that differ from the pointer. README mirrors this table.
 */
export const EXIT_CODES: Readonly<Record<ErrorCode, number>> = {
  [ErrorCodes.USAGE]: 64,
  [ErrorCodes.INVALID_OPTION]: 64,
  [ErrorCodes.INVALID_PATCH]: 64,
  [ErrorCodes.CAPTURE_UNAVAILABLE]: 64,
  [ErrorCodes.TRACE_INVALID]: 65,
  [ErrorCodes.TRACE_FILE_INVALID]: 65,
  [ErrorCodes.TRACE_DIGEST_MISMATCH]: 65,
  [ErrorCodes.BODY_MISSING]: 65,
  [ErrorCodes.INVALID_FAULTS]: 65,
  [ErrorCodes.HAR_INVALID]: 65,
  [ErrorCodes.ASSETS_INVALID]: 65,
  [ErrorCodes.EXPORT_UNSUPPORTED]: 65,
  [ErrorCodes.BODY_NOT_REDACTED]: 65,
  [ErrorCodes.TRACE_NOT_FOUND]: 66,
  [ErrorCodes.TRACE_EXISTS]: 66,
  [ErrorCodes.CASE_EXISTS]: 66,
  [ErrorCodes.STORE_NOT_FOUND]: 66,
  [ErrorCodes.SESSION_UNKNOWN]: 66,
  [ErrorCodes.SESSION_EXISTS]: 66,
  [ErrorCodes.ASSETS_TAG_NOT_FOUND]: 66,
  [ErrorCodes.ASSETS_TAG_EXISTS]: 66,
  [ErrorCodes.STORE_CORRUPT]: 67,
  [ErrorCodes.STORE_LOCKED]: 68,
  [ErrorCodes.STORE_CLOSED]: 68,
  [ErrorCodes.STORE_IO]: 68,
  [ErrorCodes.ASSETS_LOCKED]: 68,
  [ErrorCodes.STORE_READ_ONLY]: 68,
  [ErrorCodes.REPLAY_MISS]: 69,
  [ErrorCodes.REPLAY_EXHAUSTED]: 69,
  [ErrorCodes.REPLAY_UNUSED]: 69,
  [ErrorCodes.REPLAY_INCOMPLETE]: 69,
  [ErrorCodes.INTERNAL]: 70,
  [ErrorCodes.CASE_INTEGRITY]: 71,
  [ErrorCodes.CASE_REGRESSION]: 72,
  [ErrorCodes.CASE_APP_ERROR]: 73,
  [ErrorCodes.PROXY_START_FAILED]: 74,
  [ErrorCodes.PROXY_BAD_REQUEST]: 74,
  [ErrorCodes.REQUEST_TOO_LARGE]: 74,
  [ErrorCodes.UPSTREAM_FAILED]: 74,
  [ErrorCodes.COMMAND_FAILED]: 74,
  [ErrorCodes.SEAL_UNAVAILABLE]: 74,
  [ErrorCodes.ASSETS_GIT_FAILED]: 74,
  [ErrorCodes.CONTRACT_VIOLATED]: 75,
  [ErrorCodes.FAULT_NOT_FIRED]: 76,
  [ErrorCodes.SECRET_FOUND]: 77,
  [ErrorCodes.INSPECT_START_FAILED]: 74,
  [ErrorCodes.INSPECT_REFUSED]: 78,
  [ErrorCodes.COMMAND_UNCONFIRMED]: 78,
}

export const EXIT_OK = 0
/** `diff --exit-code` when the traces differ. */
export const EXIT_DIFFERENT = 1
export const EXIT_USAGE = EXIT_CODES[ErrorCodes.USAGE]
/** Anything thrown that is not a ToolReplayError: a bug. */
export const EXIT_UNEXPECTED = EXIT_CODES[ErrorCodes.INTERNAL]

/** The lowest exit code Tool Replay itself uses; a wrapped command's code below it is the command's. */
export const TOOL_EXIT_MIN = 64

/** The exit code for any thrown value. */
export function exitCodeFor(err: unknown): number {
  const code = (err as { code?: unknown } | null)?.code
  if (typeof code === 'string' && Object.hasOwn(EXIT_CODES, code)) return EXIT_CODES[code as ErrorCode]
  return EXIT_UNEXPECTED
}
