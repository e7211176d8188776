/**
 * Rules both capture paths apply to the same wire events, decided once here so a trace recorded by the
 * interceptor and one recorded by the proxy say the same thing about the same exchange: in which phase a
 * failure happened, what a client abort is recorded as, how long an aborted response keeps being
 * recorded, and how large a request body may be buffered.
 */
import { ErrorCodes, type ErrorPhase, ToolReplayError } from '../trace/index.ts'

/** Codes that mean no connection to the upstream was made (DNS, refused, unreachable, TLS setup). */
const CONNECT_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_CONNECT_TIMEOUT',
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'CERT_HAS_EXPIRED',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'ERR_SSL_WRONG_VERSION_NUMBER',
])

/** How far a forwarded exchange got, as both paths see it through undici's dispatch callbacks. */
export interface ExchangeProgress {
  /** onRequestStart ran: a connection was assigned and the request is being written. */
  started: boolean
  /** onRequestSent ran: the whole request went out. */
  sent: boolean
  /** The response head arrived. */
  headers: boolean
}

/**
 * The phase a failure happened in. A connect-level code before the request went out is `connect` even when
 * undici already reported the request as started (it does so for some TLS failures).
 */
export function errorPhase(progress: ExchangeProgress, code: string | undefined): ErrorPhase {
  if (progress.headers) return 'response-body'
  if (progress.sent) return 'response-headers'
  if (!progress.started || (code !== undefined && CONNECT_CODES.has(code))) return 'connect'
  return 'request'
}

/** The code recorded when the client (the app) gave up on a response before it ended. */
export const CLIENT_ABORT_CODE = 'UND_ERR_ABORTED'

/** The recorded failure for a client abort. */
export function clientAbortError(): { code: string; message: string } {
  return { code: CLIENT_ABORT_CODE, message: 'The client aborted the request before the response ended.' }
}

/**
 * How long a response the client aborted after its head keeps being read from the upstream and recorded, so
 * the trace holds the whole response (SDKs abort on purpose once they have what they need, such as the
 * openai SDK after `[DONE]`). After this the recording keeps what arrived, as a client abort.
 */
export const DEFAULT_DRAIN_AFTER_ABORT_MS = 1000

/** Largest request body either path buffers to compute its identity, by default (64 MiB). */
export const DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024

/** Validates a `maxBodyBytes` option. */
export function parseMaxBodyBytes(input: unknown): number {
  if (input === undefined) return DEFAULT_MAX_BODY_BYTES
  const n = typeof input === 'string' && /^\d+$/.test(input) ? Number(input) : input
  if (typeof n === 'number' && Number.isSafeInteger(n) && n > 0) return n
  throw new ToolReplayError(
    ErrorCodes.INVALID_OPTION,
    `Invalid maxBodyBytes ${JSON.stringify(input)}: give a whole number of bytes > 0 (default ${DEFAULT_MAX_BODY_BYTES}).`,
  )
}

/** The error for a request body over the limit, the same on both paths. */
export function bodyTooLarge(method: string, url: string, max: number): ToolReplayError {
  return new ToolReplayError(
    ErrorCodes.REQUEST_TOO_LARGE,
    `Request body of ${method} ${url} is over ${max} bytes; Tool Replay buffers request bodies to match them. Raise the limit with --max-body-bytes (CLI) or maxBodyBytes (install()).`,
    { details: { method, url, maxBodyBytes: max } },
  )
}
