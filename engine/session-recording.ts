/**
 * A session's recording: the recorders it hands out for live exchanges (HTTP and WebSocket), the writes they make,
 * and what close() needs of them: a grace period for answers still streaming, the writes in flight, the first
 * write that failed.
 */
import type { BodyManifest, TraceRecording } from '../store/index.ts'
import { type AppRun, type Exchange, websocketBodyRefs } from '../trace/index.ts'
import type { CapturedRequest, ExchangeRecorder } from './decision.ts'
import { createExchangeRecorder, type OpenRecorder, PASSTHROUGH_RECORDER, RUN_ENDED_CODE } from './exchange-recorder.ts'
import type { Redactor } from './redaction.ts'
import { createWebSocketRecorder, type WebSocketRecorder, type WebSocketRecorderHooks } from './websocket-recorder.ts'

/** What a recording needs from its session. */
export interface SessionRecordingContext {
  redactor: Redactor
  /** Largest body kept whole for JSON redaction. */
  maxBodyBytes: number
  /** ms since the session started. */
  now: () => number
}

/** Turns a faulted exchange into what is stored: the app's view, with its bodies joined to what the upstream sent. */
export type Finalize = (exchange: Exchange, bodies: Map<string, Uint8Array>) => Exchange

/** The recording one session writes: every recorder it opened and every write it made, tracked until close. */
export class SessionRecording {
  readonly #recording: TraceRecording
  readonly #ctx: SessionRecordingContext
  readonly #pending = new Set<Promise<void>>()
  /** Recorders whose response has not finished yet, with a way to settle them when close() cannot wait longer. */
  readonly #open = new Set<OpenRecorder>()
  #writeError: unknown

  constructor(recording: TraceRecording, ctx: SessionRecordingContext) {
    this.#recording = recording
    this.#ctx = ctx
  }

  /** The recorded trace's name. */
  get name(): string {
    return this.#recording.name
  }

  /** The first write that failed (the recording stays partial), if any. */
  get writeError(): unknown {
    return this.#writeError
  }

  /** A recorder for the live exchange of `request` (redacted), numbered `seq`; `live` marks a live-tail exchange. */
  recorder(request: CapturedRequest, seq: number, startMs: number, live: boolean, finalize?: Finalize): ExchangeRecorder {
    const open = createExchangeRecorder(
      {
        recording: this.#recording,
        redactor: this.#ctx.redactor,
        maxBodyBytes: this.#ctx.maxBodyBytes,
        write: (exchange, bodies, manifests) => {
          if (!finalize) return this.write(exchange, bodies, manifests)
          // A faulted exchange: the app's view and its bodies join what the upstream sent.
          const all = new Map(bodies)
          return this.write(finalize(exchange, all), all, manifests)
        },
        lost: (err) => {
          this.#writeError ??= err
        },
        now: this.#ctx.now,
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

  /**
   * A recorder for a relayed WebSocket session, stored as one exchange; `http` makes the HTTP recorder for an
   * upgrade the upstream refused; `finalize` rewrites the session's exchange before it is written (a fault's app view).
   * Closing the session while it is open keeps what had arrived.
   */
  websocket(
    request: CapturedRequest,
    seq: number,
    startMs: number,
    live: boolean,
    http: () => ExchangeRecorder,
    hooks: WebSocketRecorderHooks = {},
  ): WebSocketRecorder {
    let settle = () => {}
    const settled = new Promise<void>((resolve) => (settle = resolve))
    const recorder = createWebSocketRecorder(
      {
        redactor: this.#ctx.redactor,
        maxBytes: this.#ctx.maxBodyBytes,
        write: (exchange, written) => {
          const bodies = new Map(written)
          const x = hooks.finalize ? hooks.finalize(exchange, bodies) : exchange
          return this.write(live ? { ...x, origin: 'live' } : x, bodies)
        },
        http: () => {
          hooks.unswitched?.()
          return http()
        },
        now: this.#ctx.now,
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
      cut: () => recorder.end({ code: RUN_ENDED_CODE, message: 'The session closed while the WebSocket was open; the trace keeps what had arrived.' }),
    }
    this.#open.add(open)
    void settled.then(() => this.#open.delete(open))
    return recorder
  }

  /** Appends `exchange` with the bodies it names; close() waits for the write and reports its failure. */
  write(exchange: Exchange, bodies: ReadonlyMap<string, Uint8Array>, manifests: ReadonlyMap<string, BodyManifest> = new Map()): Promise<void> {
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
    const p = this.#recording.append(exchange, own, manifests).then(
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

  /** Answers still streaming get `graceMs` to finish, then are cut and kept as what arrived. */
  async settleOpen(graceMs: number): Promise<void> {
    if (this.#open.size === 0) return
    let timer: NodeJS.Timeout | undefined
    const grace = new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs)))
    await Promise.race([Promise.all([...this.#open].map((o) => o.settled)), grace])
    clearTimeout(timer)
    await this.cutOpen()
  }

  /** Cuts every recorder still open, keeping what arrived. */
  async cutOpen(): Promise<void> {
    await Promise.all([...this.#open].map((o) => o.cut()))
  }

  /** Waits for every write in flight. Bounded: each pending write is a single store batch. */
  async drain(): Promise<void> {
    while (this.#pending.size > 0) await Promise.all([...this.#pending])
  }

  /** Ends a run that did not happen: open answers cut and kept, writes drained, an empty recording removed. */
  async discard(): Promise<void> {
    await this.cutOpen()
    await this.drain()
    await this.#recording.discard()
  }

  /** Completes the recording, with the command the run was made with. */
  close(app: AppRun | undefined): Promise<void> {
    return this.#recording.close(app)
  }
}
