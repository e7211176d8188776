/**
 * The part of HAR 1.2 (http://www.softwareishard.com/blog/har-12-spec/) Tool Replay reads and writes, plus
 * the custom fields Chrome DevTools and Playwright add and the one Tool Replay adds (`_toolReplay`).
 * Custom fields start with `_`, as the spec asks; readers ignore the ones they do not know.
 */

import type { ErrorPhase } from '../trace/index.ts'

/** A `{ name, value }` pair as HAR lists headers, query parameters and form fields. */
export interface HarNameValue {
  name: string
  value: string
}

/** A request body. `text` is the body as sent; `encoding: "base64"` is an extension some writers use. */
export interface HarPostData {
  mimeType: string
  text: string
  encoding?: 'base64'
  params?: HarNameValue[]
}

/** A response body. HAR keeps it decoded: `text` is what a browser handed the page, after Content-Encoding. */
export interface HarContent {
  /** Length of the decoded body in bytes. */
  size: number
  /** Bytes saved by Content-Encoding (decoded size minus wire size), when known. */
  compression?: number
  mimeType: string
  text?: string
  encoding?: 'base64'
}

/** HAR timings in ms; -1 (or absent) where a phase does not apply. `ssl` is part of `connect`. */
export interface HarTimings {
  blocked?: number
  dns?: number
  connect?: number
  ssl?: number
  send: number
  wait: number
  receive: number
}

/**
 * What Tool Replay keeps in an entry so a trace survives the trip through HAR exactly: the recorded
 * failure (HAR has only a free-text `_error`), response trailers, and the response body as it was on the
 * wire when Content-Encoding made it differ from the decoded `content.text`.
 */
export interface HarToolReplayFields {
  error?: { code: string; message: string; phase: ErrorPhase }
  trailers?: HarNameValue[]
  /** The response body bytes as on the wire (compressed), base64. */
  wireBody?: string
}

export interface HarRequest {
  method: string
  url: string
  httpVersion: string
  cookies: unknown[]
  headers: HarNameValue[]
  queryString: HarNameValue[]
  postData?: HarPostData
  headersSize: number
  bodySize: number
}

export interface HarResponse {
  status: number
  statusText: string
  httpVersion: string
  cookies: unknown[]
  headers: HarNameValue[]
  content: HarContent
  redirectURL: string
  headersSize: number
  bodySize: number
  /** Chrome DevTools: why the request failed ("net::ERR_CONNECTION_REFUSED"). */
  _error?: string
}

export interface HarEntry {
  startedDateTime: string
  time: number
  request: HarRequest
  response: HarResponse
  cache: Record<string, never>
  timings: HarTimings
  comment?: string
  _toolReplay?: HarToolReplayFields
}

export interface HarLog {
  version: string
  creator: { name: string; version: string; comment?: string }
  pages?: unknown[]
  entries: HarEntry[]
  comment?: string
}

/** A whole HAR document. */
export interface Har {
  log: HarLog
}

/** Upper bounds the HAR reader enforces, so a hostile file cannot make it allocate without limit. */
export interface HarLimits {
  /** Characters of HAR text. Default 256 Mi (V8 strings top out near 512 Mi). */
  maxTextLength: number
  /** Entries in `log.entries`. Default 100,000. */
  maxEntries: number
  /** Bytes of one decoded body (request or response). Default 64 MiB, the proxy's request-body limit. */
  maxBodyBytes: number
  /** Headers in one list. Default 1,000. */
  maxHeaders: number
  /** Characters of one header value or one URL. Default 64 Ki. */
  maxFieldLength: number
}

/** The limits used when none are given. */
export const DEFAULT_HAR_LIMITS: Readonly<HarLimits> = {
  maxTextLength: 256 * 1024 * 1024,
  maxEntries: 100_000,
  maxBodyBytes: 64 * 1024 * 1024,
  maxHeaders: 1000,
  maxFieldLength: 64 * 1024,
}
