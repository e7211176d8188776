/**
 * The export side of trace files: each exchange and body in its file form (see trace-file.ts), the whole
 * file as one text (exportTrace, for small traces and tests), and the file streamed to disk from any
 * source of exchanges (writeTraceFileFrom: a stored trace of any length).
 */
import { randomBytes } from 'node:crypto'
import { once } from 'node:events'
import { createWriteStream } from 'node:fs'
import { mkdir, open, rename, stat, unlink, writeFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import {
  type BodyRef,
  ErrorCodes,
  type Exchange,
  type HeaderPairs,
  headerValue,
  type Outcome,
  type RecordedResponse,
  sortKeysDeep,
  ToolReplayError,
  TRACE_FORMAT_VERSION,
  type Trace,
  type TraceMeta,
  type WebSocketSession,
} from '../trace/index.ts'
import { DigestIndex } from './digest-index.ts'
import {
  DEFAULT_INLINE_LIMIT,
  fileElement,
  fileFrame,
  formatJson,
  REF_VERSION,
  TRACE_FILE_FORMAT,
  TraceDigester,
  type TraceFileOptions,
  traceDigest,
} from './trace-file-format.ts'
import { Validator } from './trace-file-validator.ts'
import { bodyRefs, type TraceReader } from './trace-reader.ts'

type FileBody = {
  digest: string
  size: number
  chunks?: Array<{ size: number; atMs: number }>
  events?: Array<{ atMs: number; text: string }>
  text?: string
  base64?: string
  blob?: string
  ref?: string
}

/** A later occurrence of a body already in the file: digest, size and its own chunk timing. */
function refBody(ref: BodyRef): FileBody {
  return { digest: ref.digest, size: ref.size, chunks: ref.chunks.map((c) => ({ size: c.size, atMs: c.atMs })), ref: `sha256:${ref.digest}` }
}

function hasRef(x: Record<string, unknown>): boolean {
  const o = x.outcome as { response?: { body: FileBody }; error?: { partial?: { body: FileBody } } }
  const messages = (x.websocket as { messages: Array<{ body: FileBody }> } | undefined)?.messages ?? []
  const bodies = [(x.request as { body: FileBody | null }).body, o.response?.body, o.error?.partial?.body, ...messages.map((m) => m.body)]
  return bodies.some((b) => b?.ref !== undefined)
}

type FileResponse = Record<string, unknown>

function fileExchange(x: Exchange, body: (ref: BodyRef, headers: HeaderPairs, field: string) => FileBody): Record<string, unknown> {
  // Bodies are rendered in document order (request, then outcome), so a body's first occurrence in the
  // file is the one that holds its bytes.
  const requestBody = x.request.body ? body(x.request.body, x.request.headers, 'request.body') : null
  const response = (r: RecordedResponse, field: string): FileResponse => ({
    status: r.status,
    statusText: r.statusText,
    headers: r.headers.map(([k, val]) => [k, val]),
    trailers: r.trailers.map(([k, val]) => [k, val]),
    body: body(r.body, r.headers, `${field}.body`),
  })
  const fileOutcome = (o: Outcome, field: string) =>
    o.kind === 'response'
      ? { kind: 'response', response: response(o.response, `${field}.response`) }
      : {
          kind: 'error',
          error: {
            code: o.error.code,
            message: o.error.message,
            phase: o.error.phase,
            ...(o.error.partial ? { partial: response(o.error.partial, `${field}.error.partial`) } : {}),
          },
        }
  const outcome = fileOutcome(x.outcome, 'outcome')
  const f = x.fault
  const fault = f && {
    rule: f.rule,
    kind: f.kind,
    phase: f.phase,
    seed: f.seed,
    call: f.call,
    ...(f.key !== undefined ? { key: f.key } : {}),
    upstream: f.upstream ? fileOutcome(f.upstream, 'fault.upstream') : null,
    // A faulted WebSocket session: what the upstream sent (times, digests and sizes; plain values, kept as they are).
    ...(f.websocket ? { websocket: f.websocket } : {}),
  }
  return {
    seq: x.seq,
    ...(x.origin !== undefined ? { origin: x.origin } : {}),
    ...(x.patchId !== undefined ? { patchId: x.patchId } : {}),
    request: {
      method: x.request.method,
      url: x.request.url,
      headers: x.request.headers.map(([k, val]) => [k, val]),
      body: requestBody,
      ...(x.request.httpVersion ? { httpVersion: x.request.httpVersion } : {}),
    },
    outcome,
    // Only faulted exchanges carry the field, so files without faults keep their bytes and digest.
    ...(fault ? { fault } : {}),
    timing: { startMs: x.timing.startMs, headersMs: x.timing.headersMs },
    ...(x.websocket ? { websocket: fileWebSocket(x.websocket, body) } : {}),
  }
}

const TEXT_MESSAGE: HeaderPairs = [['content-type', 'text/plain; charset=utf-8']]
const BINARY_MESSAGE: HeaderPairs = [['content-type', 'application/octet-stream']]

/** A WebSocket session's messages, after the outcome in document order; text messages inline as text. */
function fileWebSocket(ws: WebSocketSession, body: (ref: BodyRef, headers: HeaderPairs, field: string) => FileBody): Record<string, unknown> {
  const messages = ws.messages.map((m, i) => ({
    from: m.from,
    opcode: m.opcode,
    atMs: m.atMs,
    ...(m.close ? { close: { code: m.close.code, reason: m.close.reason } } : {}),
    body: body(m.body, m.opcode === 'binary' ? BINARY_MESSAGE : TEXT_MESSAGE, `websocket.messages[${i}].body`),
  }))
  return { messages, ...(ws.end ? { end: { code: ws.end.code, message: ws.end.message, atMs: ws.end.atMs } } : {}) }
}

function fileBody(ref: BodyRef, bytes: Uint8Array, headers: HeaderPairs, limit: number, blobs: Map<string, Uint8Array>): FileBody {
  const head = { digest: ref.digest, size: ref.size }
  const chunks = ref.chunks.map((c) => ({ size: c.size, atMs: c.atMs }))
  const type = (headerValue(headers, 'content-type') ?? '').toLowerCase()
  const encoding = (headerValue(headers, 'content-encoding') ?? 'identity').toLowerCase().trim()
  const text = encoding === 'identity' && isTextType(type) ? exactUtf8(bytes) : undefined
  if (text !== undefined && type.startsWith('text/event-stream')) {
    const events = chunkTexts(bytes, ref)
    if (events) return { ...head, events }
  }
  if (text !== undefined) return { ...head, chunks, text }
  if (bytes.byteLength <= limit) return { ...head, chunks, base64: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64') }
  blobs.set(ref.digest, bytes)
  return { ...head, chunks, blob: `blobs/${ref.digest}` }
}

const TEXT_TYPE = /^(text\/|application\/([\w.+-]*\+)?(json|xml|javascript|ecmascript|x-www-form-urlencoded|graphql|yaml|x-ndjson|ndjson)\b)/

function isTextType(type: string): boolean {
  // No content-type: inline when the bytes happen to be UTF-8; most such bodies are small JSON or text.
  return type === '' || TEXT_TYPE.test(type)
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

/** UTF-8 text that encodes back to exactly these bytes, else undefined. */
function exactUtf8(bytes: Uint8Array): string | undefined {
  try {
    return strictUtf8.decode(bytes)
  } catch {
    return undefined
  }
}

/** Each chunk as text, when every chunk is whole UTF-8 and the chunks cover the body exactly. */
function chunkTexts(bytes: Uint8Array, ref: BodyRef): Array<{ atMs: number; text: string }> | undefined {
  const out: Array<{ atMs: number; text: string }> = []
  let offset = 0
  for (const c of ref.chunks) {
    // An empty chunk would vanish on the way back (sizes are implied by the text), so keep the exact form.
    if (c.size === 0) return undefined
    const text = exactUtf8(bytes.subarray(offset, offset + c.size))
    if (text === undefined) return undefined
    out.push({ atMs: c.atMs, text })
    offset += c.size
  }
  return offset === bytes.byteLength ? out : undefined
}

/** The model exchange for a file exchange, without touching body bytes. */
function modelExchange(x: Record<string, unknown>): Exchange {
  return new Validator('<export>').exchange(x, 'exchange', undefined)
}

/** The text of a trace file, the blob files it refers to, and its digest. */
export interface ExportedTrace {
  text: string
  /** sha256 -> bytes, to be written as `blobs/<sha256>` beside the file. */
  blobs: Map<string, Uint8Array>
  digest: string
}

/** Turns each exchange into its file form, writing each body's bytes at its first occurrence and a ref after. */
class FileExchanges {
  readonly #limit: number
  readonly #name: string
  // Digests whose bytes this file already holds, in the order a reader meets them (see fileExchange).
  readonly #written = new DigestIndex(0)
  refs = false

  constructor(name: string, options: TraceFileOptions) {
    this.#name = name
    this.#limit = options.inlineLimit ?? DEFAULT_INLINE_LIMIT
  }

  /** Refs of `x` whose bytes the file does not hold yet. */
  fresh(x: Exchange): Array<[BodyRef, string]> {
    return bodyRefs(x).filter(([ref]) => !this.#written.has(ref.digest))
  }

  /** `x` in file form; `bytes` holds at least the bodies `fresh(x)` named; bigger ones land in `blobs`. */
  render(x: Exchange, bytes: ReadonlyMap<string, Uint8Array>, blobs: Map<string, Uint8Array>): Record<string, unknown> {
    const out = fileExchange(x, (ref, headers, field) => {
      // Added here, where its bytes are written (a body missing from `bytes` fails the export).
      if (!this.#written.add(ref.digest)) {
        this.refs = true
        return refBody(ref)
      }
      const b = bytes.get(ref.digest)
      if (b === undefined) {
        throw new ToolReplayError(
          ErrorCodes.BODY_MISSING,
          `Cannot export trace "${this.#name}": exchanges[${x.seq}].${field} references body ${ref.digest}, which the trace does not contain. Re-record the trace.`,
        )
      }
      return fileBody(ref, b, headers, this.#limit, blobs)
    })
    return out
  }
}

/** Renders a trace as trace-file text plus the blobs too big to inline. */
export function exportTrace(trace: Trace, options: TraceFileOptions = {}): ExportedTrace {
  const blobs = new Map<string, Uint8Array>()
  const files = new FileExchanges(trace.meta.name, options)
  const exchanges = trace.exchanges.map((x) => files.render(x, trace.bodies, blobs))
  // The digest is taken over what a reader gets back, so fields this format does not carry cannot make
  // a freshly exported file fail its own check.
  const digest = traceDigest({ meta: trace.meta, exchanges: exchanges.map((x) => modelExchange(x)) })
  const version = exchanges.some(hasRef) ? REF_VERSION : TRACE_FORMAT_VERSION
  const file = { format: TRACE_FILE_FORMAT, version, digest, meta: sortKeysDeep(trace.meta), exchanges }
  return { text: `${formatJson(file)}\n`, blobs, digest }
}

/**
 * Where a streamed export gets a trace: its meta, its exchanges in order, and a body's verified bytes. Bodies
 * are asked for a window of exchanges after they were yielded (at most READ_AHEAD.exchanges of them).
 */
export interface TraceSource {
  meta: TraceMeta
  exchanges(): AsyncIterable<Exchange>
  /** A body's bytes; undefined when the trace does not hold it (the export fails naming the body). */
  body(ref: BodyRef, use: string): Promise<Uint8Array | undefined>
  /** The bytes of several bodies at once, by digest (instead of a `body` call each). */
  bodies?(wanted: ReadonlyArray<[BodyRef, string]>): Promise<Map<string, Uint8Array>>
  /** Ends what the source holds open; the writer calls it once it is done, failed or not. */
  close?(): Promise<void>
}

/** A trace in memory as a TraceSource. */
export function traceSource(trace: Trace): TraceSource {
  return {
    meta: trace.meta,
    exchanges: async function* () {
      yield* trace.exchanges
    },
    body: async (ref) => trace.bodies.get(ref.digest),
  }
}

/** A stored trace, opened for reading, as a TraceSource (exchanges a page at a time, bodies verified); `meta` replaces its meta. */
export function storedTraceSource(reader: TraceReader, meta: TraceMeta = reader.info.meta): TraceSource {
  return { meta, exchanges: () => reader.exchanges(), body: (ref, use) => reader.bodyBytes(ref, use) }
}

/** What writing a trace file did. */
export interface WrittenTraceFile {
  path: string
  digest: string
  /** Digests of the bodies written as `blobs/<digest>` beside the file. */
  blobs: string[]
  exchanges: number
}

/** Text is handed to the file in pieces of about this size. */
const WRITE_BATCH = 1024 * 1024

/**
 * Streams a trace file to `path`, an exchange at a time, and its blobs beside it; the bytes are exactly
 * exportTrace's. The file is written under a temp name and renamed over `path` (a reader never sees half a
 * file): its head first, with a placeholder digest and version (known only at the end, and the same length:
 * a SHA-256 in hex, one digit), then the exchanges and the tail, then the real head over the placeholder.
 * Memory holds one exchange and the digests already written.
 */
export async function writeTraceFileFrom(path: string, source: TraceSource, options: TraceFileOptions = {}): Promise<WrittenTraceFile> {
  const dir = dirname(path)
  const part = join(dir, `.${randomBytes(6).toString('hex')}.tmp`)
  const meta = sortKeysDeep(source.meta)
  const placeholder = fileFrame(TRACE_FORMAT_VERSION, '0'.repeat(64), meta)
  let out: TextSink | undefined
  try {
    await mkdir(dir, { recursive: true })
    const files = new FileExchanges(source.meta.name, options)
    const digester = new TraceDigester()
    const blobNames: string[] = []
    out = new TextSink(part)
    await out.write(placeholder.head)
    for await (const { x, bytes } of withBodies(source, files)) {
      const blobs = new Map<string, Uint8Array>()
      const fx = files.render(x, bytes, blobs)
      digester.add(modelExchange(fx))
      for (const [digest, b] of blobs) {
        await writeBlob(dir, digest, b)
        blobNames.push(digest)
      }
      await out.write(digester.count === 1 ? fileElement(fx) : `,\n${fileElement(fx)}`)
    }
    const digest = digester.digest(source.meta)
    const frame = fileFrame(files.refs ? REF_VERSION : TRACE_FORMAT_VERSION, digest, meta)
    if (digester.count === 0) {
      await out.abort()
      await writeAtomic(path, frame.empty)
    } else {
      await out.write(frame.tail)
      await out.close()
      if (Buffer.byteLength(frame.head) !== Buffer.byteLength(placeholder.head)) {
        throw new ToolReplayError(ErrorCodes.INTERNAL, `The head of ${path} changed length as it was written; nothing was written there. Report this as a bug.`)
      }
      await writeHead(part, frame.head)
      await rename(part, path)
    }
    return { path, digest, blobs: blobNames, exchanges: digester.count }
  } finally {
    await source.close?.()
    // The stream opens its file asynchronously: it must be closed before the unlink, or it creates the file after.
    await out?.abort()
    await unlink(part).catch(() => {})
  }
}

/** Writes `head` over the start of the file at `path`. */
async function writeHead(path: string, head: string): Promise<void> {
  const fh = await open(path, 'r+')
  try {
    const bytes = Buffer.from(head, 'utf8')
    for (let at = 0; at < bytes.byteLength; ) at += (await fh.write(bytes, at, bytes.byteLength - at, at)).bytesWritten
  } finally {
    await fh.close()
  }
}

/**
 * The digest a trace file of `source` would record (writeTraceFileFrom's, exportTrace's), taken a window of
 * exchanges at a time without writing the file: every body read (and verified by the source) as an export
 * reads it, memory bounded as an export's is.
 */
export async function traceFileDigest(source: TraceSource, options: TraceFileOptions = {}): Promise<string> {
  try {
    const files = new FileExchanges(source.meta.name, options)
    const digester = new TraceDigester()
    for await (const { x, bytes } of withBodies(source, files)) digester.add(modelExchange(files.render(x, bytes, new Map())))
    return digester.digest(source.meta)
  } finally {
    await source.close?.()
  }
}

/**
 * Exchanges fetched at once with the bytes of their bodies (a window), and how many windows are on their way
 * while one is written: with one, the writing thread and a body thread each waited on the other's slow moments
 * (200,000 exchanges: 12.1-18.1 s against 10.9-17.0 s with three, alternated, 4 of 5 pairs faster).
 */
const READ_AHEAD = { exchanges: 256, bytes: 8 * 1024 * 1024, windows: 3 }

/**
 * The source's exchanges, each with the bytes of the bodies the file does not hold yet. Bodies are asked
 * for a window of exchanges at a time, all at once, so the store's latencies overlap instead of adding up,
 * and later windows' are asked for before this one's exchanges are handed out, so a source that reads
 * elsewhere (a worker thread) reads them while these are written. A window stops at READ_AHEAD's count or
 * bytes, and windows are asked for ahead only while their bytes stay under READ_AHEAD's: memory holds
 * READ_AHEAD.windows + 1 windows of small bodies, or the window being written and the next one.
 */
async function* withBodies(source: TraceSource, files: FileExchanges): AsyncGenerator<{ x: Exchange; bytes: Map<string, Uint8Array> }> {
  let window: Exchange[] = []
  let wanted = new Map<string, [BodyRef, string]>()
  let size = 0
  // The windows whose bodies are on their way, oldest first: their exchanges, the digests each asked for (not
  // asked again) and their size; `inFlight` is the sum of those sizes.
  const ahead: Array<{ xs: Exchange[]; asked: ReadonlyMap<string, unknown>; size: number; bytes: Promise<Map<string, Uint8Array>> }> = []
  let inFlight = 0
  const fetch = (list: Array<[BodyRef, string]>): Promise<Map<string, Uint8Array>> => {
    if (source.bodies) return source.bodies(list)
    return Promise.all(list.map(([ref, use]) => source.body(ref, use))).then((got) => {
      const bytes = new Map<string, Uint8Array>()
      for (const [i, [ref]] of list.entries()) if (got[i] !== undefined) bytes.set(ref.digest, got[i] as Uint8Array)
      return bytes
    })
  }
  const shift = async function* (last: boolean) {
    if (window.length > 0) {
      const next = { xs: window, asked: wanted, size, bytes: fetch([...wanted.values()]) }
      // Settled later: a failure of a later window waits until the ones before it are written (the error in trace order).
      next.bytes.catch(() => {})
      ahead.push(next)
      inFlight += size
    }
    window = []
    wanted = new Map()
    size = 0
    // Windows wait their turn up to READ_AHEAD's count and bytes: a window of big bodies has only the next one beside it.
    while (ahead.length > (last ? 0 : READ_AHEAD.windows) || (ahead.length > 1 && inFlight > READ_AHEAD.bytes)) {
      const done = ahead.shift() as (typeof ahead)[number]
      inFlight -= done.size
      const bytes = await done.bytes
      for (const x of done.xs) yield { x, bytes }
    }
  }
  for await (const x of source.exchanges()) {
    window.push(x)
    for (const [ref, use] of files.fresh(x)) {
      if (wanted.has(ref.digest) || ahead.some((w) => w.asked.has(ref.digest))) continue
      wanted.set(ref.digest, [ref, use])
      size += ref.size
    }
    if (window.length >= READ_AHEAD.exchanges || size >= READ_AHEAD.bytes) yield* shift(false)
  }
  yield* shift(true)
}

/**
 * A file written through a stream in batches, waiting whenever the stream is full. Each text is encoded as it
 * comes: an exchange's text is a tree of the many small strings formatJson appended, and a batch of such
 * trees kept until the flush survived every young collection on the way (copied each time).
 */
class TextSink {
  readonly #stream
  #pending: Buffer[] = []
  #size = 0

  constructor(path: string) {
    this.#stream = createWriteStream(path)
  }

  async write(text: string): Promise<void> {
    const bytes = Buffer.from(text, 'utf8')
    this.#pending.push(bytes)
    this.#size += bytes.byteLength
    if (this.#size >= WRITE_BATCH) await this.#flush()
  }

  async #flush(): Promise<void> {
    const bytes = Buffer.concat(this.#pending, this.#size)
    this.#pending = []
    this.#size = 0
    if (!this.#stream.write(bytes)) await once(this.#stream, 'drain')
  }

  async close(): Promise<void> {
    await this.#flush()
    this.#stream.end()
    await once(this.#stream, 'finish')
  }

  /** Closes the file without waiting for what is pending (after a failure). */
  async abort(): Promise<void> {
    if (this.#stream.closed) return
    const closed = once(this.#stream, 'close')
    this.#stream.destroy()
    await closed
  }
}

/** A blob beside the file; content-addressed, so an existing one of the right size already holds these bytes. */
async function writeBlob(dir: string, digest: string, bytes: Uint8Array): Promise<void> {
  const blobPath = join(dir, 'blobs', digest)
  const existing = await stat(blobPath).catch(() => undefined)
  if (existing?.size === bytes.byteLength) return
  await mkdir(join(dir, 'blobs'), { recursive: true })
  await writeAtomic(blobPath, bytes)
}

async function writeAtomic(path: string, data: string | Uint8Array): Promise<void> {
  const tmp = join(dirname(path), `.${randomBytes(6).toString('hex')}.tmp`)
  try {
    await writeFile(tmp, data)
    await rename(tmp, path)
  } catch (err) {
    await unlink(tmp).catch(() => {})
    throw err
  }
}
