import { performance } from 'node:perf_hooks'
import type { TraceRecording, TraceStore } from '../store/index.ts'
import {
  assertTraceName,
  BodyAccumulator,
  bodyBytes,
  bodyFromChunks,
  computeIdentity,
  decodeContentEncoding,
  describeIdentityDifferences,
  ErrorCodes,
  type ErrorPhase,
  type Exchange,
  type HeaderPairs,
  headerValue,
  type IdentityOptions,
  type IdentityParts,
  identityDistance,
  isToolReplayError,
  parseJsonPath,
  type RecordedError,
  type RecordedResponse,
  type ResponseHead,
  splitChunks,
  ToolReplayError,
  TRACE_FORMAT_VERSION,
  type Trace,
} from '../trace/index.ts'
import { entryFromError, formatSummary, type LedgerEntry, type SessionSummary } from './ledger.ts'
import { type RedactionOptions, Redactor } from './redaction.ts'

/**
 * - record: forward every request live and store it (a new recording replaces the trace when it closes).
 * - replay: serve from the trace only, never open a connection; fail closed on anything unrecorded.
 * - passthrough: forward live, store nothing.
 * - update: replay what matches, forward and record what is missing; the result replaces the trace.
 */
export type Mode = 'record' | 'replay' | 'passthrough' | 'update'
export const MODES: readonly Mode[] = ['record', 'replay', 'passthrough', 'update']

export interface SessionOptions {
  mode: Mode
  /** Trace name. */
  trace: string
  store: TraceStore
  identity?: IdentityOptions
  redaction?: RedactionOptions
  /** In replay: also record what the app did (replayed exchanges and misses) as this trace, for diff. */
  recordAs?: string
  /** In replay with recordAs: after the first unmatched request, forward live and record ('live'). */
  tail?: 'strict' | 'live'
  /** Labels stored with a recorded trace, e.g. { recordedWith: 'proxy' }. */
  labels?: Record<string, string>
}

/** A request as a capture path saw it, before redaction. Body fully buffered (or null). */
export interface CapturedRequest {
  method: string
  url: string
  headers: HeaderPairs
  body: Uint8Array | null
}

/** Chunks to play back, with their recorded time offsets (ms since the exchange started). */
export type PlaybackChunk = { bytes: Uint8Array; atMs: number }

/** A recorded response or failure, ready for a capture path to play back. */
export type Playback =
  | { kind: 'response'; head: ResponseHead; headersMs: number; chunks: PlaybackChunk[]; trailers: HeaderPairs }
  | { kind: 'error'; error: RecordedError; headersMs: number; head?: ResponseHead; chunks: PlaybackChunk[] }

/** What a capture path must do with one request. */
export type Decision =
  | { kind: 'replay'; exchange: Exchange; playback: Playback }
  | { kind: 'forward'; recorder: ExchangeRecorder }
  | { kind: 'fail'; error: ToolReplayError }

/**
 * Collects the outcome of one forwarded request and writes it as one exchange.
 * Call `responseStart`, then `responseData` per chunk, then `responseEnd`; or `fail` at any point.
 */
export interface ExchangeRecorder {
  /** False for passthrough: nothing is written, calls are cheap no-ops. */
  readonly recording: boolean
  responseStart(head: ResponseHead): void
  responseData(chunk: Uint8Array): void
  responseEnd(trailers?: HeaderPairs): Promise<void>
  fail(error: { code?: string; message: string }, phase?: ErrorPhase): Promise<void>
}

interface Slot {
  exchange: Exchange
  used: boolean
}

/** Bodies up to this size take part in exact keys; larger ones always go through computeIdentity. */
const EXACT_KEY_MAX_BODY = 16 * 1024

interface Queue {
  parts: IdentityParts
  label: string
  slots: Slot[]
  next: number
}

/**
 * One record or replay session over one trace. The matching and strictness rules live here once;
 * capture paths (interceptor, proxy) only translate between the wire and `handle()`.
 * @example
 * const session = await openSession({ mode: 'replay', trace: 'checkout', store })
 * const decision = session.handle({ method: 'GET', url, headers: [], body: null })
 */
export class Session {
  readonly mode: Mode
  readonly trace: string
  readonly #store: TraceStore
  readonly #identity: IdentityOptions
  readonly #redactor: Redactor
  readonly #queues = new Map<string, Queue>()
  /** Exact request key → queue, so a request byte-identical to a recorded one skips computeIdentity. */
  readonly #exact = new Map<string, Queue>()
  readonly #exactHeaders: Set<string>
  readonly #source: Trace | undefined
  readonly #recording: TraceRecording | undefined
  readonly #tail: 'strict' | 'live'
  readonly #t0 = performance.now()
  readonly #pending = new Set<Promise<void>>()
  /** Recorders whose response has not finished yet, with a way to settle them when close() cannot wait longer. */
  readonly #open = new Map<ExchangeRecorder, { settled: Promise<void>; cut: () => void }>()
  readonly #misses: LedgerEntry[] = []
  readonly #exhausted: LedgerEntry[] = []
  #seq = 0
  #replayed = 0
  #recorded = 0
  #passedThrough = 0
  #tailLive = false
  #closed: SessionSummary | undefined
  #writeError: unknown

  /** Use `openSession`. */
  constructor(init: {
    options: SessionOptions
    source: Trace | undefined
    recording: TraceRecording | undefined
  }) {
    const { options } = init
    this.mode = options.mode
    this.trace = options.trace
    this.#store = options.store
    this.#identity = options.identity ?? {}
    this.#exactHeaders = new Set(['content-type', ...(this.#identity.includeHeaders ?? [])].map((h) => h.toLowerCase()))
    this.#redactor = new Redactor(options.redaction)
    this.#source = init.source
    this.#recording = init.recording
    this.#tail = options.tail ?? 'strict'
    if (init.source) this.#index(init.source)
  }

  #index(trace: Trace): void {
    for (const exchange of trace.exchanges) {
      const body = exchange.request.body ? bodyBytes(trace, exchange.request.body) : null
      const id = computeIdentity({ method: exchange.request.method, url: exchange.request.url, headers: exchange.request.headers, body }, this.#identity)
      let q = this.#queues.get(id.key)
      if (!q) {
        q = { parts: id.parts, label: `${exchange.request.method} ${exchange.request.url}`, slots: [], next: 0 }
        this.#queues.set(id.key, q)
      }
      q.slots.push({ exchange, used: false })
      const exact = this.#exactKey(exchange.request.method, exchange.request.url, exchange.request.headers, body)
      if (exact !== undefined) this.#exact.set(exact, q)
    }
  }

  /**
   * A key that two requests share only when every input computeIdentity reads is identical, so they have
   * the same identity without computing it (hashing canonical JSON dominated replay's per-request cost).
   * Undefined, meaning "compute the identity", with a custom identity function or a large body.
   */
  #exactKey(method: string, url: string, headers: HeaderPairs, body: Uint8Array | null): string | undefined {
    if (this.#identity.custom || (body && body.byteLength > EXACT_KEY_MAX_BODY)) return undefined
    // NUL cannot occur in a method, URL or header value, so the fields cannot run into each other.
    let key = `${method.toUpperCase()}\0${url}`
    for (const [name, value] of headers) {
      const lower = name.toLowerCase()
      if (this.#exactHeaders.has(lower)) key += `\0${lower}:${value}`
    }
    key += '\0\0'
    if (body) key += Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('latin1')
    return key
  }

  /** The store this session writes to. */
  get store(): TraceStore {
    return this.#store
  }

  /** Every miss and overrun so far (the ledger). */
  get ledger(): readonly LedgerEntry[] {
    return [...this.#misses, ...this.#exhausted]
  }

  /** Decides what to do with one request. Synchronous: replay lookups are in memory. */
  handle(captured: CapturedRequest): Decision {
    try {
      return this.#handle(captured)
    } catch (err) {
      // A request the engine cannot even read (a bad URL, a throwing custom identity) still counts against
      // strict replay: it goes in the ledger, so the run fails at the end even if the app swallows it.
      const error = isToolReplayError(err)
        ? err
        : new ToolReplayError(ErrorCodes.INTERNAL, `Failed to handle ${captured.method} ${captured.url}: ${(err as Error)?.message ?? String(err)}`, {
            cause: err,
          })
      if (this.mode === 'replay' || this.mode === 'update') this.#misses.push(entryFromError(error, `${captured.method} ${captured.url}`))
      return { kind: 'fail', error }
    }
  }

  /**
   * Decides an upgrade request (WebSocket). Upgrades are never recorded: live modes pass them through;
   * strict replay refuses them and, like any miss, puts them in the ledger so the run fails at the end.
   */
  handleUpgrade(captured: CapturedRequest): Decision {
    const label = `${captured.method} ${this.#redactor.url(captured.url)} (upgrade: ${headerValue(captured.headers, 'upgrade') ?? '?'})`
    if (this.mode !== 'replay' || this.#tailLive) {
      this.#passedThrough++
      return { kind: 'forward', recorder: PASSTHROUGH_RECORDER }
    }
    const error = new ToolReplayError(
      ErrorCodes.REPLAY_MISS,
      `Failed to replay "${label}": upgrades (WebSocket) are not recorded, so strict replay refuses them. Run this part against a live service (mode "passthrough"), or keep WebSocket traffic out of the replayed run.`,
      { details: { request: { method: captured.method, url: captured.url }, upgrade: true } },
    )
    this.#misses.push(entryFromError(error, label))
    return { kind: 'fail', error }
  }

  /**
   * Records that a capture path could not even hand a request to the engine (a body over its buffer limit,
   * say). Live modes only report it; strict replay also counts it in the ledger, since the run did not
   * get what was recorded.
   */
  refuse(captured: Pick<CapturedRequest, 'method' | 'url'>, error: ToolReplayError): void {
    if (this.mode === 'replay') this.#misses.push(entryFromError(error, `${captured.method} ${this.#redactor.url(captured.url)}`))
  }

  #handle(captured: CapturedRequest): Decision {
    if (this.#closed) {
      return {
        kind: 'fail',
        error: new ToolReplayError(
          ErrorCodes.STORE_CLOSED,
          `Session for trace "${this.trace}" is closed; ${captured.method} ${captured.url} came after it ended. Await the app's requests before closing the session.`,
        ),
      }
    }
    const request = this.#redactRequest(captured)
    const startMs = performance.now() - this.#t0
    const seq = this.#seq++
    if (this.mode === 'record') return { kind: 'forward', recorder: this.#recorder(request, seq, startMs, true) }
    if (this.mode === 'passthrough') return { kind: 'forward', recorder: this.#recorder(request, seq, startMs, false) }
    if (this.#tailLive) return { kind: 'forward', recorder: this.#recorder(request, seq, startMs, true) }

    const exact = this.#exactKey(request.method, request.url, request.headers, request.body)
    const fast = exact === undefined ? undefined : this.#exact.get(exact)
    const id = fast ? undefined : computeIdentity(request, this.#identity)
    const q = fast ?? (id ? this.#queues.get(id.key) : undefined)
    const label = `${request.method} ${request.url}`
    if (q && q.next < q.slots.length) {
      const slot = q.slots[q.next++] as Slot
      slot.used = true
      this.#replayed++
      const playback = this.#playback(slot.exchange)
      if (this.#recording)
        this.#write({ ...slot.exchange, seq, timing: { ...slot.exchange.timing, startMs: Math.round(startMs) } }, this.#source?.bodies ?? new Map())
      return { kind: 'replay', exchange: slot.exchange, playback }
    }
    if (this.mode === 'update') return { kind: 'forward', recorder: this.#recorder(request, seq, startMs, true) }

    let error: ToolReplayError
    if (q) {
      error = new ToolReplayError(
        ErrorCodes.REPLAY_EXHAUSTED,
        `Failed to replay "${label}": trace "${this.trace}" recorded this request ${q.slots.length} time(s) and this is request #${q.next + 1}. Tool Replay never repeats a recording. Re-record the trace, or find why the app sends it more often (a retry loop?).`,
        { details: { request: label, recorded: q.slots.length, occurrence: q.next + 1 } },
      )
      q.next++
      this.#exhausted.push(entryFromError(error, `${label} #${q.next - 1}`))
    } else {
      error = this.#missError(request, (id ?? computeIdentity(request, this.#identity)).parts, label)
      this.#misses.push(entryFromError(error, label))
    }
    if (this.#tail === 'live' && this.#recording) {
      // Opt-in: from the first unmatched request on, go live and record what happens next.
      this.#tailLive = true
      return { kind: 'forward', recorder: this.#recorder(request, seq, startMs, true) }
    }
    if (this.#recording) {
      // Keep the attempt in the record-as trace so diff shows what the app asked for.
      void this.#recorder(request, seq, startMs, true).fail({ code: error.code, message: error.message }, 'connect')
    }
    return { kind: 'fail', error }
  }

  #missError(request: CapturedRequest, parts: IdentityParts, label: string): ToolReplayError {
    const ranked = [...this.#queues.values()]
      .map((q) => ({ q, d: identityDistance(parts, q.parts) }))
      .sort((a, b) => a.d - b.d)
      .slice(0, 3)
    const candidates = ranked.map(({ q }) => ({ request: q.label, differences: describeIdentityDifferences(q.parts, parts) }))
    const closest =
      candidates.length === 0
        ? `trace "${this.trace}" has no recorded exchanges`
        : `closest recorded: ${candidates.map((c) => `"${c.request}" (differs: ${c.differences.join('; ') || 'identity options'})`).join(', ')}`
    return new ToolReplayError(
      ErrorCodes.REPLAY_MISS,
      `Failed to replay "${label}": no recorded exchange in trace "${this.trace}" matches; ${closest}. Re-record with mode "record" (or \`tr-proxy record\`), use mode "update" to add it, or fix the request.`,
      { details: { request: { method: request.method, url: request.url }, candidates } },
    )
  }

  #redactRequest(c: CapturedRequest): CapturedRequest {
    const headers = this.#redactor.headers(c.headers)
    const url = this.#redactor.url(c.url)
    const body = c.body && this.#redactor.hasBodyPaths ? this.#redactor.body(c.body, c.headers) : c.body
    return { method: c.method.toUpperCase(), url, headers, body }
  }

  #playback(exchange: Exchange): Playback {
    const trace = this.#source as Trace
    const { outcome } = exchange
    if (outcome.kind === 'response') {
      const r = outcome.response
      const bytes = bodyBytes(trace, r.body)
      return {
        kind: 'response',
        head: { status: r.status, statusText: r.statusText, headers: r.headers },
        headersMs: exchange.timing.headersMs,
        chunks: splitChunks(bytes, r.body),
        trailers: r.trailers,
      }
    }
    const p = outcome.error.partial
    if (!p) return { kind: 'error', error: outcome.error, headersMs: exchange.timing.headersMs, chunks: [] }
    return {
      kind: 'error',
      error: outcome.error,
      headersMs: exchange.timing.headersMs,
      head: { status: p.status, statusText: p.statusText, headers: p.headers },
      chunks: splitChunks(bodyBytes(trace, p.body), p.body),
    }
  }

  #recorder(request: CapturedRequest, seq: number, startMs: number, recording: boolean): ExchangeRecorder {
    if (!recording || !this.#recording) {
      this.#passedThrough++
      return PASSTHROUGH_RECORDER
    }
    const t0 = performance.now()
    let head: ResponseHead | undefined
    let headersMs = 0
    let body: BodyAccumulator | undefined
    let done = false
    let settle = () => {}
    const settled = new Promise<void>((resolve) => (settle = resolve))
    const finish = (build: (partial: RecordedResponse | undefined) => Exchange['outcome']): Promise<void> => {
      if (done) return Promise.resolve()
      done = true
      this.#open.delete(recorder)
      settle()
      try {
        return assemble(build)
      } catch (err) {
        // Never lose an exchange silently: close() reports it and the recording stays partial.
        this.#writeError ??= err
        return Promise.resolve()
      }
    }
    const assemble = (build: (partial: RecordedResponse | undefined) => Exchange['outcome']): Promise<void> => {
      const bodies = new Map<string, Uint8Array>()
      const reqBody = request.body ? bodyFromChunks([{ bytes: request.body, atMs: 0 }]) : undefined
      if (reqBody) bodies.set(reqBody.ref.digest, reqBody.bytes)
      let partial: RecordedResponse | undefined
      if (head) {
        let headers = this.#redactor.headers(head.headers)
        const received = body ?? new BodyAccumulator()
        let recorded = received.finish()
        if (this.#redactor.hasBodyPaths) {
          const redacted = redactResponseBody(this.#redactor, recorded.bytes, headers)
          if (redacted) {
            // A redacted body no longer has its wire chunking (or encoding); it replays as one chunk.
            recorded = bodyFromChunks([{ bytes: redacted.bytes, atMs: received.lastAtMs }])
            headers = redacted.headers
          }
        }
        bodies.set(recorded.ref.digest, recorded.bytes)
        partial = { status: head.status, statusText: head.statusText, headers, body: recorded.ref, trailers: [] }
      }
      const exchange: Exchange = {
        seq,
        request: { method: request.method, url: request.url, headers: request.headers, body: reqBody?.ref ?? null },
        outcome: build(partial),
        timing: { startMs: Math.round(startMs), headersMs: Math.round(headersMs) },
      }
      this.#recorded++
      return this.#write(exchange, bodies)
    }
    const recorder: ExchangeRecorder = {
      recording: true,
      responseStart(h) {
        head = h
        headersMs = performance.now() - t0
        const length = headerValue(h.headers, 'content-length')
        body = new BodyAccumulator(length === undefined ? undefined : Number(length))
      },
      responseData(chunk) {
        // Copied (once, into one buffer): callers may reuse their buffers.
        body ??= new BodyAccumulator()
        body.append(chunk, performance.now() - t0)
      },
      responseEnd: (trailers = []) =>
        finish((partial) => {
          if (!partial) throw new ToolReplayError(ErrorCodes.INTERNAL, 'responseEnd called before responseStart')
          return { kind: 'response', response: { ...partial, trailers: this.#redactor.headers(trailers) } }
        }),
      fail: (error, phase) =>
        finish((partial) => {
          const e: RecordedError = {
            code: error.code ?? 'UND_ERR',
            message: error.message,
            phase: phase ?? (partial ? 'response-body' : 'connect'),
          }
          if (partial) e.partial = partial
          return { kind: 'error', error: e }
        }),
    }
    this.#open.set(recorder, {
      settled,
      cut: () => {
        void recorder.fail({ code: 'TR_SESSION_CLOSED', message: 'The session closed before this response finished; the trace keeps what had arrived.' })
      },
    })
    return recorder
  }

  #write(exchange: Exchange, bodies: ReadonlyMap<string, Uint8Array>): Promise<void> {
    const rec = this.#recording as TraceRecording
    const own = new Map<string, Uint8Array>()
    for (const ref of [exchange.request.body, exchange.outcome.kind === 'response' ? exchange.outcome.response.body : exchange.outcome.error.partial?.body]) {
      if (ref) {
        const b = bodies.get(ref.digest)
        if (b) own.set(ref.digest, b)
      }
    }
    const p = rec.append(exchange, own).then(
      () => {
        this.#pending.delete(p)
      },
      (err: unknown) => {
        this.#pending.delete(p)
        this.#writeError ??= err
      },
    )
    this.#pending.add(p)
    return p
  }

  /** Replayed exchanges never requested so far. */
  unused(): LedgerEntry[] {
    const out: LedgerEntry[] = []
    if (this.mode !== 'replay' && this.mode !== 'update') return out
    for (const q of this.#queues.values()) {
      for (let i = 0; i < q.slots.length; i++) {
        const slot = q.slots[i] as Slot
        if (slot.used) continue
        out.push({
          code: ErrorCodes.REPLAY_UNUSED,
          request: `${q.label} #${i}`,
          message: `recorded exchange #${slot.exchange.seq} was never requested. The app did less than when it was recorded; re-record, or check what changed.`,
        })
      }
    }
    return out
  }

  /** The summary so far, without closing. */
  summary(): SessionSummary {
    if (this.#closed) return this.#closed
    const unused = this.mode === 'replay' ? this.unused() : []
    return {
      trace: this.trace,
      mode: this.mode,
      replayed: this.#replayed,
      recorded: this.#recorded,
      passedThrough: this.#passedThrough,
      misses: [...this.#misses],
      exhausted: [...this.#exhausted],
      unused,
      ok: this.#misses.length === 0 && this.#exhausted.length === 0 && unused.length === 0,
    }
  }

  /** Waits for pending writes, closes the recording (making it complete) and returns the summary. Idempotent. */
  async close(): Promise<SessionSummary> {
    if (this.#closed) return this.#closed
    // Responses still streaming get a bounded grace period to finish, then are kept as what arrived.
    if (this.#open.size > 0) {
      let timer: NodeJS.Timeout | undefined
      const grace = new Promise<void>((resolve) => (timer = setTimeout(resolve, CLOSE_GRACE_MS)))
      await Promise.race([Promise.all([...this.#open.values()].map((o) => o.settled)), grace])
      clearTimeout(timer)
      for (const o of [...this.#open.values()]) o.cut()
    }
    const summary = this.summary()
    this.#closed = summary
    // Bounded: each pending write is a single store batch.
    while (this.#pending.size > 0) await Promise.all([...this.#pending])
    if (this.#writeError) {
      throw new ToolReplayError(
        ErrorCodes.STORE_IO,
        `Failed to write trace "${this.#recording?.name ?? this.trace}" to the store at ${this.#store.location}: ${String((this.#writeError as Error)?.message ?? this.#writeError)}. The recording stays partial; fix the store and record again.`,
        { cause: this.#writeError },
      )
    }
    if (this.#recording) await this.#recording.close()
    return summary
  }

  /**
   * Ends the session without completing its recording: use it when the run never really happened (the
   * proxy could not start, the command could not be spawned). The recording stays listed as partial and
   * the previous trace of that name stays the one replayed. Idempotent; close() afterwards is a no-op.
   */
  async discard(): Promise<SessionSummary> {
    if (this.#closed) return this.#closed
    const summary = this.summary()
    this.#closed = summary
    for (const o of [...this.#open.values()]) o.cut()
    while (this.#pending.size > 0) await Promise.all([...this.#pending])
    return summary
  }

  /** Throws TR_REPLAY_INCOMPLETE listing every miss, overrun and unused recording (strict replay). */
  assertDone(): void {
    const s = this.summary()
    if (s.ok) return
    throw new ToolReplayError(ErrorCodes.REPLAY_INCOMPLETE, `${formatSummary(s)}\nFix the app or re-record the trace (mode "record").`, {
      details: { summary: s },
    })
  }
}

/**
 * Applies JSON-path redaction to a response body, decoding it first when it is compressed (token endpoints
 * usually gzip). Returns undefined when nothing changed, else the new bytes and headers with framing fixed:
 * Content-Length matches, and a decoded body loses its Content-Encoding.
 */
function redactResponseBody(redactor: Redactor, bytes: Uint8Array, headers: HeaderPairs): { bytes: Uint8Array; headers: HeaderPairs } | undefined {
  const encoding = headerValue(headers, 'content-encoding')
  const encoded = encoding !== undefined && encoding.trim().toLowerCase() !== 'identity'
  let plain = bytes
  if (encoded) {
    try {
      plain = decodeContentEncoding(bytes, encoding)
    } catch {
      return undefined // not decodable: not JSON we could redact either
    }
  }
  const plainHeaders = encoded ? headers.filter(([k]) => k.toLowerCase() !== 'content-encoding') : headers
  const redacted = redactor.body(plain, plainHeaders)
  if (redacted === plain) return undefined
  return {
    bytes: redacted,
    headers: plainHeaders.map(([k, v]) => (k.toLowerCase() === 'content-length' ? [k, String(redacted.byteLength)] : [k, v])),
  }
}

/** How long close() waits for responses still being recorded (an app that aborted a stream, say). */
const CLOSE_GRACE_MS = 2000

const PASSTHROUGH_RECORDER: ExchangeRecorder = {
  recording: false,
  responseStart() {},
  responseData() {},
  responseEnd: async () => {},
  fail: async () => {},
}

/** Opens a session: loads the trace for replay/update, starts a recording for record/update/recordAs. */
export async function openSession(options: SessionOptions): Promise<Session> {
  if (!MODES.includes(options.mode)) {
    throw new ToolReplayError(ErrorCodes.INVALID_OPTION, `Unknown mode "${String(options.mode)}". Use one of: ${MODES.join(', ')}.`)
  }
  assertTraceName(options.trace)
  if (options.recordAs !== undefined) assertTraceName(options.recordAs, 'recordAs trace name')
  // Parsed now so a typo in a path fails the session at once instead of silently redacting or ignoring nothing.
  for (const p of [...(options.redaction?.bodyPaths ?? []), ...(options.identity?.ignoreBodyPaths ?? [])]) parseJsonPath(p)
  let source: Trace | undefined
  if (options.mode === 'replay') source = await options.store.readTrace(options.trace)
  if (options.mode === 'update') source = (await options.store.hasTrace(options.trace)) ? await options.store.readTrace(options.trace) : undefined
  let recordName: string | undefined
  if (options.mode === 'record' || options.mode === 'update') recordName = options.trace
  if (options.mode === 'replay' && options.recordAs) recordName = options.recordAs
  if (options.tail === 'live' && !(options.mode === 'replay' && options.recordAs)) {
    throw new ToolReplayError(ErrorCodes.INVALID_OPTION, 'tail "live" needs replay mode with recordAs (the live tail is recorded there).')
  }
  const labels: Record<string, string> = { ...options.labels }
  if (options.mode === 'replay' && recordName) labels.observedAgainst = options.trace
  const recording = recordName
    ? await options.store.beginTrace({ name: recordName, format: TRACE_FORMAT_VERSION, ...(Object.keys(labels).length > 0 ? { labels } : {}) })
    : undefined
  return new Session({ options, source, recording })
}
