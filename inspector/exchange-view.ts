/**
 * One exchange in full for the page: headers, bodies decoded for reading (JSON as text for an exact-number
 * viewer, event streams as events with the chunk each ended in and when, binary as size + hex), the recorded
 * error and its phase, redaction markers, the fault with what the upstream really did, the LLM view beside
 * the raw HTTP, and the request as a curl command.
 */
import { REDACTED } from '../engine/index.ts'
import { bodyRefs, type TraceReader } from '../store/index.ts'
import {
  type BodyRef,
  decodeContentEncoding,
  type Exchange,
  formatGrpcBody,
  type GrpcMessageView,
  grpcMessageViews,
  type HeaderPairs,
  headerValue,
  isEventStream,
  isGrpcContentType,
  type LlmView,
  llmView,
  type McpView,
  mcpView,
  parseSse,
  type RecordedResponse,
  type Trace,
  tryUtf8,
} from '../trace/index.ts'
import { type WebSocketView, websocketView } from './websocket-session.ts'

/** Decoded text shown per body; more is cut (the raw body stays downloadable). */
export const BODY_TEXT_LIMIT = 1024 * 1024
const HEX_BYTES = 512
const EVENTS_LIMIT = 2000

/** A body as the page shows it. */
export interface BodyView {
  size: number
  digest: string
  chunks: Array<{ size: number; atMs: number }>
  contentType?: string
  encoding?: string
  kind: 'empty' | 'json' | 'sse' | 'text' | 'binary'
  text?: string
  /** The decoded text was longer than BODY_TEXT_LIMIT. */
  truncated?: boolean
  /** For an event stream: each event, the chunk its end arrived in and when (absent for a compressed stream). */
  events?: Array<{ event?: string; data: string; id?: string; chunk?: number; atMs?: number }>
  /** For binary: the first bytes in hex. */
  hex?: string
  /** For a gRPC body: its length-prefixed messages, each read (`text` lists them one a line). */
  grpc?: GrpcMessageView[]
}

/** A response head and body (or the partial one of a recorded error). */
export interface ResponseView {
  status: number
  statusText: string
  headers: HeaderPairs
  trailers?: HeaderPairs
  body: BodyView
}

/** The whole exchange for the page. */
export interface ExchangeView {
  seq: number
  request: { method: string; url: string; headers: HeaderPairs; body?: BodyView; httpVersion?: '2' }
  response?: ResponseView
  error?: { code: string; phase: string; message: string }
  timing: Exchange['timing']
  origin?: string
  patchId?: string
  fault?: Omit<NonNullable<Exchange['fault']>, 'upstream'> & {
    upstream: { response?: ResponseView; error?: { code: string; phase: string; message: string } } | null
  }
  llm?: LlmView
  /** An MCP message (over stdio or Streamable HTTP) read as a tool turn. */
  mcp?: McpView
  /** A WebSocket session: every message both ways. */
  websocket?: WebSocketView
  /** Where values were replaced by [REDACTED] before storing: "request header authorization", "url query key". */
  redacted: string[]
  curl: string
}

/** Reads one exchange and every body it references, and builds its view. */
export async function exchangeView(reader: TraceReader, seq: number): Promise<ExchangeView> {
  const x = await reader.exchange(seq)
  const bodies = new Map<string, Uint8Array>()
  for (const [ref, use] of bodyRefs(x)) if (!bodies.has(ref.digest)) bodies.set(ref.digest, await reader.bodyBytes(ref, use))
  const trace: Pick<Trace, 'meta' | 'bodies'> = { meta: reader.info.meta, bodies }
  const view: ExchangeView = {
    seq: x.seq,
    request: { method: x.request.method, url: x.request.url, headers: x.request.headers },
    timing: x.timing,
    redacted: redactedPlaces(x),
    curl: curlOf(x, x.request.body ? bodies.get(x.request.body.digest) : undefined),
  }
  if (x.request.body) view.request.body = bodyView(bodies, x.request.body, x.request.headers)
  if (x.request.httpVersion) view.request.httpVersion = x.request.httpVersion
  const head = x.outcome.kind === 'response' ? x.outcome.response : x.outcome.error.partial
  if (head) view.response = responseView(bodies, head)
  if (x.outcome.kind === 'error') view.error = { code: x.outcome.error.code, phase: x.outcome.error.phase, message: x.outcome.error.message }
  if (x.origin) view.origin = x.origin
  if (x.patchId) view.patchId = x.patchId
  if (x.fault) {
    const u = x.fault.upstream
    const { upstream: _u, ...rest } = x.fault
    const uHead = u && (u.kind === 'response' ? u.response : u.error.partial)
    view.fault = {
      ...rest,
      upstream:
        u === null
          ? null
          : {
              ...(uHead ? { response: responseView(bodies, uHead) } : {}),
              ...(u.kind === 'error' ? { error: { code: u.error.code, phase: u.error.phase, message: u.error.message } } : {}),
            },
    }
  }
  const ws = websocketView(bodies, x)
  if (ws) view.websocket = ws
  const v = llmView(trace, x)
  if (v) view.llm = v
  else {
    const m = mcpView(trace, x)
    if (m) view.mcp = m
  }
  return view
}

function responseView(bodies: ReadonlyMap<string, Uint8Array>, r: RecordedResponse): ResponseView {
  const out: ResponseView = { status: r.status, statusText: r.statusText, headers: r.headers, body: bodyView(bodies, r.body, r.headers) }
  if (r.trailers.length > 0) out.trailers = r.trailers
  return out
}

/** A body decoded for reading. */
export function bodyView(bodies: ReadonlyMap<string, Uint8Array>, ref: BodyRef, headers: HeaderPairs): BodyView {
  const raw = bodies.get(ref.digest) ?? new Uint8Array(0)
  const contentType = headerValue(headers, 'content-type')
  const encoding = headerValue(headers, 'content-encoding')
  const v: BodyView = { size: ref.size, digest: ref.digest, chunks: ref.chunks, kind: 'empty' }
  if (contentType) v.contentType = contentType
  if (encoding) v.encoding = encoding
  if (raw.byteLength === 0) return v
  let decoded = raw
  try {
    decoded = encoding ? decodeContentEncoding(raw, encoding) : raw
  } catch {
    decoded = raw
  }
  if (isGrpcContentType(contentType)) {
    v.kind = 'text'
    v.grpc = grpcMessageViews(decoded, headers).slice(0, EVENTS_LIMIT)
    v.text = formatGrpcBody(decoded, headers)
    return v
  }
  const text = tryUtf8(decoded)
  if (text === undefined) {
    v.kind = 'binary'
    v.hex = Buffer.from(decoded.subarray(0, HEX_BYTES)).toString('hex')
    return v
  }
  v.text = text.length > BODY_TEXT_LIMIT ? text.slice(0, BODY_TEXT_LIMIT) : text
  if (text.length > BODY_TEXT_LIMIT) v.truncated = true
  if (isEventStream(contentType)) {
    v.kind = 'sse'
    v.events = eventsWithChunks(text, ref, decoded === raw)
  } else if (/json/i.test(contentType ?? '') || /^\s*[[{]/.test(text)) v.kind = 'json'
  else v.kind = 'text'
  return v
}

/**
 * Each event of a stream with the chunk its last byte arrived in and that chunk's time. Only for a stream
 * stored as sent (chunk boundaries count the bytes on the wire, so a compressed stream has no such map).
 */
function eventsWithChunks(text: string, ref: BodyRef, plain: boolean): BodyView['events'] {
  const ends: number[] = []
  const re = /\r\n\r\n|\n\n|\r\r/g
  const blocks: string[] = []
  let last = 0
  for (let m = re.exec(text); m !== null && blocks.length < EVENTS_LIMIT; m = re.exec(text)) {
    blocks.push(text.slice(last, m.index + m[0].length))
    last = m.index + m[0].length
    ends.push(Buffer.byteLength(text.slice(0, last)))
  }
  if (last < text.length && blocks.length < EVENTS_LIMIT) {
    blocks.push(text.slice(last))
    ends.push(Buffer.byteLength(text))
  }
  const bounds: number[] = []
  let sum = 0
  for (const c of ref.chunks) bounds.push((sum += c.size))
  const out: NonNullable<BodyView['events']> = []
  blocks.forEach((block, i) => {
    for (const e of parseSse(block.endsWith('\n') || block.endsWith('\r') ? block : `${block}\n\n`)) {
      const item: NonNullable<BodyView['events']>[number] = { data: e.data }
      if (e.event !== undefined) item.event = e.event
      if (e.id !== undefined) item.id = e.id
      if (plain && bounds.length > 0) {
        const end = ends[i] as number
        const chunk = bounds.findIndex((b) => b >= end)
        if (chunk >= 0) {
          item.chunk = chunk
          item.atMs = (ref.chunks[chunk] as { atMs: number }).atMs
        }
      }
      out.push(item)
    }
  })
  return out
}

/** Where redaction replaced a value before the exchange was stored. */
function redactedPlaces(x: Exchange): string[] {
  const out: string[] = []
  for (const [k, v] of x.request.headers) if (v.includes(REDACTED)) out.push(`request header ${k.toLowerCase()}`)
  try {
    for (const [k, v] of new URL(x.request.url).searchParams) if (v === REDACTED) out.push(`url query ${k}`)
  } catch {
    // not a URL the page can read; nothing to mark
  }
  const head = x.outcome.kind === 'response' ? x.outcome.response : x.outcome.error.partial
  for (const [k, v] of head?.headers ?? []) if (v.includes(REDACTED)) out.push(`response header ${k.toLowerCase()}`)
  return out
}

const CURL_BODY_LIMIT = 64 * 1024
const quote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`

/** The request as a curl command (redacted values stay [REDACTED]: fill them in before running it). */
export function curlOf(x: Exchange, body: Uint8Array | undefined): string {
  const parts = ['curl', '-X', x.request.method.toUpperCase(), quote(x.request.url)]
  for (const [k, v] of x.request.headers) {
    if (/^(content-length|host|connection|transfer-encoding)$/i.test(k)) continue
    parts.push('-H', quote(`${k}: ${v}`))
  }
  if (body && body.byteLength > 0) {
    const utf8 = body.byteLength <= CURL_BODY_LIMIT && !headerValue(x.request.headers, 'content-encoding') ? tryUtf8(body) : undefined
    // Control bytes (a gRPC message's length prefix) would not survive a terminal's paste: a file instead.
    // biome-ignore lint/suspicious/noControlCharactersInRegex: the control characters are what is looked for
    const text = utf8 !== undefined && !/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/.test(utf8) ? utf8 : undefined
    parts.push('--data-binary', text !== undefined ? quote(text) : `@body-${x.seq}.bin  # ${body.byteLength} bytes: save the request body from the page`)
  }
  return parts.join(' ')
}
