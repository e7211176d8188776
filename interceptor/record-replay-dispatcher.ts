/**
 * The undici Dispatcher that puts a Session between an app's fetch and the network. It only translates:
 * the engine decides (replay, forward, fail); this file buffers the request, plays back or tees.
 *
 * @note A Dispatcher subclass that adapts both handler APIs itself, rather than `Dispatcher.compose`:
 * composing collapsed repeated Set-Cookie under Node 22's bundled fetch and broke per-request
 * `dispatcher:` with undici 8, while this shape worked with every Node/undici pair tried.
 */
import { Agent, Dispatcher } from 'undici'
import {
  bodyTooLarge,
  type CapturedRequest,
  clientAbortError,
  DEFAULT_DRAIN_AFTER_ABORT_MS,
  type Decision,
  type ExchangeProgress,
  type ExchangeRecorder,
  errorPhase,
  type Pace,
  type PaceOption,
  parseMaxBodyBytes,
  parsePace,
  type Session,
  type Ticket,
} from '../engine/index.ts'
import { ErrorCodes, type HeaderPairs, headerPairsFromRaw, headerValue, isToolReplayError, ToolReplayError } from '../trace/index.ts'
import { runAsInternalConnection } from './internal-connection.ts'
import { playBack } from './playback.ts'
import { sendRefusal } from './refusal.ts'
import { type BufferedBody, bufferBody, headerPairs, requestUrl } from './request-capture.ts'
import { type AnyDispatchHandler, createResponseSink, type ParsedHeaders, type ResponseSink } from './response-sink.ts'

export interface RecordReplayDispatcherOptions {
  /** The session that decides what happens to each request. */
  session: Session
  /** Where forwarded requests go. Default: a new undici Agent, closed with this dispatcher. */
  upstream?: Dispatcher
  /** Replay pacing: 'chunks' (default: each recorded chunk its own read, no waiting), 'none', 'recorded' or a speed factor. */
  pace?: PaceOption
  /**
   * When the app aborts a response that is being recorded, keep reading it from upstream for up to this
   * many ms so the trace holds the whole response, not an abort. Default 1000; 0 records the abort.
   */
  drainAfterAbortMs?: number
  /** Largest request body buffered for matching (default 64 MiB); a larger one fails with TR_REQUEST_TOO_LARGE. */
  maxBodyBytes?: number
}

/**
 * Wraps the live request's controller so an app abort after the response head does not cut the
 * recording short: the app gets its AbortError at once (the sink is already failed), while the
 * response keeps flowing into the recorder until it ends or `drainMs` passes.
 * @note SDKs abort on purpose once they have what they need (the openai SDK after `[DONE]`); recording
 * that as a failure would make every streamed exchange an error in the trace.
 */
function drainingController(
  upstream: Dispatcher.DispatchController,
  drainMs: number,
  state: { headersSeen: () => boolean; finished: () => boolean; appAborted: (reason: Error, draining: boolean) => void },
): Dispatcher.DispatchController & { holdFor(waiting: Promise<void>): void } {
  let draining = false
  // Two reasons to hold the upstream: the app is not reading, or the store is behind with the recording.
  // It resumes only when neither holds.
  let appPaused = false
  let recorderHolds = 0
  const settle = () => {
    if (recorderHolds === 0 && (!appPaused || draining) && upstream.paused) upstream.resume()
  }
  return {
    get aborted() {
      return upstream.aborted
    },
    get paused() {
      return upstream.paused
    },
    get reason() {
      return upstream.reason
    },
    pause: () => {
      appPaused = true
      if (!draining) upstream.pause()
    },
    resume: () => {
      appPaused = false
      settle()
    },
    holdFor: (waiting: Promise<void>) => {
      recorderHolds++
      upstream.pause()
      void waiting.finally(() => {
        recorderHolds--
        settle()
      })
    },
    abort: (reason: Error) => {
      if (draining) return
      if (drainMs <= 0 || !state.headersSeen() || state.finished()) {
        state.appAborted(reason, false)
        upstream.abort(reason)
        return
      }
      draining = true
      state.appAborted(reason, true)
      settle()
      // Bounded: an endless stream is cut after drainMs and recorded as the abort it was.
      setTimeout(() => {
        if (!state.finished()) upstream.abort(reason)
      }, drainMs).unref()
    },
  }
}

/** Raw header pairs from what an undici 8 controller exposes (Buffers on HTTP/1.1, a record on HTTP/2). */
function rawBuffers(raw: unknown, parsed: unknown): Buffer[] {
  if (Array.isArray(raw)) return raw.map((v) => (Buffer.isBuffer(v) ? v : Buffer.from(String(v), 'latin1')))
  const out: Buffer[] = []
  for (const [k, v] of headerPairs(raw ?? parsed)) out.push(Buffer.from(k, 'latin1'), Buffer.from(v, 'latin1'))
  return out
}

/**
 * Records or replays every request dispatched through it, as its Session says.
 * @example
 * const dispatcher = createRecordReplayDispatcher({ session })
 * await fetch('https://api.test/users/1', { dispatcher })
 */
export class RecordReplayDispatcher extends Dispatcher {
  readonly #session: Session
  readonly #upstream: Dispatcher
  readonly #ownsUpstream: boolean
  readonly #pace: Pace
  readonly #drainAfterAbortMs: number
  readonly #maxBodyBytes: number
  #closed = false

  constructor(options: RecordReplayDispatcherOptions) {
    super()
    this.#session = options.session
    this.#ownsUpstream = options.upstream === undefined
    // Replay never dispatches to it, and an idle Agent opens no socket.
    this.#upstream = options.upstream ?? new Agent()
    this.#pace = parsePace(options.pace)
    this.#drainAfterAbortMs = options.drainAfterAbortMs ?? DEFAULT_DRAIN_AFTER_ABORT_MS
    this.#maxBodyBytes = parseMaxBodyBytes(options.maxBodyBytes)
  }

  /**
   * Asks undici's fetch for the request body as its source (string, bytes, Blob, FormData, stream)
   * instead of an async generator over it.
   * @note fetch reads this flag only to choose that body form (it is how MockAgent gets matchable
   * bodies); it saves a generator and several promise turns per request on the replay hot path.
   */
  get isMockActive(): boolean {
    return true
  }

  /** The session deciding for this dispatcher. */
  get session(): Session {
    return this.#session
  }

  override dispatch(opts: Dispatcher.DispatchOptions, handler: AnyDispatchHandler): boolean {
    const sink = createResponseSink(handler)
    if ((opts.upgrade || opts.method === 'CONNECT') && !this.#closed) {
      // Upgrades are never recorded: live modes hand them to the real dispatcher untouched; strict replay
      // refuses them through the engine, which keeps them in the ledger. undici's upgrade handlers throw on
      // any non-101 head, so here the refusal is the error itself rather than the refusal response.
      const decision = this.#session.handleUpgrade({ method: opts.method, url: requestUrl(opts), headers: headerPairs(opts.headers), body: null })
      if (decision.kind === 'forward') return runAsInternalConnection(() => this.#upstream.dispatch(opts, handler as Dispatcher.DispatchHandler))
      const error = decision.kind === 'fail' ? decision.error : new ToolReplayError(ErrorCodes.INTERNAL, 'handleUpgrade replayed an upgrade')
      queueMicrotask(() => {
        sink.start()
        sink.error(error)
      })
      return true
    }
    // Its place in the order the engine sees requests: taken now, in the order the app dispatched them,
    // whatever order their bodies finish buffering in.
    const ticket = this.#session.arrival()
    // Deferred so handlers are never called re-entrantly from inside dispatch().
    queueMicrotask(() => {
      try {
        this.#start(opts, sink, ticket)
      } catch (err) {
        ticket.release()
        sink.error(err as Error)
      }
    })
    return true
  }

  #start(opts: Dispatcher.DispatchOptions, sink: ResponseSink, ticket: Ticket): void {
    const controller = sink.controller
    // With faults, a fault's wait (a timeout, a latency) ends when the app aborts.
    const gaveUp = this.#session.faults ? new AbortController() : undefined
    // Before the live request exists (or while replaying) nothing else will report the abort.
    controller.onAbort((reason) => {
      gaveUp?.abort()
      queueMicrotask(() => sink.error(reason))
    })
    sink.start()
    if (controller.aborted || this.#closed) ticket.release()
    if (controller.aborted) return
    if (this.#closed) {
      sendRefusal(
        sink,
        new ToolReplayError(ErrorCodes.STORE_CLOSED, `Failed to dispatch ${opts.method} ${requestUrl(opts)}: the Tool Replay dispatcher is closed.`),
      )
      return
    }
    const headers = headerPairs(opts.headers)
    const url = requestUrl(opts)
    const tooLarge = () => bodyTooLarge(opts.method, url, this.#maxBodyBytes)
    const refuse = (err: Error) => {
      ticket.release()
      // Both paths refuse an over-large body the same way, and strict replay counts it.
      if (isToolReplayError(err, ErrorCodes.REQUEST_TOO_LARGE)) this.#session.refuse({ method: opts.method, url }, err)
      sink.error(err)
    }
    let body: BufferedBody | Promise<BufferedBody>
    try {
      body = bufferBody(opts.body, headerValue(headers, 'content-type'), this.#maxBodyBytes, tooLarge)
    } catch (err) {
      refuse(err as Error)
      return
    }
    if (body instanceof Promise) {
      body
        .then((b) => {
          if (controller.aborted) ticket.release()
          else this.#decide(opts, headers, b, sink, ticket, gaveUp?.signal)
        })
        .catch(refuse)
    } else {
      this.#decide(opts, headers, body, sink, ticket, gaveUp?.signal)
    }
  }

  #decide(
    opts: Dispatcher.DispatchOptions,
    headers: HeaderPairs,
    body: BufferedBody,
    sink: ResponseSink,
    ticket: Ticket,
    signal: AbortSignal | undefined,
  ): void {
    if (body.contentType && !headers.some(([k]) => k.toLowerCase() === 'content-type')) headers.push(['content-type', body.contentType])
    const captured: CapturedRequest = { method: opts.method, url: requestUrl(opts), headers, body: body.bytes, ...(signal ? { signal } : {}) }
    const decision = ticket.turn(() => this.#session.handle(captured))
    // A promise when an earlier request holds its place, when the store must be asked (big traces), or while a
    // fault makes the app wait.
    if (decision instanceof Promise) decision.then((d) => this.#carryOut(d as Decision, opts, body, headers, sink)).catch((err: Error) => sink.error(err))
    else this.#carryOut(decision, opts, body, headers, sink)
  }

  #carryOut(decision: Decision, opts: Dispatcher.DispatchOptions, body: BufferedBody, headers: HeaderPairs, sink: ResponseSink): void {
    if (sink.controller.aborted) return
    if (decision.kind === 'replay') {
      playBack(decision.playback, sink, this.#pace)
      return
    }
    if (decision.kind === 'fail') {
      sendRefusal(sink, decision.error)
      return
    }
    const client = decision.client
    this.#forward(opts, body, headers, sink, decision.recorder, client !== undefined)
    // A fault acts on the answer: the upstream's response feeds the recorder, the app gets the engine's playback.
    client?.then((playback) => sink.controller.aborted || playBack(playback, sink, this.#pace)).catch((err: Error) => sink.error(err))
  }

  /**
   * Forwards the request, recording the response and passing it to the app; `detached`: the response only
   * feeds the recorder (a fault decides what the app gets), read to its end whatever the app does.
   */
  #forward(
    opts: Dispatcher.DispatchOptions,
    body: BufferedBody,
    headers: HeaderPairs,
    sink: ResponseSink,
    recorder: ExchangeRecorder,
    detached: boolean,
  ): void {
    const controller = sink.controller
    const progress: ExchangeProgress = { started: false, sent: false, headers: false }
    let aborted = false
    const fail = (err: Error) => {
      const code = (err as { code?: unknown }).code
      // An abort the app asked for is recorded the same way on both paths, whatever reason it gave.
      const recorded = aborted ? clientAbortError() : { code: typeof code === 'string' ? code : 'UND_ERR', message: err.message }
      // Engine write failures surface at session close; here they must not break the app's request.
      recorder.fail(recorded, errorPhase(progress, recorded.code)).catch(() => {})
      if (!detached) sink.error(err)
    }
    const drainMs = this.#drainAfterAbortMs
    let finished = false
    const drainState = {
      headersSeen: () => progress.headers,
      finished: () => finished,
      appAborted: (reason: Error, draining: boolean) => {
        aborted = true
        // While draining, the app gets its AbortError now; the recording goes on until the end.
        if (draining) sink.error(reason)
      },
    }
    let gate: ReturnType<typeof drainingController> | undefined
    const tee: Dispatcher.DispatchHandler = {
      onRequestStart(upstream) {
        progress.started = true
        if (recorder.recording) gate = drainingController(upstream, drainMs, drainState)
        // Detached (a fault decides what the app gets): the app's pauses and aborts do not reach this request.
        if (!detached) controller.attachUpstream(gate ?? upstream)
      },
      onRequestSent() {
        progress.sent = true
      },
      onResponseStart(upstream, statusCode, parsed, statusText) {
        const raw = rawBuffers(upstream.rawHeaders, parsed)
        // 1xx heads are interim: the final head follows.
        if (statusCode < 200) return
        progress.headers = true
        if (recorder.recording) recorder.responseStart({ status: statusCode, statusText: statusText ?? '', headers: headerPairsFromRaw(raw) })
        if (!detached) sink.responseStart(statusCode, raw, statusText ?? '', () => parsed as ParsedHeaders)
      },
      onResponseData(_upstream, chunk) {
        if (recorder.recording) {
          // The store is behind (a big body streaming to it), or a fault's client side is: hold the upstream.
          const waiting = recorder.responseData(chunk)
          if (waiting) gate?.holdFor(waiting)
        }
        if (!detached) sink.data(chunk)
      },
      onResponseEnd(upstream, trailers) {
        finished = true
        const raw = rawBuffers(upstream.rawTrailers, trailers)
        if (recorder.recording) {
          try {
            recorder.responseEnd(headerPairsFromRaw(raw)).catch(() => {})
          } catch {
            // A recorder that cannot finish loses this exchange, and close() reports it; the app still gets its response.
          }
        }
        if (!detached) sink.end(raw)
      },
      onResponseError(_upstream, err) {
        finished = true
        fail(err)
      },
    }
    // The body was consumed while buffering: send the same bytes. A FormData body gets the content-type
    // (with boundary) that was chosen when it was serialized.
    const forwardHeaders = body.contentType ? headers.flat() : opts.headers
    try {
      // Outside node:http capture (msw patches every socket's connect): this request is already captured here.
      runAsInternalConnection(() =>
        this.#upstream.dispatch(
          {
            ...opts,
            body: body.bytes === null ? null : Buffer.from(body.bytes.buffer, body.bytes.byteOffset, body.bytes.byteLength),
            headers: forwardHeaders as Dispatcher.DispatchOptions['headers'],
          },
          tee,
        ),
      )
    } catch (err) {
      fail(err as Error)
    }
  }

  override close(): Promise<void>
  override close(callback: () => void): void
  override close(callback?: () => void): Promise<void> | undefined {
    this.#closed = true
    const done = this.#ownsUpstream ? this.#upstream.close() : Promise.resolve()
    if (!callback) return done
    done.then(callback, callback)
    return undefined
  }

  override destroy(): Promise<void>
  override destroy(err: Error | null): Promise<void>
  override destroy(callback: () => void): void
  override destroy(err: Error | null, callback: () => void): void
  override destroy(a?: Error | null | (() => void), b?: () => void): Promise<void> | undefined {
    this.#closed = true
    const callback = typeof a === 'function' ? a : b
    const err = typeof a === 'function' ? null : (a ?? null)
    const done = this.#ownsUpstream ? this.#upstream.destroy(err) : Promise.resolve()
    if (!callback) return done
    done.then(callback, callback)
    return undefined
  }
}

/** Creates the record/replay dispatcher for one session; use it as `dispatcher:` or install it globally. */
export function createRecordReplayDispatcher(options: RecordReplayDispatcherOptions): RecordReplayDispatcher {
  return new RecordReplayDispatcher(options)
}
