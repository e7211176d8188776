/**
 * HTTP/2 fields as the trace model keeps them, and back, for every path that speaks HTTP/2 (the proxy's h2
 * server, the in-process http2 capture, live forwards over node:http2). Pseudo-headers are never stored as
 * headers: `:method`, `:scheme`, `:authority` and `:path` become the request's method and URL, `:status` the
 * status, so an HTTP/2 request and the same HTTP/1.1 request have the same identity and a trace recorded
 * over one replays over the other. HTTP/2 has no status text and no connection-specific fields (RFC 9113
 * 8.2.2): those of an HTTP/1.1 recording are left out when it is answered over HTTP/2. Pure.
 */
import type { OutgoingHttpHeaders } from 'node:http2'
import { type HeaderPairs, stripHopByHop } from '../trace/index.ts'

/** A request's pseudo-headers and its other fields, from Node's raw list (`[name, value, ...]`). */
export interface Http2RequestFields {
  method: string
  scheme: string | undefined
  authority: string | undefined
  path: string | undefined
  /** The other fields in order, hop-by-hop ones left out (`te: trailers` kept: gRPC servers ask for it). */
  headers: HeaderPairs
}

/** Splits a raw HTTP/2 request field list into its pseudo-headers and its fields. */
export function http2RequestFields(raw: readonly string[]): Http2RequestFields {
  const out: Http2RequestFields = { method: 'GET', scheme: undefined, authority: undefined, path: undefined, headers: [] }
  let te: string | undefined
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i] as string
    const value = raw[i + 1] as string
    if (name === ':method') out.method = value
    else if (name === ':scheme') out.scheme = value
    else if (name === ':authority') out.authority = value
    else if (name === ':path') out.path = value
    else if (name.startsWith(':')) continue
    else {
      if (name === 'te') te = value
      out.headers.push([name, value])
    }
  }
  out.headers = stripHopByHop(out.headers)
  if (te !== undefined && te.trim().toLowerCase() === 'trailers') out.headers.push(['te', 'trailers'])
  // A host field next to :authority says the same thing (RFC 9113 8.3.1); the URL carries it.
  if (out.authority === undefined) {
    const host = out.headers.find(([k]) => k === 'host')
    if (host) out.authority = host[1]
  }
  return out
}

/** Fields Node refuses in an HTTP/2 message, and `host`, which :authority replaces. */
const NOT_IN_HTTP2 = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'http2-settings', 'host'])

/** Header pairs as the object node:http2 sends (`:status` or the request pseudo-headers added by the caller). */
export function http2Fields(pairs: HeaderPairs, base: OutgoingHttpHeaders = {}): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = base
  for (const [rawName, value] of pairs) {
    const name = rawName.toLowerCase()
    if (NOT_IN_HTTP2.has(name) || name.startsWith(':')) continue
    if (name === 'te' && value.trim().toLowerCase() !== 'trailers') continue
    const prior = out[name]
    if (prior === undefined) out[name] = value
    else if (SINGLE_VALUE.has(name)) continue
    else out[name] = Array.isArray(prior) ? [...prior, value] : [String(prior), value]
  }
  return out
}

/** Fields Node sends once only (ERR_HTTP2_HEADER_SINGLE_VALUE): a repeat keeps the first, as HTTP/1.1 clients read it. */
const SINGLE_VALUE = new Set([
  ':status',
  'access-control-allow-credentials',
  'access-control-max-age',
  'access-control-request-method',
  'age',
  'authorization',
  'content-encoding',
  'content-language',
  'content-length',
  'content-location',
  'content-md5',
  'content-range',
  'content-type',
  'date',
  'dnt',
  'etag',
  'expires',
  'from',
  'host',
  'if-match',
  'if-modified-since',
  'if-none-match',
  'if-range',
  'if-unmodified-since',
  'last-modified',
  'location',
  'max-forwards',
  'proxy-authorization',
  'range',
  'referer',
  'retry-after',
  'tk',
  'upgrade-insecure-requests',
  'user-agent',
  'x-content-type-options',
])

/** Response (or trailer) fields from Node's raw list, pseudo-headers left out. */
export function http2ResponseFields(raw: readonly string[] | undefined): HeaderPairs {
  const out: HeaderPairs = []
  if (!raw) return out
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i] as string
    if (!name.startsWith(':')) out.push([name, raw[i + 1] as string])
  }
  return out
}

/** HTTP/2 error codes (RFC 9113 7) by the names Node writes in its messages ("...with error code NGHTTP2_CANCEL"). */
const ERROR_NAMES = [
  'NGHTTP2_NO_ERROR',
  'NGHTTP2_PROTOCOL_ERROR',
  'NGHTTP2_INTERNAL_ERROR',
  'NGHTTP2_FLOW_CONTROL_ERROR',
  'NGHTTP2_SETTINGS_TIMEOUT',
  'NGHTTP2_STREAM_CLOSED',
  'NGHTTP2_FRAME_SIZE_ERROR',
  'NGHTTP2_REFUSED_STREAM',
  'NGHTTP2_CANCEL',
  'NGHTTP2_COMPRESSION_ERROR',
  'NGHTTP2_CONNECT_ERROR',
  'NGHTTP2_ENHANCE_YOUR_CALM',
  'NGHTTP2_INADEQUATE_SECURITY',
  'NGHTTP2_HTTP_1_1_REQUIRED',
] as const

/** INTERNAL_ERROR: what a stream is reset with when a recorded failure names no HTTP/2 code. */
export const HTTP2_INTERNAL_ERROR = 2

/** The HTTP/2 error code a recorded failure's message names (Node's wording), else INTERNAL_ERROR. */
export function http2ErrorCodeIn(message: string): number {
  const name = /\bNGHTTP2_[A-Z_0-9]+\b/.exec(message)?.[0]
  const code = name === undefined ? -1 : ERROR_NAMES.indexOf(name as (typeof ERROR_NAMES)[number])
  return code > 0 ? code : HTTP2_INTERNAL_ERROR
}

/** The name Node gives an HTTP/2 error code in its messages (`NGHTTP2_CANCEL`). */
export function http2ErrorName(code: number): string {
  return ERROR_NAMES[code] ?? `code ${code}`
}

/** The code a live HTTP/2 stream reset is recorded with (Node's own for a stream closed by an error code). */
export const HTTP2_STREAM_ERROR = 'ERR_HTTP2_STREAM_ERROR'

/** True for a recorded failure that an HTTP/2 client is answered with a stream reset (RST_STREAM) for. */
export function isHttp2Failure(code: string): boolean {
  return code.startsWith('ERR_HTTP2_')
}
