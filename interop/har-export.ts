/**
 * HAR 1.2 out: a Trace as a HAR document that DevTools, Playwright (`routeFromHAR`) and HAR viewers read.
 * Pure: no I/O, deterministic (the same trace gives the same text).
 *
 * - `content.text` is the decoded body, as HAR asks (Content-Encoding undone); text when it is exact UTF-8
 *   (or latin1 when the Content-Type says so), else base64. The headers stay as recorded, Content-Encoding
 *   included, so a HAR reader sees what the client saw on the wire.
 * - `_toolReplay` keeps what HAR has no field for, so `traceFromHar` gives the trace back: the recorded
 *   failure (code, message, phase), trailers, and the wire bytes of a body whose Content-Encoding made them
 *   differ from `content.text`.
 * - Times: a trace holds no wall-clock time, so `startedDateTime` is `startedAt` (default the Unix epoch)
 *   plus the exchange's `timing.startMs`; `timings.wait` is `headersMs` and `timings.receive` the time to
 *   the last body chunk after it.
 * - Request bodies are written as sent: text when exact UTF-8, else base64 with `encoding: "base64"` (an
 *   extension HAR 1.2 has only for responses; Tool Replay reads it back).
 */
import {
  type BodyRef,
  bodyBytes,
  decodeContentEncoding,
  type Exchange,
  type HeaderPairs,
  headerValue,
  type RecordedResponse,
  stringifyJson,
  type Trace,
} from '../trace/index.ts'
import type { Har, HarContent, HarEntry, HarNameValue, HarPostData, HarResponse, HarToolReplayFields } from './har-format.ts'

/** Options for `harFromTrace`. */
export interface HarExportOptions {
  /** Wall-clock time of the trace's start, ms since the epoch. Default 0, which keeps exports deterministic. */
  startedAt?: number
  /** Version written in `log.creator`. */
  creatorVersion?: string
}

/**
 * A trace as a HAR 1.2 document.
 * @example
 * await writeFile('checkout.har', formatHar(harFromTrace(trace)))
 */
export function harFromTrace(trace: Trace, options: HarExportOptions = {}): Har {
  const base = options.startedAt ?? 0
  return {
    log: {
      version: '1.2',
      creator: { name: 'tool-replay', version: options.creatorVersion ?? '0' },
      pages: [],
      entries: trace.exchanges.map((x) => harEntry(trace, x, base)),
      comment: `Exported by Tool Replay from trace ${JSON.stringify(trace.meta.name)}.`,
    },
  }
}

/** HAR text: 2-space JSON and a final newline, as DevTools writes it. */
export function formatHar(har: Har): string {
  return `${stringifyJson(har, 2)}\n`
}

function harEntry(trace: Trace, x: Exchange, base: number): HarEntry {
  const ours: HarToolReplayFields = {}
  const o = x.outcome
  const recorded = o.kind === 'response' ? o.response : o.error.partial
  let response: HarResponse
  if (recorded) response = harResponse(trace, recorded, ours)
  else response = failedResponse()
  if (o.kind === 'error') {
    response._error = o.error.code
    ours.error = { code: o.error.code, message: o.error.message, phase: o.error.phase }
  }
  const lastChunkMs = recorded?.body.chunks.at(-1)?.atMs ?? x.timing.headersMs
  const receive = Math.max(0, lastChunkMs - x.timing.headersMs)
  const entry: HarEntry = {
    startedDateTime: new Date(base + x.timing.startMs).toISOString(),
    time: x.timing.headersMs + receive,
    request: {
      method: x.request.method,
      url: x.request.url,
      httpVersion: 'HTTP/1.1',
      cookies: [],
      headers: nameValues(x.request.headers),
      queryString: queryString(x.request.url),
      ...(x.request.body ? { postData: postData(trace, x.request.body, x.request.headers) } : {}),
      headersSize: -1,
      bodySize: x.request.body?.size ?? 0,
    },
    response,
    cache: {},
    timings: { blocked: -1, dns: -1, connect: -1, send: 0, wait: x.timing.headersMs, receive },
  }
  if (Object.keys(ours).length > 0) entry._toolReplay = ours
  return entry
}

function harResponse(trace: Trace, r: RecordedResponse, ours: HarToolReplayFields): HarResponse {
  const wire = bodyBytes(trace, r.body)
  const encoding = headerValue(r.headers, 'content-encoding')
  const encoded = encoding !== undefined && encoding.trim() !== '' && encoding.trim().toLowerCase() !== 'identity'
  let decoded: Uint8Array | undefined = wire
  if (encoded) {
    try {
      decoded = decodeContentEncoding(wire, encoding)
    } catch {
      decoded = undefined // cut short mid-stream, or not what it says: the wire bytes below are all there is
    }
    ours.wireBody = base64(wire)
  }
  if (r.trailers.length > 0) ours.trailers = nameValues(r.trailers)
  const mimeType = headerValue(r.headers, 'content-type') ?? 'x-unknown'
  const content: HarContent = { size: decoded?.byteLength ?? 0, mimeType }
  if (decoded !== undefined) {
    if (encoded) content.compression = decoded.byteLength - wire.byteLength
    Object.assign(content, bodyText(decoded, mimeType))
  }
  return {
    status: r.status,
    statusText: r.statusText,
    httpVersion: 'HTTP/1.1',
    cookies: [],
    headers: nameValues(r.headers),
    content,
    redirectURL: headerValue(r.headers, 'location') ?? '',
    headersSize: -1,
    bodySize: wire.byteLength,
  }
}

/** The response of a request that got none: status 0, as DevTools writes a failed request. */
function failedResponse(): HarResponse {
  return {
    status: 0,
    statusText: '',
    httpVersion: '',
    cookies: [],
    headers: [],
    content: { size: 0, mimeType: 'x-unknown' },
    redirectURL: '',
    headersSize: -1,
    bodySize: 0,
  }
}

function postData(trace: Trace, ref: BodyRef, headers: HeaderPairs): HarPostData {
  const mimeType = headerValue(headers, 'content-type') ?? ''
  return { mimeType, ...bodyText(bodyBytes(trace, ref), mimeType) }
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

/** Body bytes as HAR text: the exact text when there is one, else base64. The reader mirrors this choice. */
function bodyText(bytes: Uint8Array, contentType: string): { text: string; encoding?: 'base64' } {
  if (/charset\s*=\s*"?(iso-8859-1|latin1|us-ascii)"?/i.test(contentType)) {
    // us-ascii bodies with high bytes are not ASCII; latin1 maps every byte, so the text is exact either way.
    return { text: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('latin1') }
  }
  try {
    return { text: strictUtf8.decode(bytes) }
  } catch {
    return { text: base64(bytes), encoding: 'base64' }
  }
}

function base64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64')
}

function nameValues(pairs: HeaderPairs): HarNameValue[] {
  return pairs.map(([name, value]) => ({ name, value }))
}

function queryString(url: string): HarNameValue[] {
  try {
    return [...new URL(url).searchParams].map(([name, value]) => ({ name, value }))
  } catch {
    return []
  }
}
