/**
 * What the engine records for events every capture path reports the same way: a client abort, and how
 * large a body may be held whole (request bodies for matching, response bodies for JSON redaction). The
 * wire-side rules (error phases, drain after abort, the over-large request) are capture/transport-rules.ts.
 */
import { CLIENT_ABORT_CODE, ErrorCodes, ToolReplayError } from '../trace/index.ts'

/** The code recorded when the client (the app) gave up on a request before its response ended (declared in trace/). */
export { CLIENT_ABORT_CODE }

/** The recorded failure for a client abort. */
export function clientAbortError(): { code: string; message: string } {
  return { code: CLIENT_ABORT_CODE, message: 'The client aborted the request before the response ended.' }
}

/** Largest body held whole by default (64 MiB): a request body buffered for its identity, a response body for JSON redaction. */
export const DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024

/** Validates a `maxBodyBytes` option; `name` is how the caller wrote it (`--max-body-bytes` on the command line). */
export function parseMaxBodyBytes(input: unknown, name = 'maxBodyBytes'): number {
  if (input === undefined) return DEFAULT_MAX_BODY_BYTES
  const n = typeof input === 'string' && /^\d+$/.test(input) ? Number(input) : input
  if (typeof n === 'number' && Number.isSafeInteger(n) && n > 0) return n
  throw new ToolReplayError(
    ErrorCodes.INVALID_OPTION,
    `Invalid ${name} ${typeof input === 'number' ? String(input) : JSON.stringify(input)}: give a whole number of bytes > 0 (default ${DEFAULT_MAX_BODY_BYTES}).`,
  )
}
