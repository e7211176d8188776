/**
 * Rules every capture path applies to the same wire events, decided once here so a trace recorded through
 * fetch, node:http or the proxy says the same thing about the same exchange: in which phase a failure
 * happened, how long an aborted response keeps being recorded, and what a request body over the limit is.
 * (What a client abort is recorded as, and the body limit's default, are the engine's: engine/transport-rules.ts.)
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

/** How far a forwarded exchange got, as the live tee sees it (capture/live-tee.ts). */
export interface ExchangeProgress {
  /** A connection was assigned and the request is being written. */
  started: boolean
  /** The whole request went out. */
  sent: boolean
  /** The response head arrived. */
  headers: boolean
}

/**
 * The phase a failure happened in. A connect-level code before the request went out is `connect` even when
 * the transport already reported the request as started (undici does so for some TLS failures).
 */
export function errorPhase(progress: ExchangeProgress, code: string | undefined): ErrorPhase {
  if (progress.headers) return 'response-body'
  if (progress.sent) return 'response-headers'
  if (!progress.started || (code !== undefined && CONNECT_CODES.has(code))) return 'connect'
  return 'request'
}

/**
 * How long a response the client aborted after its head keeps being read from the upstream and recorded, so
 * the trace holds the whole response (SDKs abort on purpose once they have what they need, such as the
 * openai SDK after `[DONE]`). After this the recording keeps what arrived, as a client abort.
 */
export const DEFAULT_DRAIN_AFTER_ABORT_MS = 1000

/** The error for a request body over the limit, the same on every path. */
export function bodyTooLarge(method: string, url: string, max: number): ToolReplayError {
  return new ToolReplayError(
    ErrorCodes.REQUEST_TOO_LARGE,
    `Request body of ${method} ${url} is over ${max} bytes; Tool Replay buffers request bodies to match them. Raise the limit with --max-body-bytes (CLI) or maxBodyBytes (install()).`,
    { details: { method, url, maxBodyBytes: max } },
  )
}
