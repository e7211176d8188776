/**
 * The fetch path: the undici Dispatcher that puts a Session between an app's fetch and the network. It only
 * translates undici's dispatch options and handlers into the capture lifecycle's terms (capture/); what
 * happens to the request (its turn, the body limit, the abort race, replay, refusal, the live tee) is decided
 * and carried out there, once for every path.
 *
 * @note A Dispatcher subclass that adapts both handler APIs itself, rather than `Dispatcher.compose`:
 * composing collapsed repeated Set-Cookie under Node 22's bundled fetch and broke per-request
 * `dispatcher:` with undici 8, while this shape worked with every Node/undici pair tried.
 */
import type { Dispatcher } from 'undici'
import {
  type CapturedExchange,
  type CaptureOptions,
  captureOptions,
  captureRequest,
  drivePlayback,
  forwardThroughDispatcher,
  keepsChunksApart,
  LazyAgent,
  type PathOptions,
  refusalPlayback,
} from '../capture/index.ts'
import type { Session, Ticket } from '../engine/index.ts'
import { ErrorCodes, headerValue, ToolReplayError } from '../trace/index.ts'
import { DispatcherShell } from './dispatcher-shell.ts'
import { type FetchCall, PulledClient } from './fetch-answer.ts'
import { runAsInternalConnection } from './internal-connection.ts'
import { fetchClient } from './playback.ts'
import { type BufferedBody, bufferBody, headerPairs, requestUrl } from './request-capture.ts'
import { type AnyDispatchHandler, createResponseSink } from './response-sink.ts'
import { loadedUndici, loadUndici } from './undici-loader.ts'
import { carryOutWebSocket } from './websocket-upgrade.ts'

/** The path's options (pace, maxBodyBytes, drainAfterAbortMs: capture/path-options.ts), its session and upstream. */
export interface RecordReplayDispatcherOptions extends PathOptions {
  /** The session that decides what happens to each request. */
  session: Session
  /** Where forwarded requests go. Default: a new undici Agent, closed with this dispatcher. */
  upstream?: Dispatcher
}

/**
 * Records or replays every request dispatched through it, as its Session says.
 * @example
 * const dispatcher = createRecordReplayDispatcher({ session })
 * await fetch('https://api.test/users/1', { dispatcher })
 */
export class RecordReplayDispatcher extends DispatcherShell {
  readonly #session: Session
  /** The upstream given (the caller's to close), or this dispatcher's own Agent, made at the first live request. */
  readonly #upstream: Dispatcher | LazyAgent
  readonly #capture: CaptureOptions
  #closed = false

  constructor(options: RecordReplayDispatcherOptions) {
    super()
    this.#session = options.session
    // An Agent is undici's HTTP client: strict replay never needs it.
    this.#upstream = options.upstream ?? new LazyAgent((undici) => new undici.Agent(), loadUndici)
    // install() has loaded undici by now. Made directly by the sync factory, this dispatcher starts loading it:
    // the Agent a live request needs comes from it, and so do the API methods on undici's Dispatcher.prototype.
    if (!loadedUndici()) loadUndici().catch(() => {})
    this.#capture = captureOptions(options.session, options)
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
    return this.dispatchFor(opts, handler, undefined)
  }

  /** dispatch() for one call of the wrapped global fetch (fetch-answer.ts), which may answer a played stream itself. */
  dispatchFor(opts: Dispatcher.DispatchOptions, handler: AnyDispatchHandler, call: FetchCall | undefined): boolean {
    if ((opts.upgrade || opts.method === 'CONNECT') && !this.#closed) return this.#upgrade(opts, handler)
    // Its place in the order the engine sees requests: taken now, in the order the app dispatched them,
    // whatever order their bodies finish buffering in.
    const ticket = this.#session.arrival()
    // Deferred so handlers are never called re-entrantly from inside dispatch().
    queueMicrotask(() => this.#start(opts, handler, ticket, call))
    return true
  }

  /**
   * WebSocket upgrades are sessions (websocket-upgrade.ts: recorded, replayed, or refused into the ledger); other
   * upgrades and CONNECT are never recorded: live modes hand them to the real dispatcher untouched, strict replay
   * refuses them through the engine. undici's upgrade handlers throw on any non-101 head, so a refusal is the
   * error itself rather than the refusal response.
   */
  #upgrade(opts: Dispatcher.DispatchOptions, handler: AnyDispatchHandler): boolean {
    const url = requestUrl(opts)
    const headers = headerPairs(opts.headers)
    if (String(opts.upgrade).toLowerCase() === 'websocket' && opts.method === 'GET') {
      const ctx = {
        session: this.#session,
        pace: this.#capture.pace,
        maxBodyBytes: this.#capture.maxBodyBytes,
        forward: (h: Dispatcher.DispatchHandler) => {
          const forward = (up: Dispatcher) => runAsInternalConnection(() => up.dispatch(opts, h))
          this.#live(forward, (err) => failUpgrade(handler, err))
        },
        fail: (err: Error) => failUpgrade(handler, err),
      }
      const decision = this.#session.handleWebSocket({ method: opts.method, url, headers, body: null })
      if (decision instanceof Promise) decision.then((d) => carryOutWebSocket(d, url, headers, handler, ctx), ctx.fail)
      else carryOutWebSocket(decision, url, headers, handler, ctx)
      return true
    }
    const decision = this.#session.handleUpgrade({ method: opts.method, url, headers, body: null })
    if (decision.kind === 'forward') {
      const forward = (up: Dispatcher) => runAsInternalConnection(() => up.dispatch(opts, handler as Dispatcher.DispatchHandler))
      return this.#live(forward, (err) => failUpgrade(handler, err)) ?? true
    }
    failUpgrade(handler, decision.kind === 'fail' ? decision.error : new ToolReplayError(ErrorCodes.INTERNAL, 'handleUpgrade replayed an upgrade'))
    return true
  }

  /**
   * Runs `forward` with the dispatcher live requests go to: the one given at once; the own Agent at once when it
   * exists, else once undici has loaded (the sync factory made this dispatcher before anything loaded it).
   */
  #live<T>(forward: (upstream: Dispatcher) => T, fail: (err: Error) => void): T | undefined {
    const upstream = this.#upstream
    return upstream instanceof LazyAgent ? upstream.use(forward, fail) : forward(upstream)
  }

  #start(opts: Dispatcher.DispatchOptions, handler: AnyDispatchHandler, ticket: Ticket, call: FetchCall | undefined): void {
    const sink = createResponseSink(handler)
    const apart = keepsChunksApart(this.#capture.pace)
    const client = call ? new PulledClient(sink, apart, call) : fetchClient(sink, apart)
    sink.start()
    if (this.#closed) {
      ticket.release()
      const error = new ToolReplayError(ErrorCodes.STORE_CLOSED, `Failed to dispatch ${opts.method} ${requestUrl(opts)}: the Tool Replay dispatcher is closed.`)
      void drivePlayback(refusalPlayback(error), { kind: 'none' }, client)
      return
    }
    let url: string
    try {
      url = requestUrl(opts)
    } catch (err) {
      ticket.release()
      client.failWith(err as Error)
      return
    }
    const headers = headerPairs(opts.headers)
    let read: BufferedBody | undefined
    const exchange: CapturedExchange = {
      method: opts.method,
      url,
      headers,
      readBody: (max, tooLarge) => {
        const body = bufferBody(opts.body, headerValue(headers, 'content-type'), max, tooLarge)
        if (!(body instanceof Promise)) return (read = body)
        return body.then((b) => (read = b))
      },
      client,
      forward: (body, events) => {
        // The body was consumed while buffering: send the same bytes. A FormData body gets the content-type
        // (with boundary) that was chosen when it was serialized.
        const forwardHeaders = read?.contentType ? headers.flat() : opts.headers
        const live = { ...opts, body: body === null ? null : Buffer.from(body.buffer, body.byteOffset, body.byteLength), headers: forwardHeaders }
        // Outside node:http capture (msw patches every socket's connect): this request is already captured here.
        this.#live(
          (upstream) => runAsInternalConnection(() => forwardThroughDispatcher(upstream, live as Dispatcher.DispatchOptions, events)),
          (err) => events.error(err),
        )
      },
    }
    void captureRequest(this.#capture, exchange, ticket)
  }

  protected override closing(): Promise<void> {
    this.#closed = true
    return this.#upstream instanceof LazyAgent ? this.#upstream.close() : Promise.resolve()
  }

  protected override destroying(err: Error | null): Promise<void> {
    this.#closed = true
    return this.#upstream instanceof LazyAgent ? this.#upstream.destroy(err) : Promise.resolve()
  }
}

/** Refuses an upgrade: undici's upgrade handlers throw on any non-101 head, so the refusal is the error itself. */
function failUpgrade(handler: AnyDispatchHandler, error: Error): void {
  const sink = createResponseSink(handler)
  queueMicrotask(() => {
    sink.start()
    sink.error(error)
  })
}

/** Creates the record/replay dispatcher for one session; use it as `dispatcher:` or install it globally. */
export function createRecordReplayDispatcher(options: RecordReplayDispatcherOptions): RecordReplayDispatcher {
  return new RecordReplayDispatcher(options)
}
