/**
 * Portable trace files: deterministic, reviewable JSON to commit and share (`tr-proxy export/import`).
 *
 * Layout: 2-space JSON, fixed key order, one object per exchange, headers as [name, value] pairs and
 * no timestamps, so re-exporting an unchanged trace gives the same bytes and diffs show real changes.
 * Bodies sit inline in the most readable form that is still exact:
 *   "text"    UTF-8 text of a text-like, uncompressed body
 *   "events"  an event stream (text/event-stream) as its chunks, [{ atMs, text }], so timing is visible
 *   "base64"  other bodies up to `inlineLimit` bytes
 *   "blob"    bigger ones, as `blobs/<sha256>` next to the file (content-addressed, shared by traces)
 *   "ref"     "sha256:<digest>": the same bytes as an earlier body of this file with that digest. A body
 *             is written out once per file; every later occurrence (a retried request, 2000 polls that got
 *             the same answer) keeps only its digest, size and chunk timing. Files with a ref say
 *             `"version": 2`, so an older Tool Replay refuses them by version instead of by field.
 * Each body keeps its sha256 and the file keeps `digest` (traceDigest), so an edit anywhere is detected.
 * Import also checks every exchange against trace/validate.ts (statuses, header syntax, framing).
 */
import { randomBytes } from 'node:crypto'
import { mkdir, readFile, rename, stat, unlink, writeFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import {
  type AppRun,
  appRunProblem,
  type BodyRef,
  canonicalJson,
  ErrorCodes,
  type Exchange,
  type ExchangeFault,
  exchangeProblem,
  FAULT_KINDS,
  FAULT_PHASES,
  type HeaderPairs,
  headerValue,
  type Outcome,
  parseJson,
  type RecordedResponse,
  sha256,
  sortKeysDeep,
  ToolReplayError,
  TRACE_FORMAT_VERSION,
  type Trace,
  type TraceMeta,
  type WebSocketMessage,
  type WebSocketSession,
} from '../trace/index.ts'

/** The `format` field of every trace file. */
export const TRACE_FILE_FORMAT = 'tool-replay-trace'

/**
 * File versions this reader accepts: 1, and 2 (1 plus `ref` bodies). A writer emits 2 only for a file that
 * holds a ref, so a file without repeated bodies stays byte-identical to what version-1 writers produced.
 */
export const TRACE_FILE_VERSIONS: readonly number[] = [1, 2]
const REF_VERSION = 2

/** Binary bodies up to this many bytes are inlined as base64; bigger ones go to `blobs/`. */
export const DEFAULT_INLINE_LIMIT = 64 * 1024

/** Options for exporting a trace file. */
export interface TraceFileOptions {
  /** Largest binary body inlined as base64, in bytes. Default 64 KiB. */
  inlineLimit?: number
}

/** The text of a trace file, the blob files it refers to, and its digest. */
export interface ExportedTrace {
  text: string
  /** sha256 -> bytes, to be written as `blobs/<sha256>` beside the file. */
  blobs: Map<string, Uint8Array>
  digest: string
}

/**
 * SHA-256 of a trace's canonical JSON (meta and exchanges), independent of any file formatting.
 * Bodies count through the sha256 each BodyRef holds; forks record it as `lineage.sourceDigest`.
 */
export function traceDigest(trace: Pick<Trace, 'meta' | 'exchanges'>): string {
  return sha256(canonicalJson({ format: TRACE_FORMAT_VERSION, meta: trace.meta, exchanges: trace.exchanges }))
}

/** Renders a trace as trace-file text plus the blobs too big to inline. */
export function exportTrace(trace: Trace, options: TraceFileOptions = {}): ExportedTrace {
  const limit = options.inlineLimit ?? DEFAULT_INLINE_LIMIT
  const blobs = new Map<string, Uint8Array>()
  // Digests whose bytes this file already holds, in the order a reader meets them (see fileExchange).
  const written = new Set<string>()
  const body = (ref: BodyRef, headers: HeaderPairs, where: string): FileBody => {
    if (written.has(ref.digest)) return refBody(ref)
    const bytes = trace.bodies.get(ref.digest)
    if (bytes === undefined) {
      throw new ToolReplayError(
        ErrorCodes.BODY_MISSING,
        `Cannot export trace "${trace.meta.name}": ${where} references body ${ref.digest}, which the trace does not contain. Re-record the trace.`,
      )
    }
    written.add(ref.digest)
    return fileBody(ref, bytes, headers, limit, blobs)
  }
  const exchanges = trace.exchanges.map((x) => fileExchange(x, (ref, headers, field) => body(ref, headers, `exchanges[${x.seq}].${field}`)))
  // The digest is taken over what a reader gets back, so fields this format does not carry cannot make
  // a freshly exported file fail its own check.
  const digest = traceDigest({ meta: trace.meta, exchanges: exchanges.map((x) => modelExchange(x)) })
  const version = exchanges.some(hasRef) ? REF_VERSION : TRACE_FORMAT_VERSION
  const file = { format: TRACE_FILE_FORMAT, version, digest, meta: sortKeysDeep(trace.meta), exchanges }
  return { text: `${formatJson(file)}\n`, blobs, digest }
}

/**
 * Writes a trace file and its blobs; each file is written to a temp name and renamed, so a reader never
 * sees half a file.
 */
export async function writeTraceFile(path: string, trace: Trace, options: TraceFileOptions = {}): Promise<{ path: string; digest: string; blobs: string[] }> {
  const out = exportTrace(trace, options)
  try {
    await mkdir(dirname(path), { recursive: true })
    if (out.blobs.size > 0) await mkdir(join(dirname(path), 'blobs'), { recursive: true })
    for (const [digest, bytes] of out.blobs) {
      const blobPath = join(dirname(path), 'blobs', digest)
      // Content-addressed: an existing blob of the right size already holds these bytes.
      const existing = await stat(blobPath).catch(() => undefined)
      if (existing?.size !== bytes.byteLength) await writeAtomic(blobPath, bytes)
    }
    await writeAtomic(path, out.text)
  } catch (err) {
    throw new ToolReplayError(
      ErrorCodes.STORE_IO,
      `Failed to write trace file ${path}: ${(err as Error).message}. Check the directory exists and is writable.`,
      {
        cause: err,
      },
    )
  }
  return { path, digest: out.digest, blobs: [...out.blobs.keys()] }
}

/** Reads and fully verifies a trace file and the blobs it refers to. */
export async function readTraceFile(path: string): Promise<Trace> {
  let text: string
  try {
    text = await readFile(path, 'utf8')
  } catch (err) {
    throw new ToolReplayError(ErrorCodes.TRACE_FILE_INVALID, `Failed to read trace file ${path}: ${(err as Error).message}. Check the path.`, { cause: err })
  }
  const blobs = new Map<string, Uint8Array>()
  for (const digest of traceFileBlobDigests(text)) {
    const bytes = await readFile(join(dirname(path), 'blobs', digest)).catch(() => undefined)
    if (bytes) blobs.set(digest, new Uint8Array(bytes))
  }
  return parseTraceFile(text, blobs, { file: path })
}

/**
 * Parses trace-file text strictly: schema, every body's sha256, and the trace digest.
 * Throws TR_TRACE_FILE_INVALID or TR_TRACE_DIGEST_MISMATCH naming the file and the field.
 */
export function parseTraceFile(text: string, blobs: ReadonlyMap<string, Uint8Array> = new Map(), options: { file?: string } = {}): Trace {
  const file = options.file ?? '<trace file>'
  const v = new Validator(file)
  let raw: unknown
  try {
    raw = parseJson(text)
  } catch (err) {
    v.fail('(top level)', `is not valid JSON (${(err as Error).message})`)
  }
  const top = v.object(raw, '', ['format', 'version', 'digest', 'meta', 'exchanges'])
  if (top.format !== TRACE_FILE_FORMAT) v.fail('format', `must be "${TRACE_FILE_FORMAT}"`)
  if (!TRACE_FILE_VERSIONS.includes(top.version as number)) {
    v.fail(
      'version',
      `is ${JSON.stringify(top.version)}; this Tool Replay reads versions ${TRACE_FILE_VERSIONS.join(' and ')} (a newer Tool Replay wrote this file?)`,
    )
  }
  v.refsAllowed = top.version === REF_VERSION
  const digest = v.digestString(top.digest, 'digest')
  const meta = v.meta(top.meta)
  const bodies = new Map<string, Uint8Array>()
  const exchanges = v.array(top.exchanges, 'exchanges').map((x, i) => v.exchange(x, `exchanges[${i}]`, blobs, bodies))
  const actual = traceDigest({ meta, exchanges })
  if (actual !== digest) {
    throw new ToolReplayError(
      ErrorCodes.TRACE_DIGEST_MISMATCH,
      `Trace file ${file} was changed after export: its content hashes to ${actual}, not the recorded digest ${digest}. Re-export it with \`tr-proxy export\`, or, for a deliberate edit, use \`tr-proxy fork\`.`,
      { details: { file, expected: digest, actual } },
    )
  }
  // Valid by construction: what passes here replays on both capture paths without crashing or hanging.
  const seqs = new Set<number>()
  exchanges.forEach((x, i) => {
    const found = exchangeProblem(x, bodies)
    if (found) v.fail(`exchanges[${i}].${found.path}`, found.problem)
    if (seqs.has(x.seq)) v.fail(`exchanges[${i}].seq`, `repeats seq ${x.seq}; every exchange of a trace has its own`)
    seqs.add(x.seq)
  })
  return { meta, exchanges, bodies }
}

// --- export side ---

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
  return new Validator('<export>').exchange(x, 'exchange', undefined, undefined)
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

/** Digests of the blob files a trace file names, found without validating it (that comes after). */
/** The digests of the bodies a trace file keeps in `blobs/` beside it (what to fetch or copy along with the file). */
export function traceFileBlobDigests(text: string): Set<string> {
  const out = new Set<string>()
  for (const m of text.matchAll(/"blob": "blobs\/([0-9a-f]{64})"/g)) out.add(m[1] as string)
  return out
}

// --- parse side ---

const DIGEST = /^[0-9a-f]{64}$/
const PHASES = new Set(['connect', 'request', 'response-headers', 'response-body'])
const ORIGINS = new Set(['recorded', 'patched', 'live'])

/** Strict reader of a parsed trace file; every failure names the file and the field. */
class Validator {
  readonly #file: string
  /** Version 2 files may hold `ref` bodies. */
  refsAllowed = true
  constructor(file: string) {
    this.#file = file
  }

  fail(path: string, problem: string): never {
    throw new ToolReplayError(
      ErrorCodes.TRACE_FILE_INVALID,
      `Trace file ${this.#file} is invalid: ${path || '(top level)'} ${problem}. Re-export it with \`tr-proxy export\`, or fix that field.`,
      { details: { file: this.#file, field: path } },
    )
  }

  object(v: unknown, path: string, required: string[], optional: string[] = []): Record<string, unknown> {
    if (v === null || typeof v !== 'object' || Array.isArray(v)) this.fail(path, 'must be an object')
    const o = v as Record<string, unknown>
    for (const k of required) if (!(k in o)) this.fail(join2(path, k), 'is missing')
    for (const k of Object.keys(o)) if (!required.includes(k) && !optional.includes(k)) this.fail(join2(path, k), 'is not a known field')
    return o
  }

  array(v: unknown, path: string): unknown[] {
    if (!Array.isArray(v)) this.fail(path, 'must be an array')
    return v
  }

  string(v: unknown, path: string): string {
    if (typeof v !== 'string') this.fail(path, 'must be a string')
    return v
  }

  digestString(v: unknown, path: string): string {
    const s = this.string(v, path)
    if (!DIGEST.test(s)) this.fail(path, 'must be a lowercase hex sha256')
    return s
  }

  int(v: unknown, path: string): number {
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) this.fail(path, 'must be an integer >= 0')
    return v
  }

  number(v: unknown, path: string): number {
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) this.fail(path, 'must be a number >= 0')
    return v
  }

  headers(v: unknown, path: string): HeaderPairs {
    return this.array(v, path).map((pair, i) => {
      const p = this.array(pair, `${path}[${i}]`)
      if (p.length !== 2) this.fail(`${path}[${i}]`, 'must be a [name, value] pair')
      return [this.string(p[0], `${path}[${i}][0]`), this.string(p[1], `${path}[${i}][1]`)]
    })
  }

  meta(v: unknown): TraceMeta {
    const o = this.object(v, 'meta', ['name', 'format'], ['lineage', 'labels', 'app'])
    const meta: TraceMeta = { name: this.string(o.name, 'meta.name'), format: TRACE_FORMAT_VERSION }
    if (o.format !== TRACE_FORMAT_VERSION) this.fail('meta.format', `must be ${TRACE_FORMAT_VERSION}`)
    if (o.labels !== undefined) {
      const labels = this.object(o.labels, 'meta.labels', [], Object.keys(typeof o.labels === 'object' && o.labels !== null ? o.labels : {}))
      meta.labels = Object.fromEntries(Object.entries(labels).map(([k, val]) => [k, this.string(val, `meta.labels.${k}`)]))
    }
    if (o.lineage !== undefined) {
      const l = this.object(o.lineage, 'meta.lineage', ['sourceDigest', 'patches'], ['sourceName'])
      meta.lineage = {
        sourceDigest: this.string(l.sourceDigest, 'meta.lineage.sourceDigest'),
        ...(l.sourceName !== undefined ? { sourceName: this.string(l.sourceName, 'meta.lineage.sourceName') } : {}),
        patches: this.array(l.patches, 'meta.lineage.patches').map((p, i) => {
          const po = this.object(p, `meta.lineage.patches[${i}]`, ['id', 'spec'])
          return { id: this.string(po.id, `meta.lineage.patches[${i}].id`), spec: this.string(po.spec, `meta.lineage.patches[${i}].spec`) }
        }),
      }
    }
    if (o.app !== undefined) {
      const found = appRunProblem(o.app)
      if (found) this.fail(found.path, found.problem)
      meta.app = o.app as AppRun
    }
    return sortKeysDeep(meta) as TraceMeta
  }

  /** With `bodies` undefined only the refs are read (export's digest); otherwise bytes are decoded and verified. */
  exchange(v: unknown, path: string, blobs: ReadonlyMap<string, Uint8Array> | undefined, bodies: Map<string, Uint8Array> | undefined): Exchange {
    const o = this.object(v, path, ['seq', 'request', 'outcome', 'timing'], ['origin', 'patchId', 'fault', 'websocket'])
    const req = this.object(o.request, `${path}.request`, ['method', 'url', 'headers', 'body'])
    const body = (b: unknown, p: string) => this.body(b, p, blobs, bodies)
    const x: Exchange = {
      seq: this.int(o.seq, `${path}.seq`),
      request: {
        method: this.string(req.method, `${path}.request.method`),
        url: this.string(req.url, `${path}.request.url`),
        headers: this.headers(req.headers, `${path}.request.headers`),
        body: req.body === null ? null : body(req.body, `${path}.request.body`),
      },
      outcome: this.outcome(o.outcome, `${path}.outcome`, body),
      timing: (() => {
        const t = this.object(o.timing, `${path}.timing`, ['startMs', 'headersMs'])
        return { startMs: this.number(t.startMs, `${path}.timing.startMs`), headersMs: this.number(t.headersMs, `${path}.timing.headersMs`) }
      })(),
    }
    if (o.origin !== undefined) {
      if (!ORIGINS.has(o.origin as string)) this.fail(`${path}.origin`, 'must be "recorded", "patched" or "live"')
      x.origin = o.origin as Exchange['origin'] & string
    }
    if (o.patchId !== undefined) x.patchId = this.string(o.patchId, `${path}.patchId`)
    if (o.fault !== undefined) x.fault = this.fault(o.fault, `${path}.fault`, body)
    if (o.websocket !== undefined) x.websocket = this.websocket(o.websocket, `${path}.websocket`, body)
    return x
  }

  /** A WebSocket session's shape; its rules (order, opcodes, close codes) are trace/validate.ts's, checked after. */
  websocket(v: unknown, path: string, body: (b: unknown, p: string) => BodyRef): WebSocketSession {
    const o = this.object(v, path, ['messages'], ['end'])
    const messages = this.array(o.messages, `${path}.messages`).map((m, i): WebSocketMessage => {
      const p = `${path}.messages[${i}]`
      const f = this.object(m, p, ['from', 'opcode', 'atMs', 'body'], ['close'])
      const message: WebSocketMessage = {
        from: this.string(f.from, `${p}.from`) as WebSocketMessage['from'],
        opcode: this.string(f.opcode, `${p}.opcode`) as WebSocketMessage['opcode'],
        atMs: this.number(f.atMs, `${p}.atMs`),
        body: body(f.body, `${p}.body`),
      }
      if (f.close !== undefined) {
        const c = this.object(f.close, `${p}.close`, ['code', 'reason'])
        message.close = { code: this.int(c.code, `${p}.close.code`), reason: this.string(c.reason, `${p}.close.reason`) }
      }
      return message
    })
    if (o.end === undefined) return { messages }
    const e = this.object(o.end, `${path}.end`, ['code', 'message', 'atMs'])
    return {
      messages,
      end: {
        code: this.string(e.code, `${path}.end.code`),
        message: this.string(e.message, `${path}.end.message`),
        atMs: this.number(e.atMs, `${path}.end.atMs`),
      },
    }
  }

  fault(v: unknown, path: string, body: (b: unknown, p: string) => BodyRef): ExchangeFault {
    const o = this.object(v, path, ['rule', 'kind', 'phase', 'seed', 'call', 'upstream'], ['key'])
    if (!(FAULT_KINDS as readonly unknown[]).includes(o.kind)) this.fail(`${path}.kind`, `must be one of ${FAULT_KINDS.join(', ')}`)
    if (!(FAULT_PHASES as readonly unknown[]).includes(o.phase)) this.fail(`${path}.phase`, `must be one of ${FAULT_PHASES.join(', ')}`)
    const call = this.int(o.call, `${path}.call`)
    if (call < 1) this.fail(`${path}.call`, 'must be >= 1')
    return {
      rule: this.string(o.rule, `${path}.rule`),
      kind: o.kind as ExchangeFault['kind'],
      phase: o.phase as ExchangeFault['phase'],
      seed: this.string(o.seed, `${path}.seed`),
      call,
      ...(o.key !== undefined ? { key: this.string(o.key, `${path}.key`) } : {}),
      upstream: o.upstream === null ? null : this.outcome(o.upstream, `${path}.upstream`, body),
    }
  }

  outcome(v: unknown, path: string, body: (b: unknown, p: string) => BodyRef): Exchange['outcome'] {
    const kind = (v as { kind?: unknown } | null)?.kind
    if (kind === 'response') {
      const o = this.object(v, path, ['kind', 'response'])
      return { kind: 'response', response: this.response(o.response, `${path}.response`, body) }
    }
    if (kind !== 'error') this.fail(`${path}.kind`, 'must be "response" or "error"')
    const o = this.object(v, path, ['kind', 'error'])
    const e = this.object(o.error, `${path}.error`, ['code', 'message', 'phase'], ['partial'])
    if (!PHASES.has(e.phase as string)) this.fail(`${path}.error.phase`, `must be one of ${[...PHASES].join(', ')}`)
    return {
      kind: 'error',
      error: {
        code: this.string(e.code, `${path}.error.code`),
        message: this.string(e.message, `${path}.error.message`),
        phase: e.phase as 'connect',
        ...(e.partial !== undefined ? { partial: this.response(e.partial, `${path}.error.partial`, body) } : {}),
      },
    }
  }

  response(v: unknown, path: string, body: (b: unknown, p: string) => BodyRef): RecordedResponse {
    const o = this.object(v, path, ['status', 'statusText', 'headers', 'trailers', 'body'])
    const status = this.int(o.status, `${path}.status`)
    if (status < 100 || status > 999) this.fail(`${path}.status`, 'must be an HTTP status (100-999)')
    return {
      status,
      statusText: this.string(o.statusText, `${path}.statusText`),
      headers: this.headers(o.headers, `${path}.headers`),
      trailers: this.headers(o.trailers, `${path}.trailers`),
      body: body(o.body, `${path}.body`),
    }
  }

  body(v: unknown, path: string, blobs: ReadonlyMap<string, Uint8Array> | undefined, bodies: Map<string, Uint8Array> | undefined): BodyRef {
    const forms = ['text', 'events', 'base64', 'blob', 'ref']
    const raw = v as Record<string, unknown> | null
    const form = forms.filter((f) => raw !== null && typeof raw === 'object' && f in raw)
    if (form.length !== 1) this.fail(path, `must have exactly one of ${forms.map((f) => `"${f}"`).join(', ')}`)
    const kind = form[0] as string
    if (kind === 'ref' && !this.refsAllowed) this.fail(`${path}.ref`, `is a version ${REF_VERSION} form, but the file says version 1`)
    const o = this.object(v, path, kind === 'events' ? ['digest', 'size', 'events'] : ['digest', 'size', 'chunks', kind])
    const digest = this.digestString(o.digest, `${path}.digest`)
    const size = this.int(o.size, `${path}.size`)
    let chunks: BodyRef['chunks']
    let bytes: Uint8Array | undefined
    const decode = bodies !== undefined
    if (kind === 'events') {
      const parts = this.array(o.events, `${path}.events`).map((e, i) => {
        const eo = this.object(e, `${path}.events[${i}]`, ['atMs', 'text'])
        const bytes = Buffer.from(this.string(eo.text, `${path}.events[${i}].text`), 'utf8')
        if (bytes.byteLength === 0) this.fail(`${path}.events[${i}].text`, 'must not be empty')
        return { atMs: this.number(eo.atMs, `${path}.events[${i}].atMs`), bytes }
      })
      chunks = parts.map((p) => ({ size: p.bytes.byteLength, atMs: p.atMs }))
      if (decode) bytes = new Uint8Array(Buffer.concat(parts.map((p) => p.bytes)))
    } else {
      chunks = this.array(o.chunks, `${path}.chunks`).map((c, i) => {
        const co = this.object(c, `${path}.chunks[${i}]`, ['size', 'atMs'])
        return { size: this.int(co.size, `${path}.chunks[${i}].size`), atMs: this.number(co.atMs, `${path}.chunks[${i}].atMs`) }
      })
      if (decode) {
        if (kind === 'text') bytes = new Uint8Array(Buffer.from(this.string(o.text, `${path}.text`), 'utf8'))
        else if (kind === 'base64') {
          const b64 = this.string(o.base64, `${path}.base64`)
          bytes = new Uint8Array(Buffer.from(b64, 'base64'))
          // Buffer.from skips junk silently; insisting on the canonical form keeps re-export byte-identical.
          if (Buffer.from(bytes).toString('base64') !== b64) this.fail(`${path}.base64`, 'is not canonical base64')
        } else if (kind === 'ref') {
          if (this.string(o.ref, `${path}.ref`) !== `sha256:${digest}`) this.fail(`${path}.ref`, `must be "sha256:${digest}"`)
          const earlier = bodies?.get(digest)
          if (earlier === undefined) this.fail(`${path}.ref`, `refers to body sha256:${digest}, which no earlier body in this file holds`)
          if (earlier.byteLength !== size) this.fail(`${path}.size`, `is ${size}, but the earlier body sha256:${digest} has ${earlier.byteLength} bytes`)
          // Already hashed where its bytes were read: a ref costs no second pass over them.
          bytes = undefined
        } else {
          const ref = this.string(o.blob, `${path}.blob`)
          if (ref !== `blobs/${digest}`) this.fail(`${path}.blob`, `must be "blobs/${digest}"`)
          bytes = blobs?.get(digest)
          if (bytes === undefined) this.fail(`${path}.blob`, `names ${ref}, which is missing beside the trace file; copy the blobs/ folder along with it`)
        }
      }
    }
    if (chunks.reduce((n, c) => n + c.size, 0) !== size) this.fail(`${path}.chunks`, `sizes do not add up to size ${size}`)
    if (bytes !== undefined && bodies !== undefined) {
      if (bytes.byteLength !== size || sha256(bytes) !== digest) {
        throw new ToolReplayError(
          ErrorCodes.TRACE_DIGEST_MISMATCH,
          `Trace file ${this.#file} was changed after export: ${path} does not match its sha256 ${digest}${bytes.byteLength !== size ? ` (it has ${bytes.byteLength} bytes, not ${size})` : ''}. Re-export the trace, or use \`tr-proxy fork\` to change a body.`,
          { details: { file: this.#file, field: path, digest } },
        )
      }
      bodies.set(digest, bytes)
    }
    return { digest, size, chunks }
  }
}

function join2(path: string, key: string): string {
  return path ? `${path}.${key}` : key
}

/**
 * JSON with 2-space indent, except that a header pair, a chunk entry or any other small array or object
 * of scalars stays on one line: a trace file reads like a transcript and a re-recording diffs line by line.
 */
function formatJson(value: unknown, indent = ''): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value)
  const inner = `${indent}  `
  if (Array.isArray(value)) {
    if (value.length === 0) return '[]'
    const flat = value.every((v) => v === null || typeof v !== 'object')
    if (flat) {
      const line = `[${value.map((v) => JSON.stringify(v)).join(', ')}]`
      if (line.length + indent.length <= 120) return line
    }
    return `[\n${value.map((v) => inner + formatJson(v, inner)).join(',\n')}\n${indent}]`
  }
  const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined)
  if (entries.length === 0) return '{}'
  if (entries.length <= 4 && entries.every(([, v]) => v === null || typeof v !== 'object')) {
    const line = `{ ${entries.map(([k, v]) => `${JSON.stringify(k)}: ${JSON.stringify(v)}`).join(', ')} }`
    if (line.length + indent.length <= 120) return line
  }
  return `{\n${entries.map(([k, v]) => `${inner}${JSON.stringify(k)}: ${formatJson(v, inner)}`).join(',\n')}\n${indent}}`
}
