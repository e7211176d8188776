import { performance } from 'node:perf_hooks'
import { type BodyManifest, type Durability, parseDurability, type TraceReader, type TraceRecording, type TraceStore } from '../store/index.ts'
import {
  type AppRun,
  assertTraceName,
  type BodyRef,
  bodyBytes,
  ErrorCodes,
  type Exchange,
  headerValue,
  type IdentityOptions,
  isToolReplayError,
  parseJsonPath,
  splitChunks,
  ToolReplayError,
  TRACE_FORMAT_VERSION,
  type Trace,
  websocketBodyRefs,
} from '../trace/index.ts'
import { ArrivalOrder, type Ticket } from './arrival-order.ts'
import { redactRequestBody } from './body-redaction.ts'
import type { CapturedRequest, ConnectionRequest, Decision, ExchangeRecorder, Playback, PlaybackChunk, PlaybackChunks } from './decision.ts'
import { createExchangeRecorder, type OpenRecorder, PASSTHROUGH_RECORDER } from './exchange-recorder.ts'
import { type FaultHost, SessionFaults, type SessionFaultsOptions } from './fault-host/session-faults.ts'
import { entryFromError, formatSummary, type LedgerEntry, RetryFolding, type SessionSummary } from './ledger.ts'
import { assertPlayable } from './playable.ts'
import { type RedactionOptions, Redactor } from './redaction.ts'
import { MemoryReplayIndex, type ReplayIndex, StoreReplayIndex, type Take, type UnusedRecording } from './replay-index.ts'
import { DEFAULT_MAX_BODY_BYTES } from './transport-rules.ts'
import { createWebSocketRecorder, passthroughWebSocketRecorder, type WebSocketRecorder } from './websocket-recorder.ts'
import { playedMessage, type WebSocketPlayback } from './websocket-replay.ts'

/**
 * What a capture path must do with one WebSocket upgrade: relay it and feed `recorder` (passthrough's records
 * nothing), play the recorded session (`websocket`; absent when the upstream had refused the upgrade, whose
 * HTTP answer `playback` is), or refuse it.
 */
export type WebSocketDecision =
  | { kind: 'forward'; recorder: WebSocketRecorder }
  | { kind: 'replay'; exchange: Exchange; playback: Playback; websocket?: WebSocketPlayback }
  | { kind: 'fail'; error: ToolReplayError }

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
  /** Update mode: keep the recordings the run did not request (after the others) instead of dropping them. */
  keepUnused?: boolean
  /** Where the engine's warnings go (a live tail starting). Default: process.emitWarning. */
  onWarning?: (message: string) => void
  /** Labels stored with a recorded trace, e.g. { recordedWith: 'proxy' }. */
  labels?: Record<string, string>
  /** Largest response body kept whole for JSON body-path redaction (default 64 MiB). */
  maxBodyBytes?: number
  /**
   * 'auto' (default): a trace of up to 50,000 exchanges and 64 MiB of bodies is replayed from memory, a bigger
   * one through the store's index with bodies read as played. 'none': always through the store (memory stays
   * flat; each request costs a store read).
   */
  preload?: 'auto' | 'none'
  /** Fault rules and their seed: requests that go live may be faulted (see session-faults.ts). */
  faults?: SessionFaultsOptions
  /**
   * How far each recorded exchange is on its way to disk before its client sees the answer end: 'write'
   * (default) survives the process being killed, 'fsync' a power cut too (docs/durability.md).
   */
  durability?: Durability
}

/** A trace up to this many exchanges is replayed from memory; a bigger one through the store's index. */
const MEMORY_MAX_EXCHANGES = 50_000
/** Bodies are loaded up front while the trace's bodies add up to at most this; else read when played. */
const MEMORY_MAX_BODY_BYTES = 64 * 1024 * 1024
/** Played bodies are cut into reads of at most this size, whatever chunk a body was recorded (or imported) as. */
const MAX_PLAYED_CHUNK = 1024 * 1024

/** What replay serves from. */
interface ReplaySource {
  index: ReplayIndex
  /** Bodies in memory (all of them, or the request bodies only). */
  bodies: Map<string, Uint8Array>
  /**
   * Set when every exchange was checked against the trace rules as the source was opened (a trace held in
   * memory): the ones that broke them, with why. Playback then checks nothing more; without it (a trace read
   * through the store as it is played) each exchange is checked when it is played.
   */
  invalid?: Map<Exchange, ToolReplayError>
  /** The store, for bodies not in memory. */
  reader?: TraceReader
  /** The trace's labels (a faulted recording names its seed there). */
  labels?: Record<string, string>
}

/**
 * One record or replay session over one trace. The matching and strictness rules live here once;
 * capture paths (interceptor, proxy) only translate between the wire and `handle()`.
 * @example
 * const session = await openSession({ mode: 'replay', trace: 'checkout', store })
 * const decision = await session.handle({ method: 'GET', url, headers: [], body: null })
 */
export class Session {
  readonly mode: Mode
  readonly trace: string
  readonly #store: TraceStore
  readonly #redactor: Redactor
  readonly #maxBodyBytes: number
  readonly #source: ReplaySource | undefined
  readonly #recording: TraceRecording | undefined
  readonly #tail: 'strict' | 'live'
  readonly #keepUnused: boolean
  readonly #warn: (message: string) => void
  readonly #t0 = performance.now()
  readonly #arrivals = new ArrivalOrder()
  readonly #pending = new Set<Promise<void>>()
  /** Recorders whose response has not finished yet, with a way to settle them when close() cannot wait longer. */
  readonly #open = new Set<OpenRecorder>()
  readonly #misses: LedgerEntry[] = []
  readonly #exhausted: LedgerEntry[] = []
  readonly #live: LedgerEntry[] = []
  #afterUpdate: { dropped: LedgerEntry[]; kept: LedgerEntry[] } | undefined
  /** Folds an SDK's retries of one refused request into one ledger entry. */
  readonly #retries = new RetryFolding()
  #seq = 0
  #replayed = 0
  #recorded = 0
  #passedThrough = 0
  #tailLive = false
  #closed: SessionSummary | undefined
  #finalUnused: LedgerEntry[] | undefined
  #writeError: unknown
  #app: AppRun | undefined
  readonly #faults: SessionFaults | undefined
  /** ms since the session started, on the faults' clock when one is given. */
  readonly #now: () => number

  /** Use `openSession`. */
  constructor(init: { options: SessionOptions; source: ReplaySource | undefined; recording: TraceRecording | undefined }) {
    const { options } = init
    this.mode = options.mode
    this.trace = options.trace
    this.#store = options.store
    this.#redactor = new Redactor(options.redaction)
    this.#maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES
    this.#source = init.source
    this.#recording = init.recording
    this.#tail = options.tail ?? 'strict'
    this.#keepUnused = options.keepUnused === true
    this.#warn = options.onWarning ?? ((message) => process.emitWarning(message, { type: 'ToolReplayWarning', code: 'TR_LIVE_TAIL' }))
    const clock = options.faults?.clock
    this.#now = clock ? () => clock.now() : () => performance.now() - this.#t0
    const traceSeed = options.mode === 'replay' ? init.source?.labels?.faultsSeed : undefined
    this.#faults = options.faults && new SessionFaults(options.faults, { now: this.#now, ...(traceSeed !== undefined ? { traceSeed } : {}) })
  }

  /** The session's faults (rules, seed, coverage), when it has any. */
  get faults(): SessionFaults | undefined {
    return this.#faults
  }

  /**
   * The command the run was made with and how it ended (`tr-proxy record|replay -- <command>`): stored in the
   * recording's meta when close() completes it. No effect on a session that records nothing.
   */
  setAppRun(app: AppRun): void {
    this.#app = app
  }

  /** The values this session's redaction replaced so far: scrub them from free text stored with the trace. */
  redactedValues(): string[] {
    return this.#redactor.replacedValues()
  }

  /** The trace that holds what the app got in this run: the recording, or the replayed trace; none for passthrough. */
  get observedTrace(): string | undefined {
    return this.#recording?.name ?? (this.mode === 'passthrough' ? undefined : this.trace)
  }

  /**
   * A place in the order requests reach the engine: take it when the request (or the connection that will
   * carry it) first appears, and call `handle` inside `ticket.turn(...)`. See arrival-order.ts.
   */
  arrival(): Ticket {
    return this.#arrivals.ticket()
  }

  /** The store this session writes to. */
  get store(): TraceStore {
    return this.#store
  }

  /** Every miss and overrun so far (the ledger). */
  get ledger(): readonly LedgerEntry[] {
    return [...this.#misses, ...this.#exhausted]
  }

  /**
   * Decides what to do with one request. Synchronous while the trace is replayed from memory; a promise
   * when the store must be asked (traces too big to hold).
   */
  handle(captured: CapturedRequest): Decision | Promise<Decision> {
    try {
      const d = this.#handle(captured)
      return d instanceof Promise ? d.catch((err: unknown) => this.#unreadable(captured, err)) : d
    } catch (err) {
      return this.#unreadable(captured, err)
    }
  }

  /**
   * A request the engine cannot even read (a bad URL, a throwing custom identity, a damaged store) still
   * counts against strict replay: it goes in the ledger, so the run fails at the end even if the app swallows it.
   */
  #unreadable(captured: CapturedRequest, err: unknown): Decision {
    const error = isToolReplayError(err)
      ? err
      : new ToolReplayError(ErrorCodes.INTERNAL, `Failed to handle ${captured.method} ${captured.url}: ${(err as Error)?.message ?? String(err)}`, {
          cause: err,
        })
    if (this.mode === 'replay' || this.mode === 'update') this.#misses.push(entryFromError(error, `${captured.method} ${captured.url}`))
    return { kind: 'fail', error }
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
   * Decides a WebSocket upgrade. Record and update (for what the trace lacks) relay it and record the session as
   * one exchange; passthrough relays it; replay plays the recorded session, and an upgrade nothing recorded is a
   * miss in the ledger like any request. A client message the replayed session cannot answer is reported with
   * `refuse` by the path that plays it (engine/websocket-replay.ts decides that it is one).
   */
  handleWebSocket(captured: CapturedRequest): WebSocketDecision | Promise<WebSocketDecision> {
    const d = this.#closed ? this.#handle(captured) : undefined
    if (d) return d as WebSocketDecision
    const request = this.#redactRequest(captured)
    const startMs = this.#now()
    const seq = this.#seq++
    if (this.#tailLive || this.mode === 'record' || this.mode === 'passthrough' || !this.#source) {
      return this.#relayWebSocket(request, seq, startMs, this.mode !== 'passthrough', this.#tailLive)
    }
    const decide = (taken: Take): WebSocketDecision | Promise<WebSocketDecision> => {
      if (taken.kind === 'match') return this.#replayWebSocket(seq, startMs, taken.exchange)
      if (this.mode === 'update') return this.#relayWebSocket(request, seq, startMs, true, false)
      if (this.#tailAllowed) {
        this.#startTail(request, 'no recorded WebSocket session matches it')
        return this.#relayWebSocket(request, seq, startMs, true, true)
      }
      // A miss or an overrun in strict replay: the ledger entry and the refusal are those of any request.
      const decision = this.#decide(request, seq, startMs, taken)
      const settle = (x: Decision): WebSocketDecision =>
        x.kind === 'fail' ? x : { kind: 'fail', error: new ToolReplayError(ErrorCodes.INTERNAL, 'a strict miss was not refused') }
      return decision instanceof Promise ? decision.then(settle) : settle(decision)
    }
    const taken = this.#source.index.take(request)
    return taken instanceof Promise ? taken.then(decide) : decide(taken)
  }

  #relayWebSocket(request: CapturedRequest, seq: number, startMs: number, recording: boolean, live: boolean): WebSocketDecision {
    // The HTTP recorder for an upgrade the upstream refused is made on demand; #recorder counts it, so it is not counted here.
    const http = () => this.#recorder(request, seq, startMs, recording, live)
    if (!recording || !this.#recording) {
      this.#passedThrough++
      return { kind: 'forward', recorder: passthroughWebSocketRecorder(PASSTHROUGH_RECORDER) }
    }
    this.#recorded++
    let settle = () => {}
    const settled = new Promise<void>((resolve) => (settle = resolve))
    const recorder = createWebSocketRecorder(
      {
        redactor: this.#redactor,
        maxBytes: this.#maxBodyBytes,
        write: (x, bodies) => this.#write(live ? { ...x, origin: 'live' } : x, bodies),
        http: () => {
          this.#recorded--
          return http()
        },
        now: this.#now,
      },
      request,
      seq,
      startMs,
    )
    const end = recorder.end.bind(recorder)
    recorder.end = (error) => end(error).finally(settle)
    const open: OpenRecorder = {
      recorder: PASSTHROUGH_RECORDER,
      settled,
      cut: () => recorder.end({ code: 'TR_SESSION_CLOSED', message: 'The session closed while the WebSocket was open; the trace keeps what had arrived.' }),
    }
    this.#open.add(open)
    void settled.then(() => this.#open.delete(open))
    return { kind: 'forward', recorder }
  }

  #replayWebSocket(seq: number, startMs: number, exchange: Exchange): WebSocketDecision | Promise<WebSocketDecision> {
    this.#replayed++
    if (this.#recording) this.#write({ ...exchange, seq, timing: { ...exchange.timing, startMs: Math.round(startMs) } }, this.#source?.bodies ?? new Map())
    const playback = this.#playback(exchange)
    const ws = exchange.websocket
    if (!ws || playback.kind !== 'response') return { kind: 'replay', exchange, playback }
    const source = this.#source as ReplaySource
    const head = playback.head
    const build = (bytes: Uint8Array[]): WebSocketDecision => ({
      kind: 'replay',
      exchange,
      playback,
      websocket: {
        head,
        headersMs: exchange.timing.headersMs,
        messages: ws.messages.map((m, i) => playedMessage(m, bytes[i] as Uint8Array)),
        ...(ws.end ? { end: ws.end } : {}),
      },
    })
    const inMemory = ws.messages.map((m) => source.bodies.get(m.body.digest))
    if (inMemory.every((b) => b !== undefined) || !source.reader) {
      return build(ws.messages.map((m) => bodyBytes({ bodies: source.bodies, meta: { name: this.trace, format: 1 } }, m.body)))
    }
    const reader = source.reader
    return Promise.all(ws.messages.map((m, i) => inMemory[i] ?? reader.bodyBytes(m.body, `exchange #${exchange.seq} websocket message #${i}`))).then(build)
  }

  /**
   * Records that a capture path could not even hand a request to the engine (a body over its buffer limit,
   * say). Live modes only report it; strict replay also counts it in the ledger, since the run did not
   * get what was recorded.
   */
  refuse(captured: Pick<CapturedRequest, 'method' | 'url'>, error: ToolReplayError): void {
    if (this.mode === 'replay') this.#misses.push(entryFromError(error, `${captured.method} ${this.#redactor.url(captured.url)}`))
  }

  /**
   * Decides a connection that carries nothing a trace can hold (a sealed run's database client, raw TCP, HTTP/2
   * without TLS, UDP other than DNS). Live modes let it through unrecorded (`forward`, when the path can carry it);
   * strict replay refuses it and puts it in the ledger with its host, port and protocol, so the run fails at the
   * end even when the app swallows the closed connection. An SDK's retries in a row fold into one entry.
   */
  handleConnection(c: ConnectionRequest): Decision {
    const label = `${c.transport.toUpperCase()} ${c.host.includes(':') ? `[${c.host}]` : c.host}:${c.port} (${c.protocol})`
    if (this.mode !== 'replay' || this.#tailLive) {
      if (c.transport === 'tcp') this.#passedThrough++
      return { kind: 'forward', recorder: PASSTHROUGH_RECORDER }
    }
    const error = new ToolReplayError(
      ErrorCodes.REPLAY_MISS,
      `Failed to replay a ${c.transport.toUpperCase()} connection to ${label.slice(4)}: a trace holds HTTP exchanges only, so strict replay has nothing to answer it with and closed it. ${c.remedy}`,
      { details: { connection: { transport: c.transport, host: c.host, port: c.port, protocol: c.protocol } } },
    )
    const entry = entryFromError(error, label)
    if (!this.#retries.fold(entry, label, [], this.#seq++)) this.#misses.push(entry)
    return { kind: 'fail', error }
  }

  #handle(captured: CapturedRequest): Decision | Promise<Decision> {
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
    const startMs = this.#now()
    const seq = this.#seq++
    const signal = captured.signal
    if (this.#tailLive) return this.#goLive(request, seq, startMs, 'after the live tail started', signal)
    if (this.mode === 'record' || !this.#source) return this.#forward(request, seq, startMs, this.mode !== 'passthrough', signal)
    const taken = this.#source.index.take(request)
    return taken instanceof Promise ? taken.then((t) => this.#decide(request, seq, startMs, t, signal)) : this.#decide(request, seq, startMs, taken, signal)
  }

  /** A request that goes live: forwarded as it is, or faulted when a fault rule selects it. */
  #forward(request: CapturedRequest, seq: number, startMs: number, recording: boolean, signal?: AbortSignal, live = false): Decision | Promise<Decision> {
    const fault = this.#faults?.decide(request, startMs)
    if (!fault) return { kind: 'forward', recorder: this.#recorder(request, seq, startMs, recording, live) }
    const host: FaultHost = {
      request,
      seq,
      startMs,
      signal,
      recorder: (finalize) => this.#recorder(request, seq, startMs, recording, live, finalize),
      write: (exchange, bodies) => {
        if (!recording || !this.#recording) return
        this.#recorded++
        void this.#write(live ? { ...exchange, origin: 'live' } : exchange, bodies)
      },
      redactor: this.#redactor,
      maxBodyBytes: this.#maxBodyBytes,
    }
    if (!recording || !this.#recording) {
      const action = fault.action.do
      if (action === 'respond' || action === 'fail') this.#passedThrough++
    }
    return this.#faults?.carryOut(fault, host) as Decision | Promise<Decision>
  }

  #decide(request: CapturedRequest, seq: number, startMs: number, taken: Take, signal?: AbortSignal): Decision | Promise<Decision> {
    const label = `${request.method} ${request.url}`
    if (taken.kind === 'match') {
      this.#faults?.replayed(request, taken.exchange)
      this.#replayed++
      if (this.#recording)
        this.#write({ ...taken.exchange, seq, timing: { ...taken.exchange.timing, startMs: Math.round(startMs) } }, this.#source?.bodies ?? new Map())
      return { kind: 'replay', exchange: taken.exchange, playback: this.#playback(taken.exchange) }
    }
    if (this.mode === 'update') return this.#forward(request, seq, startMs, true, signal)
    if (taken.kind === 'exhausted') {
      const error = new ToolReplayError(
        ErrorCodes.REPLAY_EXHAUSTED,
        `Failed to replay "${label} #${taken.occurrence}": trace "${this.trace}" recorded this request ${taken.recorded} time(s) (${occurrenceRange(taken.recorded)}) and this is #${taken.occurrence}. Tool Replay never repeats a recording. Re-record the trace, or find why the app sends it more often (a retry loop?).`,
        { details: { request: label, recorded: taken.recorded, occurrence: taken.occurrence + 1 } },
      )
      if (this.#tailAllowed) return this.#goLive(request, seq, startMs, `the trace has no recording #${taken.occurrence + 1} of it`, signal)
      const entry = entryFromError(error, `${label} #${taken.occurrence}`)
      if (!this.#retries.fold(entry, taken.identity, request.headers, seq)) this.#exhausted.push(entry)
      return this.#refused(request, seq, startMs, error)
    }
    if (this.#tailAllowed) return this.#goLive(request, seq, startMs, 'no recorded exchange matches it', signal)
    const explain = (candidates: Array<{ request: string; differences: string[] }>) => {
      const error = this.#missError(request, candidates, label)
      const entry = entryFromError(error, label)
      if (!this.#retries.fold(entry, taken.identity, request.headers, seq)) this.#misses.push(entry)
      return this.#refused(request, seq, startMs, error)
    }
    const candidates = (this.#source as ReplaySource).index.candidates(taken.parts)
    return candidates instanceof Promise ? candidates.then(explain) : explain(candidates)
  }

  /** A live tail is allowed: replay with recordAs and tail 'live'. */
  get #tailAllowed(): boolean {
    return this.#tail === 'live' && this.#recording !== undefined && this.mode === 'replay'
  }

  /**
   * The live tail (opt-in): this request and every later one go to the real upstream and are recorded,
   * marked live. Not a failure: the run is reported as having gone live, loudly, on both paths.
   */
  #goLive(request: CapturedRequest, seq: number, startMs: number, why: string, signal?: AbortSignal): Decision | Promise<Decision> {
    this.#startTail(request, why)
    return this.#forward(request, seq, startMs, true, signal, true)
  }

  /** Marks the live tail started (warning once) and lists this request as gone live. */
  #startTail(request: CapturedRequest, why: string): void {
    const label = `${request.method} ${request.url}`
    if (!this.#tailLive) {
      this.#tailLive = true
      this.#warn(
        `Tool Replay: replay of trace "${this.trace}" went LIVE at ${label} (${why}); from here on requests reach the real upstream and are recorded into "${this.#recording?.name}". This run is NOT offline.`,
      )
    }
    this.#live.push({ code: ErrorCodes.REPLAY_MISS, request: label, message: this.#live.length === 0 ? `went live here: ${why}` : 'forwarded live' })
  }

  /** A refusal: kept in a record-as trace so diff shows what the app asked for. */
  #refused(request: CapturedRequest, seq: number, startMs: number, error: ToolReplayError): Decision {
    if (this.#recording) void this.#recorder(request, seq, startMs, true).fail({ code: error.code, message: error.message }, 'connect')
    return { kind: 'fail', error }
  }

  #missError(request: CapturedRequest, candidates: Array<{ request: string; differences: string[] }>, label: string): ToolReplayError {
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
    // Compressed JSON bodies are decoded to redact them (engine/body-redaction.ts), on record and replay alike.
    const redacted = c.body ? redactRequestBody(this.#redactor, c, headers, this.#maxBodyBytes) : undefined
    return { method: c.method.toUpperCase(), url, headers: redacted?.headers ?? headers, body: redacted?.bytes ?? c.body }
  }

  #playback(exchange: Exchange): Playback {
    const source = this.#source as ReplaySource
    if (!source.invalid) assertPlayable(exchange, this.trace, source.bodies)
    else {
      const invalid = source.invalid.get(exchange)
      if (invalid) throw invalid
    }
    const { outcome } = exchange
    if (outcome.kind === 'response') {
      const r = outcome.response
      return {
        kind: 'response',
        head: { status: r.status, statusText: r.statusText, headers: r.headers },
        headersMs: exchange.timing.headersMs,
        chunks: this.#chunks(r.body, `exchange #${exchange.seq} response`),
        trailers: r.trailers,
      }
    }
    const p = outcome.error.partial
    // A failure a fault made was the app's own connection failing: replayed as such on both paths.
    const injected = exchange.fault ? { injected: true } : {}
    if (!p) return { kind: 'error', error: outcome.error, headersMs: exchange.timing.headersMs, chunks: [], ...injected }
    return {
      kind: 'error',
      error: outcome.error,
      headersMs: exchange.timing.headersMs,
      head: { status: p.status, statusText: p.statusText, headers: p.headers },
      chunks: this.#chunks(p.body, `exchange #${exchange.seq} partial response`),
      ...injected,
    }
  }

  /** A body's recorded chunks: from memory, or streamed from the store (each piece verified before it is played). */
  #chunks(ref: BodyRef, use: string): PlaybackChunks {
    const source = this.#source as ReplaySource
    const bytes = source.bodies.get(ref.digest)
    if (bytes !== undefined || !source.reader) return splitChunks(bodyBytes({ bodies: source.bodies, meta: { name: this.trace, format: 1 } }, ref), ref)
    const reader = source.reader
    const onDamage = (err: unknown) => {
      // Damaged bytes are never played, and the run fails even if the app swallows the broken response.
      if (isToolReplayError(err)) this.#misses.push(entryFromError(err, use))
    }
    return streamChunks(reader.bodyPieces(ref, use), ref, onDamage)
  }

  #recorder(
    request: CapturedRequest,
    seq: number,
    startMs: number,
    recording: boolean,
    live = false,
    finalize?: (exchange: Exchange, bodies: Map<string, Uint8Array>) => Exchange,
  ): ExchangeRecorder {
    if (!recording || !this.#recording) {
      this.#passedThrough++
      return PASSTHROUGH_RECORDER
    }
    this.#recorded++
    const open = createExchangeRecorder(
      {
        recording: this.#recording,
        redactor: this.#redactor,
        maxBodyBytes: this.#maxBodyBytes,
        write: (exchange, bodies, manifests) => {
          if (!finalize) return this.#write(exchange, bodies, manifests)
          // A faulted exchange: the app's view and its bodies join what the upstream sent.
          const all = new Map(bodies)
          return this.#write(finalize(exchange, all), all, manifests)
        },
        lost: (err) => {
          this.#writeError ??= err
        },
        now: this.#now,
      },
      request,
      seq,
      startMs,
      live,
    )
    this.#open.add(open)
    void open.settled.then(() => this.#open.delete(open))
    return open.recorder
  }

  #write(exchange: Exchange, bodies: ReadonlyMap<string, Uint8Array>, manifests: ReadonlyMap<string, BodyManifest> = new Map()): Promise<void> {
    const rec = this.#recording as TraceRecording
    const own = new Map<string, Uint8Array>()
    const upstream = exchange.fault?.upstream
    for (const ref of [
      exchange.request.body,
      exchange.outcome.kind === 'response' ? exchange.outcome.response.body : exchange.outcome.error.partial?.body,
      upstream?.kind === 'response' ? upstream.response.body : upstream?.error.partial?.body,
      ...websocketBodyRefs(exchange).map(([ref]) => ref),
    ]) {
      if (ref) {
        const b = bodies.get(ref.digest)
        if (b) own.set(ref.digest, b)
      }
    }
    const p = rec.append(exchange, own, manifests).then(
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

  /** Replayed exchanges never requested so far (for a trace replayed through the store: see summary()). */
  unused(): LedgerEntry[] {
    if (this.#finalUnused) return this.#finalUnused
    if ((this.mode !== 'replay' && this.mode !== 'update') || !this.#source) return []
    const listed = this.#source.index.unused()
    if (!(listed instanceof Promise)) return listed.map(unusedEntry)
    listed.catch(() => {})
    const n = this.#source.index.unusedCount
    // Listing them means reading the store's index: done at close(); until then, the count.
    return n === 0
      ? []
      : [
          {
            code: ErrorCodes.REPLAY_UNUSED,
            request: `${n} recorded exchange(s)`,
            message: `${n} recorded exchange(s) were not requested so far; they are listed when the session closes.`,
          },
        ]
  }

  /** The summary so far, without closing. */
  summary(): SessionSummary {
    if (this.#closed) return this.#closed
    // Once a live tail started, recordings the run did not reach are where it went another way: not unused.
    const unused = this.mode === 'replay' && !this.#tailLive ? this.unused() : []
    const update = this.#afterUpdate ?? { dropped: this.mode === 'update' && !this.#keepUnused ? this.unused() : [], kept: [] }
    return {
      trace: this.trace,
      mode: this.mode,
      replayed: this.#replayed,
      recorded: this.#recorded,
      passedThrough: this.#passedThrough,
      misses: [...this.#misses],
      exhausted: [...this.#exhausted],
      unused,
      live: [...this.#live],
      dropped: update.dropped,
      kept: update.kept,
      ok: this.#misses.length === 0 && this.#exhausted.length === 0 && unused.length === 0,
    }
  }

  /** Waits for pending writes, closes the recording (making it complete) and returns the summary. Idempotent. */
  async close(): Promise<SessionSummary> {
    if (this.#closed) return this.#closed
    // Fault waits end now; what they made is recorded before the recording closes.
    await this.#faults?.close()
    // Responses still streaming get a bounded grace period to finish, then are kept as what arrived.
    if (this.#open.size > 0) {
      let timer: NodeJS.Timeout | undefined
      const grace = new Promise<void>((resolve) => (timer = setTimeout(resolve, CLOSE_GRACE_MS)))
      await Promise.race([Promise.all([...this.#open].map((o) => o.settled)), grace])
      clearTimeout(timer)
      await Promise.all([...this.#open].map((o) => o.cut()))
    }
    if ((this.mode === 'replay' || this.mode === 'update') && this.#source) {
      const listed = await this.#source.index.unused(this.mode === 'update' ? Number.POSITIVE_INFINITY : undefined)
      this.#finalUnused = listed.map(unusedEntry)
      if (this.mode === 'update') this.#afterUpdate = await this.#settleUpdate(listed)
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
    if (this.#recording) await this.#recording.close(this.#app)
    return summary
  }

  /**
   * Update mode: the recordings the run did not request are dropped from the new trace, or, with keepUnused,
   * appended after the others (renumbered, in their recorded order).
   */
  async #settleUpdate(unused: UnusedRecording[]): Promise<{ dropped: LedgerEntry[]; kept: LedgerEntry[] }> {
    const entries = unused.map(unusedEntry)
    if (!this.#keepUnused || !this.#recording) {
      return {
        dropped: entries.map((e) => ({ ...e, message: e.message.replace(/The app did less.*$/, 'Dropped from the new trace (keepUnused keeps it).') })),
        kept: [],
      }
    }
    for (const u of unused) this.#write({ ...u.exchange, seq: this.#seq++ }, this.#source?.bodies ?? new Map())
    return {
      dropped: [],
      kept: entries.map((e) => ({ ...e, message: e.message.replace(/The app did less.*$/, 'Kept in the new trace, after the requested ones.') })),
    }
  }

  /**
   * Ends the session without completing its recording: use it when the run never really happened (the
   * proxy could not start, the command could not be spawned). The recording stays listed as partial and
   * the previous trace of that name stays the one replayed. Idempotent; close() afterwards is a no-op.
   */
  async discard(): Promise<SessionSummary> {
    if (this.#closed) return this.#closed
    await this.#faults?.close()
    const summary = this.summary()
    this.#closed = summary
    await Promise.all([...this.#open].map((o) => o.cut()))
    while (this.#pending.size > 0) await Promise.all([...this.#pending])
    return summary
  }

  /**
   * Throws TR_REPLAY_INCOMPLETE listing every miss, overrun and unused recording (strict replay), then
   * TR_FAULT_NOT_FIRED when a fault rule that is not optional never triggered.
   */
  assertDone(): void {
    const s = this.summary()
    if (s.ok) {
      this.#faults?.assertAllFired()
      return
    }
    throw new ToolReplayError(ErrorCodes.REPLAY_INCOMPLETE, `${formatSummary(s)}\nFix the app or re-record the trace (mode "record").`, {
      details: { summary: s },
    })
  }
}

/**
 * The occurrences of a request a trace recorded `n` times, as every report numbers them: `#0`, `#1`, ... after
 * the request (`GET https://api.test/x #1`, as in `tr-proxy diff` and fork selectors); a lone `#N` is an exchange.
 */
function occurrenceRange(n: number): string {
  return n === 1 ? '#0' : n === 2 ? '#0 and #1' : `#0 to #${n - 1}`
}

function unusedEntry(u: UnusedRecording): LedgerEntry {
  return {
    code: ErrorCodes.REPLAY_UNUSED,
    request: `${u.label} #${u.occurrence}`,
    message: `never requested (it is exchange #${u.seq} of the trace). The app did less than when it was recorded; re-record, or check what changed.`,
  }
}

/**
 * A stored body's recorded chunks, read piece by piece as they are played: memory holds one piece and one
 * chunk, whatever the body's size. A piece that fails verification ends the stream with its error.
 */
async function* streamChunks(pieces: AsyncIterable<Uint8Array>, ref: BodyRef, onDamage: (err: unknown) => void): AsyncGenerator<PlaybackChunk> {
  const chunks = ref.chunks.length > 0 ? ref.chunks : [{ size: ref.size, atMs: 0 }]
  let c = 0
  let need = chunks[0]?.size ?? 0
  let parts: Uint8Array[] = []
  try {
    for await (const piece of pieces) {
      let offset = 0
      while (offset < piece.byteLength && c < chunks.length) {
        const take = Math.min(need, piece.byteLength - offset, MAX_PLAYED_CHUNK)
        parts.push(piece.subarray(offset, offset + take))
        offset += take
        need -= take
        const atMs = (chunks[c] as { atMs: number }).atMs
        const partSize = parts.reduce((n, p) => n + p.byteLength, 0)
        if (need === 0 || partSize >= MAX_PLAYED_CHUNK) {
          yield { bytes: parts.length === 1 ? (parts[0] as Uint8Array) : Buffer.concat(parts), atMs }
          parts = []
          if (need === 0) need = chunks[++c]?.size ?? 0
        }
      }
    }
  } catch (err) {
    onDamage(err)
    throw err
  }
}

const CLOSE_GRACE_MS = 2000

function isDefaultIdentity(identity: IdentityOptions | undefined): boolean {
  return !identity || Object.values(identity).every((v) => v === undefined || (Array.isArray(v) && v.length === 0))
}

/** Opens what replay serves from: the trace in memory when it is small, else the store's index and lazy bodies. */
async function openReplaySource(store: TraceStore, name: string, identity: IdentityOptions, preload: 'auto' | 'none'): Promise<ReplaySource> {
  const reader = await store.openTrace(name)
  const { count, bodyBytes: total, indexed } = reader.info
  if (preload === 'auto' && count <= MEMORY_MAX_EXCHANGES && total <= MEMORY_MAX_BODY_BYTES) {
    const trace = await reader.readAll()
    return { index: new MemoryReplayIndex(trace, identity), bodies: trace.bodies, invalid: invalidExchanges(trace), ...labelsOf(trace.meta) }
  }
  if (indexed && isDefaultIdentity(identity)) return { index: new StoreReplayIndex(reader), bodies: new Map(), reader, ...labelsOf(reader.info.meta) }
  // Custom identity rules (or a trace from before the index): identities are computed here, from the
  // exchanges and request bodies; response bodies still stay in the store until played.
  const exchanges: Exchange[] = []
  const bodies = new Map<string, Uint8Array>()
  for await (const x of reader.exchanges()) {
    exchanges.push(x)
    if (x.request.body && !bodies.has(x.request.body.digest))
      bodies.set(x.request.body.digest, await reader.bodyBytes(x.request.body, `exchange #${x.seq} request`))
  }
  const trace: Trace = { meta: reader.info.meta, exchanges, bodies }
  return { index: new MemoryReplayIndex(trace, identity), bodies, reader, ...labelsOf(reader.info.meta) }
}

/**
 * Checks every exchange of a trace held in memory once, as it is opened, instead of each time one is played:
 * the ones that break the trace rules, with their error (they are refused when requested, as before).
 */
function invalidExchanges(trace: Trace): Map<Exchange, ToolReplayError> {
  const invalid = new Map<Exchange, ToolReplayError>()
  for (const x of trace.exchanges) {
    try {
      assertPlayable(x, trace.meta.name, trace.bodies)
    } catch (err) {
      invalid.set(x, err as ToolReplayError)
    }
  }
  return invalid
}

function labelsOf(meta: Trace['meta']): { labels?: Record<string, string> } {
  return meta.labels ? { labels: meta.labels } : {}
}

/** Opens a session: loads the trace for replay/update, starts a recording for record/update/recordAs. */
export async function openSession(options: SessionOptions): Promise<Session> {
  if (!MODES.includes(options.mode)) {
    throw new ToolReplayError(ErrorCodes.INVALID_OPTION, `Unknown mode "${String(options.mode)}". Use one of: ${MODES.join(', ')}.`)
  }
  assertTraceName(options.trace)
  if (options.recordAs !== undefined) assertTraceName(options.recordAs, 'recordAs trace name')
  const durability = parseDurability(options.durability)
  // Parsed now so a typo in a path fails the session at once instead of silently redacting or ignoring nothing.
  for (const p of [...(options.redaction?.bodyPaths ?? []), ...(options.identity?.ignoreBodyPaths ?? [])]) parseJsonPath(p)
  if (options.tail === 'live' && !(options.mode === 'replay' && options.recordAs)) {
    throw new ToolReplayError(ErrorCodes.INVALID_OPTION, 'tail "live" needs replay mode with recordAs (the live tail is recorded there).')
  }
  const identity = options.identity ?? {}
  let source: ReplaySource | undefined
  const preload = options.preload ?? 'auto'
  if (options.mode === 'replay') source = await openReplaySource(options.store, options.trace, identity, preload)
  if (options.mode === 'update' && (await options.store.hasTrace(options.trace)))
    source = await openReplaySource(options.store, options.trace, identity, preload)
  let recordName: string | undefined
  if (options.mode === 'record' || options.mode === 'update') recordName = options.trace
  if (options.mode === 'replay' && options.recordAs) recordName = options.recordAs
  const labels: Record<string, string> = { ...options.labels }
  if (options.mode === 'replay' && recordName) labels.observedAgainst = options.trace
  // A recording made with faults names its seed, so a replay of it can say which seed it reproduces.
  if (options.faults && (options.mode === 'record' || options.mode === 'update')) labels.faultsSeed = options.faults.seed
  const recording = recordName
    ? await options.store.beginTrace({ name: recordName, format: TRACE_FORMAT_VERSION, ...(Object.keys(labels).length > 0 ? { labels } : {}) }, { durability })
    : undefined
  return new Session({ options, source, recording })
}
