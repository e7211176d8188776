import { performance } from 'node:perf_hooks'
import type { TraceRecording, TraceStore } from '../store/index.ts'
import { type AppRun, ErrorCodes, type Exchange, headerValue, isToolReplayError, ToolReplayError } from '../trace/index.ts'
import { ArrivalOrder, type Ticket } from './arrival-order.ts'
import { redactCapturedRequest } from './body-redaction.ts'
import type { CapturedRequest, ConnectionRequest, Decision, ExchangeRecorder, Playback } from './decision.ts'
import { PASSTHROUGH_RECORDER } from './exchange-recorder.ts'
import { type FaultHost, SessionFaults, type WebSocketRecorderFactory } from './fault-host/session-faults.ts'
import { entryFromError, formatSummary, type LedgerEntry, RetryFolding, type SessionSummary, unusedEntry } from './ledger.ts'
import { Redactor } from './redaction.ts'
import type { Take, UnusedRecording } from './replay-index.ts'
import { type Candidates, connectionError, exhaustedError, missError, upgradeError } from './replay-refusals.ts'
import { playbackOf, type ReplaySource, websocketPlaybackOf } from './replay-source.ts'
import type { Mode, SessionOptions } from './session-options.ts'
import { type Finalize, SessionRecording } from './session-recording.ts'
import { DEFAULT_MAX_BODY_BYTES } from './transport-rules.ts'
import type { WebSocketDecision } from './websocket-decision.ts'
import { passthroughWebSocketRecorder } from './websocket-recorder.ts'
import { type WebSocketPlayback, WebSocketUsage } from './websocket-replay.ts'

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
  readonly #recording: SessionRecording | undefined
  readonly #tail: 'strict' | 'live'
  readonly #keepUnused: boolean
  readonly #warn: (message: string) => void
  readonly #t0 = performance.now()
  readonly #arrivals = new ArrivalOrder()
  readonly #misses: LedgerEntry[] = []
  readonly #exhausted: LedgerEntry[] = []
  readonly #live: LedgerEntry[] = []
  readonly #websockets = new WebSocketUsage() // replayed sessions: client messages never sent are unused
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
    this.#tail = options.tail ?? 'strict'
    this.#keepUnused = options.keepUnused === true
    this.#warn = options.onWarning ?? ((message) => process.emitWarning(message, { type: 'ToolReplayWarning', code: 'TR_LIVE_TAIL' }))
    const clock = options.faults?.clock
    this.#now = clock ? () => clock.now() : () => performance.now() - this.#t0
    this.#recording = init.recording && new SessionRecording(init.recording, { redactor: this.#redactor, maxBodyBytes: this.#maxBodyBytes, now: this.#now })
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
    const error = upgradeError(captured, label)
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
      if (taken.kind === 'match') return this.#replayWebSocket(request, seq, startMs, taken.exchange)
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
    const upgradeRefused = () => this.#recorder(request, seq, startMs, recording, live)
    if (!recording || !this.#recording) {
      this.#passedThrough++
      return { kind: 'forward', recorder: passthroughWebSocketRecorder(PASSTHROUGH_RECORDER) }
    }
    this.#recorded++
    const store = this.#recording
    const http = () => {
      this.#recorded--
      return upgradeRefused()
    }
    const make: WebSocketRecorderFactory = (hooks) => store.websocket(request, seq, startMs, live, http, hooks)
    const recorder = this.#faults ? this.#faults.websocketRecorder(request, startMs, make) : make()
    return { kind: 'forward', recorder }
  }

  #replayWebSocket(request: CapturedRequest, seq: number, startMs: number, exchange: Exchange): WebSocketDecision | Promise<WebSocketDecision> {
    this.#faults?.replayed(request, exchange)
    this.#replayed++
    if (this.#recording) this.#write({ ...exchange, seq, timing: { ...exchange.timing, startMs: Math.round(startMs) } }, this.#source?.bodies ?? new Map())
    const playback = this.#playback(exchange)
    if (!exchange.websocket || playback.kind !== 'response') return { kind: 'replay', exchange, playback }
    const websocket = websocketPlaybackOf(this.#source as ReplaySource, this.trace, exchange, playback.head)
    const decision = (w: WebSocketPlayback): WebSocketDecision => ({ kind: 'replay', exchange, playback, websocket: this.#websockets.track(w, exchange) })
    return websocket instanceof Promise ? websocket.then(decision) : decision(websocket)
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
    const error = connectionError(c, label)
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
      const error = exhaustedError(this.trace, label, taken)
      if (this.#tailAllowed) return this.#goLive(request, seq, startMs, `the trace has no recording #${taken.occurrence + 1} of it`, signal)
      const entry = entryFromError(error, `${label} #${taken.occurrence}`)
      if (!this.#retries.fold(entry, taken.identity, request.headers, seq)) this.#exhausted.push(entry)
      return this.#refused(request, seq, startMs, error)
    }
    if (this.#tailAllowed) return this.#goLive(request, seq, startMs, 'no recorded exchange matches it', signal)
    const explain = (candidates: Candidates) => {
      const error = missError(this.trace, request, candidates, label)
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

  #playback(exchange: Exchange): Playback {
    return playbackOf(this.#source as ReplaySource, this.trace, exchange, this.#damaged)
  }

  /** Damaged bytes are never played, and the run fails even if the app swallows the broken response. */
  readonly #damaged = (err: unknown, use: string): void => {
    if (isToolReplayError(err)) this.#misses.push(entryFromError(err, use))
  }

  #redactRequest(c: CapturedRequest): CapturedRequest {
    return redactCapturedRequest(this.#redactor, c, this.#maxBodyBytes)
  }

  #recorder(request: CapturedRequest, seq: number, startMs: number, recording: boolean, live = false, finalize?: Finalize): ExchangeRecorder {
    if (!recording || !this.#recording) {
      this.#passedThrough++
      return PASSTHROUGH_RECORDER
    }
    this.#recorded++
    return this.#recording.recorder(request, seq, startMs, live, finalize)
  }

  #write(exchange: Exchange, bodies: ReadonlyMap<string, Uint8Array>): Promise<void> {
    return (this.#recording as SessionRecording).write(exchange, bodies)
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
    const unused = this.mode === 'replay' && !this.#tailLive ? [...this.unused(), ...this.#websockets.unused()] : []
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
    await this.#recording?.settleOpen(CLOSE_GRACE_MS)
    if ((this.mode === 'replay' || this.mode === 'update') && this.#source) {
      const listed = await this.#source.index.unused(this.mode === 'update' ? Number.POSITIVE_INFINITY : undefined)
      this.#finalUnused = listed.map(unusedEntry)
      if (this.mode === 'update') this.#afterUpdate = await this.#settleUpdate(listed)
    }
    const summary = this.summary()
    this.#closed = summary
    await this.#recording?.drain()
    const lost = this.#recording?.writeError
    if (lost) {
      throw new ToolReplayError(
        ErrorCodes.STORE_IO,
        `Failed to write trace "${this.#recording?.name ?? this.trace}" to the store at ${this.#store.location}: ${String((lost as Error)?.message ?? lost)}. The recording stays partial; fix the store and record again.`,
        { cause: lost },
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
   * proxy could not start, the command could not be spawned). A recording that stored no exchange is removed;
   * one that stored any stays listed as partial. The previous trace of that name stays the one replayed.
   * Idempotent; close() afterwards is a no-op.
   */
  async discard(): Promise<SessionSummary> {
    if (this.#closed) return this.#closed
    await this.#faults?.close()
    const summary = this.summary()
    this.#closed = summary
    await this.#recording?.discard()
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

const CLOSE_GRACE_MS = 2000
