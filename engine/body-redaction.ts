/**
 * JSON-path redaction of a request or response body, compressed or not: a Content-Encoding (gzip,
 * deflate, br, zstd) is undone first, so a secret inside a compressed JSON body is redacted like any other.
 * A body that changed is stored decoded: Content-Encoding dropped, Content-Length set to the new size.
 * Replay redacts incoming requests the same way before matching, so a recorded compressed request still
 * matches its replay (both sides are compared decoded and redacted).
 *
 * Decoding is bounded (the session's maxBodyBytes, default 64 MiB): a body that would decode past it (a
 * compression bomb, or simply too big) cannot be redacted, and is never stored as it came — the response is
 * kept as a TR_BODY_NOT_REDACTED failure (exchange-recorder.ts), the request refused (TR_REQUEST_TOO_LARGE).
 */
import { decodeContentEncoding, ErrorCodes, type HeaderPairs, headerValue, ToolReplayError } from '../trace/index.ts'
import type { CapturedRequest } from './decision.ts'
import type { Redactor } from './redaction.ts'
import { DEFAULT_MAX_BODY_BYTES } from './transport-rules.ts'

/** A redacted body and its fixed headers; 'unchanged' (store it as it came); 'too-large' to decode within the limit. */
export type RedactedBody = { bytes: Uint8Array; headers: HeaderPairs } | 'unchanged' | 'too-large'

/** Redacts the configured JSON paths of a body, decoding its Content-Encoding first (at most `maxBytes`). */
export function redactBody(redactor: Redactor, bytes: Uint8Array, headers: HeaderPairs, maxBytes = DEFAULT_MAX_BODY_BYTES): RedactedBody {
  if (!redactor.hasBodyPaths || bytes.byteLength === 0) return 'unchanged'
  const encoding = headerValue(headers, 'content-encoding')
  const encoded = encoding !== undefined && encoding.trim().toLowerCase() !== 'identity'
  let plain = bytes
  if (encoded) {
    try {
      plain = decodeContentEncoding(bytes, encoding, { maxBytes })
    } catch (err) {
      if ((err as { code?: unknown }).code === 'ERR_BUFFER_TOO_LARGE') return 'too-large'
      return 'unchanged' // not decodable as declared: not JSON we could redact either
    }
  }
  const plainHeaders = encoded ? headers.filter(([k]) => k.toLowerCase() !== 'content-encoding') : headers
  const redacted = redactor.body(plain, plainHeaders)
  if (redacted === plain) return 'unchanged'
  return {
    bytes: redacted,
    headers: plainHeaders.map(([k, v]) => (k.toLowerCase() === 'content-length' ? [k, String(redacted.byteLength)] : [k, v])),
  }
}

/**
 * A captured request as the session decides on and records it: method upper-cased, URL, headers and body
 * redacted (a compressed JSON body decoded to redact it, on record and replay alike), its HTTP version kept;
 * the app's abort signal is not carried (the caller keeps it).
 */
export function redactCapturedRequest(redactor: Redactor, c: CapturedRequest, maxBytes: number): CapturedRequest {
  const headers = redactor.headers(c.headers)
  const url = redactor.url(c.url)
  const redacted = c.body ? redactRequestBody(redactor, c, headers, maxBytes) : undefined
  const out: CapturedRequest = { method: c.method.toUpperCase(), url, headers: redacted?.headers ?? headers, body: redacted?.bytes ?? c.body }
  if (c.httpVersion) out.httpVersion = c.httpVersion
  return out
}

/**
 * A request's body redacted (undefined: unchanged). One that decodes past `maxBytes` is refused with
 * TR_REQUEST_TOO_LARGE: it can be neither redacted nor matched, and is never stored unredacted.
 */
export function redactRequestBody(
  redactor: Redactor,
  request: { method: string; url: string; body: Uint8Array | null },
  headers: HeaderPairs,
  maxBytes: number,
): { bytes: Uint8Array; headers: HeaderPairs } | undefined {
  if (!request.body) return undefined
  const out = redactBody(redactor, request.body, headers, maxBytes)
  if (out === 'unchanged') return undefined
  if (out === 'too-large') {
    throw new ToolReplayError(
      ErrorCodes.REQUEST_TOO_LARGE,
      `Request body of ${request.method} ${redactor.url(request.url)} decodes (content-encoding ${headerValue(headers, 'content-encoding')}) to more than ${maxBytes} bytes, so JSON body-path redaction cannot read it whole; it was neither sent nor stored. Raise the limit with --max-body-bytes (CLI) or maxBodyBytes (install()).`,
      { details: { method: request.method, maxBodyBytes: maxBytes } },
    )
  }
  return out
}
