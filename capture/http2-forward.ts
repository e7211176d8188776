/**
 * Sends a live request over a node:http2 client session and reports it to the live tee as wire-neutral
 * events, the HTTP/2 counterpart of undici-upstream.ts: the response head without pseudo-headers (marked
 * `final` when its HEADERS frame ended the stream), each DATA frame as a chunk, trailers as trailers, and a
 * stream reset (RST_STREAM, a GOAWAY that cut the stream, a session error) as the failure it was, in Node's
 * words (`ERR_HTTP2_STREAM_ERROR` "Stream closed with error code NGHTTP2_…"), so a replay resets the stream
 * with the same code.
 *
 * @note node:http2 rather than undici's `allowH2`: undici reports a Trailers-Only answer (HEADERS with
 * END_STREAM, how gRPC servers send an error) like a head followed by an empty body, and a client that is
 * answered in that second form fails the call ("Call ended without gRPC status"); node:http2 says which
 * it was ('response' flags), and it is what the app itself uses in-process.
 */
import type { ClientHttp2Session, ClientHttp2Stream, IncomingHttpHeaders } from 'node:http2'
import type { HeaderPairs } from '../trace/index.ts'
import { HTTP2_STREAM_ERROR, http2ErrorName, http2Fields, http2ResponseFields } from './http2-wire.ts'
import type { LiveEvents } from './live-tee.ts'

const END_STREAM = 0x1
const CANCEL = 0x8

/** A request to send live over HTTP/2. */
export interface Http2LiveRequest {
  method: string
  url: URL
  headers: HeaderPairs
  body: Uint8Array | null
}

/** How long a live stream may wait for its head, and then for each piece of its body (ms; none when absent). */
export interface Http2Timeouts {
  headersTimeoutMs?: number
  bodyTimeoutMs?: number
}

/**
 * Opens the request's stream on `session` and reports what happens to `events`. A wait past `timeouts` cancels
 * the stream and fails it as undici names such failures (UND_ERR_HEADERS_TIMEOUT, UND_ERR_BODY_TIMEOUT).
 */
export function forwardOverHttp2(session: ClientHttp2Session, request: Http2LiveRequest, events: LiveEvents, timeouts: Http2Timeouts = {}): void {
  let stream: ClientHttp2Stream
  try {
    stream = openStream(session, request)
  } catch (err) {
    events.error(err as Error)
    return
  }
  let over = false
  events.control({
    pause: () => stream.pause(),
    resume: () => stream.resume(),
    abort: () => {
      over = true
      stream.close(CANCEL)
    },
  })
  // Started once the session is connected: a connection that fails first fails in the connect phase.
  let started = false
  const start = () => {
    if (started || over) return
    started = true
    events.started()
    if (request.body === null) events.sent()
  }
  if (session.connecting) session.once('connect', start)
  else start()
  if (request.body !== null)
    stream.end(request.body, () => {
      if (!over) events.sent()
    })
  let trailers: HeaderPairs = []
  let headed = false
  const idle = () => (headed ? timeouts.bodyTimeoutMs : timeouts.headersTimeoutMs)
  const onTimeout = () => {
    if (over) return
    over = true
    const code = headed ? 'UND_ERR_BODY_TIMEOUT' : 'UND_ERR_HEADERS_TIMEOUT'
    const message = headed ? 'Body Timeout Error' : 'Headers Timeout Error'
    stream.close(CANCEL)
    events.error(Object.assign(new Error(message), { code }), { code, message })
  }
  if (idle()) stream.setTimeout(idle() as number, onTimeout)
  stream.on('response', (headers: IncomingHttpHeaders, flags: number, raw?: string[]) => {
    headed = true
    if (timeouts.bodyTimeoutMs !== timeouts.headersTimeoutMs) stream.setTimeout(timeouts.bodyTimeoutMs ?? 0, onTimeout)
    const fields = http2ResponseFields(raw ?? flatHeaders(headers))
    const wire = { raw: fields.flatMap(([k, v]) => [Buffer.from(k, 'latin1'), Buffer.from(v, 'latin1')]), parsed: headers, final: (flags & END_STREAM) !== 0 }
    events.head({ status: Number(headers[':status']), statusText: '', headers: fields }, wire)
  })
  stream.on('trailers', (headers: IncomingHttpHeaders, _flags: number, raw?: string[]) => {
    trailers = http2ResponseFields(raw ?? flatHeaders(headers))
  })
  stream.on('data', (chunk: Buffer) => {
    if (!over) events.data(chunk)
  })
  let ended = false
  stream.once('end', () => {
    ended = true
  })
  stream.once('error', (err: Error & { code?: string; cause?: unknown }) => {
    if (over) return
    over = true
    // A stream cancelled because its session never connected fails as that connection did (ECONNREFUSED, a TLS error).
    const cause = err.cause as (Error & { code?: unknown }) | undefined
    events.error(err.code === 'ERR_HTTP2_STREAM_CANCEL' && cause instanceof Error && typeof cause.code === 'string' ? cause : err)
  })
  // The end is known at the close: a stream reset after its last DATA frame still ends in 'end' first.
  stream.once('close', () => {
    if (over) return
    over = true
    const code = stream.rstCode ?? 0
    if (ended && code === 0) {
      events.end(trailers)
      return
    }
    const message = `Stream closed with error code ${http2ErrorName(code)}`
    events.error(new Error(message), { code: HTTP2_STREAM_ERROR, message })
  })
}

/** The request's stream: its pseudo-headers from the URL, ended at once when it has no body. */
function openStream(session: ClientHttp2Session, request: Http2LiveRequest): ClientHttp2Stream {
  const { url } = request
  return session.request(
    http2Fields(request.headers, {
      ':method': request.method,
      ':scheme': url.protocol.slice(0, -1),
      ':authority': url.host,
      ':path': `${url.pathname}${url.search}`,
    }),
    { endStream: request.body === null },
  )
}

/** Node's parsed header object as a raw list (for a Node that passes no raw list to the listener). */
function flatHeaders(headers: IncomingHttpHeaders): string[] {
  const out: string[] = []
  for (const [k, v] of Object.entries(headers)) {
    if (v === undefined) continue
    for (const one of Array.isArray(v) ? v : [v]) out.push(k, String(one))
  }
  return out
}
