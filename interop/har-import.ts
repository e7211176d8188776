/**
 * HAR 1.2 in: a HAR document (Chrome DevTools, Playwright `recordHar`, or `tr-proxy export-har`) as a Trace.
 * Pure: text in, Trace out, no I/O. Every field is checked; a bad one is TR_HAR_INVALID naming the entry
 * index and the field. Sizes are bounded (HarLimits) before anything is allocated for them.
 *
 * What HAR cannot say exactly, and what is done about it:
 * - Bodies: HAR keeps the decoded body (`content.text` after Content-Encoding). A response that declared a
 *   Content-Encoding is stored decoded, without its Content-Encoding header and with Content-Length set to
 *   the decoded size, so both capture paths replay bytes the client can read. A HAR written by Tool Replay
 *   also carries the wire bytes (`_toolReplay.wireBody`); they are used when they decode to `content.text`.
 * - Timing: `startedDateTime` offsets from the first entry become `timing.startMs`; blocked + dns + connect +
 *   send + wait (the time until the response head) becomes `timing.headersMs`; the body is one chunk at
 *   headersMs + receive. Chunk boundaries inside a body are not in HAR.
 * - Failures: status 0 (DevTools) or -1 (Playwright) with `_error` / `_failureText` is a recorded network
 *   error; a status with such a text is a response cut short (phase response-body). Status 0 with no text
 *   says nothing about what happened and is refused.
 * - WebSocket and other non-HTTP entries (data:, blob:, 101 upgrades) are skipped and listed, as Tool Replay
 *   does not record them when capturing either.
 */
import {
  assertTraceName,
  type BodyRef,
  bodyFromChunks,
  decodeContentEncoding,
  ERROR_PHASES,
  ErrorCodes,
  type ErrorPhase,
  type Exchange,
  exchangeProblem,
  type HeaderPairs,
  headerValue,
  isExactNumber,
  type Outcome,
  parseJson,
  type RecordedResponse,
  ToolReplayError,
  TRACE_FORMAT_VERSION,
  type Trace,
} from '../trace/index.ts'
import { DEFAULT_HAR_LIMITS, type HarLimits } from './har-format.ts'
import { errorFromBrowserText } from './har-net-errors.ts'

/** Options for `traceFromHar`. */
export interface HarImportOptions {
  /** Name of the trace to build. */
  name: string
  /** Where the HAR came from (a file path), for messages. */
  source?: string
  /** Tighter or looser bounds than DEFAULT_HAR_LIMITS. */
  limits?: Partial<HarLimits>
}

/** An entry left out of the trace, and why. */
export interface SkippedHarEntry {
  entry: number
  url: string
  reason: string
}

/** The trace built from a HAR, and the entries that are not HTTP exchanges Tool Replay records. */
export interface HarImport {
  trace: Trace
  skipped: SkippedHarEntry[]
}

/**
 * Converts HAR text to a Trace. Throws TR_HAR_INVALID (naming entry and field) on anything malformed,
 * oversized or ambiguous; nothing is guessed.
 * @example
 * const { trace, skipped } = traceFromHar(await readFile('session.har', 'utf8'), { name: 'checkout' })
 */
export function traceFromHar(text: string, options: HarImportOptions): HarImport {
  assertTraceName(options.name)
  const reader = new HarReader(options.source ?? '<HAR>', { ...DEFAULT_HAR_LIMITS, ...options.limits })
  return reader.read(text, options.name)
}

type ReadEntry =
  | { kind: 'skip'; entry: number; url: string; reason: string }
  | { kind: 'exchange'; entry: number; startedAt: number; exchange: Omit<Exchange, 'seq'>; bodies: Map<string, Uint8Array> }

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/
const PHASES: ReadonlySet<string> = new Set(ERROR_PHASES)
const ERROR_CODE = /^[\x20-\x7e]{1,200}$/

/** Strict reader of a parsed HAR; every failure names the source, the entry and the field. */
class HarReader {
  readonly #source: string
  readonly #limits: HarLimits

  constructor(source: string, limits: HarLimits) {
    this.#source = source
    this.#limits = limits
  }

  read(text: string, name: string): HarImport {
    if (text.length > this.#limits.maxTextLength) {
      this.fail('', `is ${text.length} characters, over the limit of ${this.#limits.maxTextLength}`, 'Split the HAR into smaller files')
    }
    let raw: unknown
    try {
      raw = parseJson(text)
    } catch (err) {
      this.fail('', `is not valid JSON (${(err as Error).message})`)
    }
    const log = this.object(this.object(raw, '').log, 'log')
    const version = this.string(log.version, 'log.version')
    if (version !== '1.2' && version !== '1.1') this.fail('log.version', `is "${version}"; Tool Replay reads HAR 1.1 and 1.2`)
    const entries = this.array(log.entries, 'log.entries')
    if (entries.length > this.#limits.maxEntries) this.fail('log.entries', `has ${entries.length} entries, over the limit of ${this.#limits.maxEntries}`)
    const read = entries.map((e, i) => this.entry(e, i))
    const kept = read.filter((r): r is Extract<ReadEntry, { kind: 'exchange' }> => r.kind === 'exchange')
    // Occurrence order is request order: sort by start time; the sort is stable, so ties keep file order.
    kept.sort((a, b) => a.startedAt - b.startedAt)
    const t0 = kept[0]?.startedAt ?? 0
    const bodies = new Map<string, Uint8Array>()
    const exchanges: Exchange[] = kept.map((k, seq) => {
      for (const [d, b] of k.bodies) bodies.set(d, b)
      const x: Exchange = { seq, ...k.exchange, timing: { ...k.exchange.timing, startMs: k.startedAt - t0 } }
      // The rules every stored exchange meets (trace/validate.ts), checked here to name the HAR entry.
      const problem = exchangeProblem(x, k.bodies)
      if (problem)
        this.fail(`log.entries[${k.entry}]`, `cannot be a trace exchange: ${problem.path} ${problem.problem}`, 'Fix that entry, or leave it out of the HAR')
      return x
    })
    const creator = this.creator(log.creator)
    const trace: Trace = {
      meta: { name, format: TRACE_FORMAT_VERSION, labels: { importedFrom: 'har', ...(creator ? { harCreator: creator } : {}) } },
      exchanges,
      bodies,
    }
    const skipped = read.filter((r): r is Extract<ReadEntry, { kind: 'skip' }> => r.kind === 'skip').map(({ entry, url, reason }) => ({ entry, url, reason }))
    return { trace, skipped }
  }

  entry(v: unknown, i: number): ReadEntry {
    const at = `log.entries[${i}]`
    const o = this.object(v, at)
    const req = this.object(o.request, `${at}.request`)
    const url = this.string(req.url, `${at}.request.url`)
    if (url.length > this.#limits.maxFieldLength)
      this.fail(`${at}.request.url`, `is ${url.length} characters, over the limit of ${this.#limits.maxFieldLength}`)
    let parsed: URL
    try {
      parsed = new URL(url)
    } catch {
      this.fail(`${at}.request.url`, `is not an absolute URL (${JSON.stringify(url.slice(0, 200))})`)
    }
    const skip = (reason: string): ReadEntry => ({ kind: 'skip', entry: i, url, reason })
    if (o._resourceType === 'websocket' || parsed.protocol === 'ws:' || parsed.protocol === 'wss:')
      return skip('a WebSocket: Tool Replay does not record WebSockets')
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return skip(`a ${parsed.protocol} URL, not an HTTP exchange`)
    const started = this.string(o.startedDateTime, `${at}.startedDateTime`)
    const startedAt = Date.parse(started)
    if (!Number.isFinite(startedAt)) this.fail(`${at}.startedDateTime`, `is not an ISO 8601 date (${JSON.stringify(started.slice(0, 100))})`)
    const method = this.string(req.method, `${at}.request.method`)
    if (!TOKEN.test(method) || method.length > 64) this.fail(`${at}.request.method`, `is not an HTTP method (${JSON.stringify(method.slice(0, 64))})`)
    const ours = o._toolReplay === undefined ? undefined : this.object(o._toolReplay, `${at}._toolReplay`)
    const res = this.object(o.response, `${at}.response`)
    const status = this.number(res.status, `${at}.response.status`)
    if (status === 101) return skip('a 101 upgrade: Tool Replay does not record upgraded connections')
    const timing = this.timings(o.timings, `${at}.timings`)
    const bodies = new Map<string, Uint8Array>()
    const keep = (b: { ref: BodyRef; bytes: Uint8Array }) => {
      bodies.set(b.ref.digest, b.bytes)
      return b.ref
    }
    const headers = this.headers(req.headers, `${at}.request.headers`)
    const body = this.requestBody(req, `${at}.request`)
    const request = { method, url: url.split('#')[0] as string, headers, body: body === null ? null : keep(bodyFromChunks([{ bytes: body, atMs: 0 }])) }
    // HAR writers put the cached representation in a 304's (or HEAD's) content; on the wire it had no body.
    const bodiless = method === 'HEAD' || status === 204 || status === 304
    const outcome = this.outcome(res, ours, { status, bodiless }, timing, `${at}`, keep)
    return { kind: 'exchange', entry: i, startedAt, exchange: { request, outcome, timing: { startMs: 0, headersMs: timing.headersMs } }, bodies }
  }

  outcome(
    res: Record<string, unknown>,
    ours: Record<string, unknown> | undefined,
    { status, bodiless }: { status: number; bodiless: boolean },
    timing: { headersMs: number; endMs: number },
    at: string,
    keep: (b: { ref: BodyRef; bytes: Uint8Array }) => BodyRef,
  ): Outcome {
    const failure = this.failure(res, ours, status, at)
    if (status <= 0) {
      if (!failure) {
        this.fail(
          `${at}.response.status`,
          `is ${status} and the entry names no failure (_error or _failureText), so the HAR does not say what happened to this request`,
          'Remove the entry, or record the HAR again after the request completes',
        )
      }
      return { kind: 'error', error: failure }
    }
    if (!Number.isInteger(status) || status < 100 || status > 999) this.fail(`${at}.response.status`, `is ${status}, not an HTTP status (100-999)`)
    const response = this.response(res, ours, { status, bodiless }, timing, at, keep)
    if (failure) return { kind: 'error', error: { ...failure, partial: response } }
    return { kind: 'response', response }
  }

  failure(res: Record<string, unknown>, ours: Record<string, unknown> | undefined, status: number, at: string) {
    if (ours?.error !== undefined) {
      const e = this.object(ours.error, `${at}._toolReplay.error`)
      const code = this.string(e.code, `${at}._toolReplay.error.code`)
      if (!ERROR_CODE.test(code)) this.fail(`${at}._toolReplay.error.code`, 'must be 1-200 printable ASCII characters')
      const phase = this.string(e.phase, `${at}._toolReplay.error.phase`)
      if (!PHASES.has(phase)) this.fail(`${at}._toolReplay.error.phase`, `must be one of ${[...PHASES].join(', ')}`)
      return { code, message: this.string(e.message, `${at}._toolReplay.error.message`), phase: phase as ErrorPhase }
    }
    const field =
      typeof res._error === 'string' && res._error !== ''
        ? '_error'
        : typeof res._failureText === 'string' && res._failureText !== ''
          ? '_failureText'
          : undefined
    if (!field) return undefined
    const text = res[field] as string
    if (!ERROR_CODE.test(text)) this.fail(`${at}.response.${field}`, 'must be 1-200 printable ASCII characters')
    const { code, phase } = errorFromBrowserText(text, status > 0)
    return { code, message: `${text} (imported from HAR ${at})`, phase }
  }

  response(
    res: Record<string, unknown>,
    ours: Record<string, unknown> | undefined,
    { status, bodiless }: { status: number; bodiless: boolean },
    timing: { headersMs: number; endMs: number },
    at: string,
    keep: (b: { ref: BodyRef; bytes: Uint8Array }) => BodyRef,
  ): RecordedResponse {
    let headers = this.headers(res.headers, `${at}.response.headers`)
    const trailers = ours?.trailers === undefined ? [] : this.headers(ours.trailers, `${at}._toolReplay.trailers`)
    const statusText = res.statusText === undefined ? '' : this.string(res.statusText, `${at}.response.statusText`)
    if (/[\r\n\0]/.test(statusText) || statusText.length > 1024) this.fail(`${at}.response.statusText`, 'must be one line of at most 1024 characters')
    const content = this.object(res.content, `${at}.response.content`)
    const decoded = this.content(content, headers, `${at}.response.content`)
    const encoding = headerValue(headers, 'content-encoding')
    const encoded = encoding !== undefined && encoding.trim().toLowerCase() !== 'identity' && encoding.trim() !== ''
    let bytes: Uint8Array
    if (bodiless) {
      bytes = new Uint8Array(0)
    } else if (ours?.wireBody !== undefined) {
      bytes = this.wireBody(ours.wireBody, decoded, encoded ? encoding : undefined, `${at}._toolReplay.wireBody`)
    } else if (encoded && decoded !== undefined) {
      // The HAR holds the decoded body; label it as such so the client gets bytes it can read.
      bytes = decoded
      headers = headers
        .filter(([k]) => k.toLowerCase() !== 'content-encoding')
        .map(([k, v]) => (k.toLowerCase() === 'content-length' ? [k, String(bytes.byteLength)] : [k, v]))
    } else {
      bytes = decoded ?? new Uint8Array(0)
    }
    return { status, statusText, headers, trailers, body: keep(bodyFromChunks([{ bytes, atMs: timing.endMs }])) }
  }

  /** The decoded response body, or undefined when the HAR has none (and says it had none). */
  content(c: Record<string, unknown>, headers: HeaderPairs, at: string): Uint8Array | undefined {
    if (c.text === undefined || c.text === null) {
      if (typeof c._file === 'string') {
        this.fail(
          `${at}._file`,
          'names a separate file (Playwright recordHar content: "attach")',
          'Record the HAR with content: "embed" (the default for a .har path)',
        )
      }
      const size = c.size === undefined ? 0 : this.number(c.size, `${at}.size`)
      if (size > 0) {
        this.fail(
          `${at}.text`,
          `is missing but content.size is ${size}: the HAR was saved without response bodies`,
          'Export it with content (DevTools: "Save all as HAR with content"; Playwright: recordHar content "embed")',
        )
      }
      return undefined
    }
    const text = this.string(c.text, `${at}.text`)
    if (c.encoding !== undefined && c.encoding !== 'base64') this.fail(`${at}.encoding`, `is ${JSON.stringify(c.encoding)}; HAR bodies are text or "base64"`)
    if (c.encoding === 'base64') return this.base64(text, `${at}.text`)
    return this.textBytes(text, headerValue(headers, 'content-type') ?? (typeof c.mimeType === 'string' ? c.mimeType : ''), `${at}.text`)
  }

  wireBody(v: unknown, decoded: Uint8Array | undefined, encoding: string | undefined, at: string): Uint8Array {
    const wire = this.base64(this.string(v, at), at)
    let plain: Uint8Array | undefined
    try {
      plain = decodeContentEncoding(wire, encoding, { maxBytes: this.#limits.maxBodyBytes })
    } catch (err) {
      if ((err as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE')
        this.fail(at, `decodes to more than ${this.#limits.maxBodyBytes} bytes, the body size limit`)
      plain = undefined // a body cut short mid-stream does not decode; then the HAR has no text for it
    }
    const same = plain !== undefined && decoded !== undefined && Buffer.from(plain).equals(Buffer.from(decoded))
    if (decoded !== undefined && !same) {
      this.fail(at, 'does not decode to content.text: the body was edited after export', 'Remove _toolReplay.wireBody to use the edited content.text')
    }
    return wire
  }

  requestBody(req: Record<string, unknown>, at: string): Uint8Array | null {
    const bodySize = req.bodySize === undefined ? -1 : this.number(req.bodySize, `${at}.bodySize`)
    if (req.postData === undefined || req.postData === null) {
      if (bodySize > 0) this.fail(`${at}.postData`, `is missing but request.bodySize is ${bodySize}: the HAR did not keep this request body`)
      return null
    }
    const p = this.object(req.postData, `${at}.postData`)
    if (typeof p._file === 'string')
      this.fail(`${at}.postData._file`, 'names a separate file (Playwright recordHar content: "attach")', 'Record the HAR with content: "embed"')
    const mime = p.mimeType === undefined ? '' : this.string(p.mimeType, `${at}.postData.mimeType`)
    let bytes: Uint8Array
    if (p.text === undefined || p.text === null || (p.text === '' && Array.isArray(p.params) && p.params.length > 0)) {
      bytes = this.formParams(p.params, mime, `${at}.postData`)
    } else {
      const text = this.string(p.text, `${at}.postData.text`)
      if (p.encoding !== undefined && p.encoding !== 'base64') this.fail(`${at}.postData.encoding`, `is ${JSON.stringify(p.encoding)}; only "base64" is known`)
      bytes = p.encoding === 'base64' ? this.base64(text, `${at}.postData.text`) : this.textBytes(text, mime, `${at}.postData.text`)
    }
    if (bodySize > 0 && bytes.byteLength !== bodySize) {
      this.fail(
        `${at}.postData.text`,
        `has ${bytes.byteLength} bytes but request.bodySize is ${bodySize}: the HAR did not keep this request body whole (Playwright leaves application/octet-stream request bodies out)`,
        'Remove the entry, or record it with a text content type',
      )
    }
    return bytes
  }

  /** A urlencoded form rebuilt from `params`, for writers that keep only those. */
  formParams(v: unknown, mime: string, at: string): Uint8Array {
    if (v === undefined || (Array.isArray(v) && v.length === 0)) return new Uint8Array(0)
    if (!mime.toLowerCase().startsWith('application/x-www-form-urlencoded')) {
      this.fail(`${at}.text`, `is missing and ${mime || 'this body'} cannot be rebuilt from params`)
    }
    const form = new URLSearchParams()
    this.array(v, `${at}.params`).forEach((p, j) => {
      const o = this.object(p, `${at}.params[${j}]`)
      form.append(this.string(o.name, `${at}.params[${j}].name`), this.string(o.value, `${at}.params[${j}].value`))
    })
    return this.textBytes(form.toString(), mime, `${at}.params`)
  }

  timings(v: unknown, at: string): { headersMs: number; endMs: number } {
    if (v === undefined || v === null) return { headersMs: 0, endMs: 0 }
    const t = this.object(v, at)
    const part = (k: string) => (t[k] === undefined || t[k] === null ? 0 : Math.max(0, this.number(t[k], `${at}.${k}`)))
    // ssl is already inside connect (HAR 1.2), so it is not added again.
    const headersMs = Math.round(part('blocked') + part('dns') + part('connect') + part('send') + part('wait'))
    return { headersMs, endMs: Math.round(headersMs + part('receive')) }
  }

  headers(v: unknown, at: string): HeaderPairs {
    if (v === undefined) return []
    const list = this.array(v, at)
    if (list.length > this.#limits.maxHeaders) this.fail(at, `has ${list.length} headers, over the limit of ${this.#limits.maxHeaders}`)
    const out: HeaderPairs = []
    list.forEach((h, j) => {
      const o = this.object(h, `${at}[${j}]`)
      const name = this.string(o.name, `${at}[${j}].name`)
      const value = this.string(o.value, `${at}[${j}].value`)
      // HTTP/2 pseudo-headers (:authority, :status) restate the request line; HTTP/1.1 has no place for them.
      if (name.startsWith(':')) return
      if (!TOKEN.test(name)) this.fail(`${at}[${j}].name`, `is not a header name (${JSON.stringify(name.slice(0, 100))})`)
      if (value.length > this.#limits.maxFieldLength)
        this.fail(`${at}[${j}].value`, `is ${value.length} characters, over the limit of ${this.#limits.maxFieldLength}`)
      if (/[\r\n\0]/.test(value)) this.fail(`${at}[${j}].value`, 'contains a line break or NUL, which would split the header when replayed')
      // Header bytes are latin1 on the wire; a value a tool decoded as UTF-8 goes back to those bytes.
      out.push([name, fitsLatin1(value) ? value : Buffer.from(value, 'utf8').toString('latin1')])
    })
    return out
  }

  base64(text: string, at: string): Uint8Array {
    if (text.length % 4 !== 0 || !BASE64.test(text)) this.fail(at, 'is not valid base64')
    if ((text.length / 4) * 3 > this.#limits.maxBodyBytes + 2) this.fail(at, `decodes to more than ${this.#limits.maxBodyBytes} bytes, the body size limit`)
    return new Uint8Array(Buffer.from(text, 'base64'))
  }

  /** Text as the bytes it was sent as: UTF-8, or latin1 where the content type says so and it fits. */
  textBytes(text: string, contentType: string, at: string): Uint8Array {
    const latin1 = /charset\s*=\s*"?(iso-8859-1|latin1|us-ascii)"?/i.test(contentType) && fitsLatin1(text)
    const size = latin1 ? text.length : Buffer.byteLength(text, 'utf8')
    if (size > this.#limits.maxBodyBytes) this.fail(at, `is ${size} bytes, over the body size limit of ${this.#limits.maxBodyBytes}`)
    return new Uint8Array(Buffer.from(text, latin1 ? 'latin1' : 'utf8'))
  }

  creator(v: unknown): string | undefined {
    if (v === undefined || v === null || typeof v !== 'object') return undefined
    const c = v as Record<string, unknown>
    const label = [c.name, c.version].filter((s) => typeof s === 'string' && s !== '').join(' ')
    return label === '' ? undefined : label.slice(0, 200)
  }

  fail(path: string, problem: string, fix = 'Fix that field, or export the HAR again'): never {
    const entry = /^log\.entries\[(\d+)\]/.exec(path)?.[1]
    throw new ToolReplayError(ErrorCodes.HAR_INVALID, `HAR ${this.#source} is invalid: ${path || '(top level)'} ${problem}. ${fix}.`, {
      details: { source: this.#source, field: path, ...(entry !== undefined ? { entry: Number(entry) } : {}) },
    })
  }

  object(v: unknown, path: string): Record<string, unknown> {
    if (v === null || typeof v !== 'object' || Array.isArray(v)) this.fail(path, 'must be an object')
    return v as Record<string, unknown>
  }

  array(v: unknown, path: string): unknown[] {
    if (!Array.isArray(v)) this.fail(path, 'must be an array')
    return v
  }

  string(v: unknown, path: string): string {
    if (typeof v !== 'string') this.fail(path, 'must be a string')
    return v
  }

  /** A finite number; exact-number values from the JSON codec count by their value. */
  number(v: unknown, path: string): number {
    const n = isExactNumber(v) ? Number(v.rawJSON) : v
    if (typeof n !== 'number' || !Number.isFinite(n)) this.fail(path, 'must be a number')
    return n
  }
}

/** True when every character is one latin1 byte. */
function fitsLatin1(s: string): boolean {
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) > 0xff) return false
  return true
}
