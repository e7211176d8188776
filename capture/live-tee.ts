/**
 * The live tee: a forwarded request's response goes to the engine's recorder and to the client, each with its
 * own back-pressure, fed by wire-neutral events from whichever transport sent it (an undici dispatcher for
 * fetch and the proxy, Node's http client for node:http, an MCP server's output for MCP over stdio). One
 * state machine for every path decides:
 * - back-pressure: the upstream is paused while the store is behind with the recording or the client is not
 *   reading, and resumes only when neither holds;
 * - durability: what a client was answered is in the store first. The part of the answer that completes it
 *   (the last body chunk of a response with a length, the head of one without a body, a piece the
 *   transport marks final, else the end) is handed over only once the recorder committed the exchange, so a
 *   killed recorder loses only exchanges no client saw finish;
 * - a client that gives up after the head: the app is told at once, while the response keeps being recorded
 *   for `drainMs` (SDKs abort on purpose once they have what they need), then is cut as the client abort it
 *   was; before the head, the live request is aborted and recorded as that abort;
 * - detached (a fault decides what the client gets): the upstream only feeds the recorder, read to its end
 *   whatever the client does;
 * - failures: recorded with their phase (transport-rules.ts) and passed to the client as they came.
 */
import { CLIENT_ABORT_CODE, clientAbortError, type ExchangeRecorder } from '../engine/index.ts'
import { type HeaderPairs, headerValue, type RecordedError, type ResponseHead } from '../trace/index.ts'
import type { PlaybackTarget, WireHead } from './playback-driver.ts'
import { type ExchangeProgress, errorPhase } from './transport-rules.ts'

/** What the tee may ask of the live request. */
export interface UpstreamControl {
  pause(): void
  resume(): void
  abort(reason: Error): void
}

/** What a transport reports about one live request, in order: control, started, sent, head, data…, end or error. */
export interface LiveEvents {
  /** The request exists: the tee can pause, resume or abort it from now on. */
  control(control: UpstreamControl): void
  /** A connection was assigned and the request is being written. */
  started(): void
  /** The whole request went out. */
  sent(): void
  /** The final response head (never a 1xx). */
  head(head: ResponseHead, wire?: WireHead): void
  /**
   * One piece of the body. `final`: this piece completes the answer for the client, for a transport that knows
   * it only when the piece comes (MCP: an answer line that closes its transcript); like the last chunk of a
   * response with a length, it is handed over once the recording is committed, and `end` follows.
   */
  data(chunk: Uint8Array, final?: boolean): void
  end(trailers: HeaderPairs): void
  /**
   * The live request failed. `as`: what to record instead of the error's own code and message, so every
   * transport's failures are recorded in one vocabulary (undici's).
   */
  error(err: Error, as?: { code: string; message?: string }): void
}

/** The client side of a capture path: where playbacks and live answers go, and how the client gives up. */
export interface ClientTarget extends PlaybackTarget {
  /** Calls `fn` once when the client gives up before its answer ended (aborts, closes its connection). */
  onGone(fn: () => void): void
  /** A live failure, as the transport reported it (`recorded` is what the trace keeps of it). */
  failLive(err: Error, recorded: RecordedError, afterHead: boolean): void
  /** Fails the client with an unexpected error (a bug, a store that broke mid-answer), head or no head. */
  failWith(err: Error): void
}

/** What a tee needs. */
export interface LiveTeeOptions {
  recorder: ExchangeRecorder
  client: ClientTarget
  /** The request method (a HEAD answer ends with its head). */
  method: string
  /** A fault decides what the client gets: the upstream only feeds the recorder. */
  detached: boolean
  /** How long a response the client abandoned after its head keeps being recorded (ms; 0 records the abort). */
  drainMs: number
}

/** Where the answer is complete for the client, so where it waits for the recording to be committed. */
type LastPart = { kind: 'head' } | { kind: 'chunk'; length: number } | { kind: 'end' }

/**
 * @example
 * const tee = new LiveTee({ recorder, client, method, detached: false, drainMs: 1000 })
 * forwardThroughDispatcher(agent, opts, tee)
 * await tee.done
 */
export class LiveTee implements LiveEvents {
  /** Settles once the upstream is over and everything the client gets was handed over. */
  readonly done: Promise<void>
  readonly #o: LiveTeeOptions
  readonly #progress: ExchangeProgress = { started: false, sent: false, headers: false }
  #resolveDone: () => void = () => {}
  #control: UpstreamControl | undefined
  /** The upstream is over (ended, failed, or aborted by the tee). */
  #finished = false
  /** The client takes no more of the answer (it gave up, or the tee is detached). */
  #clientOff: boolean
  #abortPending = false
  /** Deliveries to the client in order; set while one waits (the client is not reading). */
  #queue: Promise<void> | undefined
  #storeHolds = 0
  #paused = false
  #last: LastPart = { kind: 'end' }
  #received = 0
  /** The part that completes the answer, waiting for the commit. */
  #held: Uint8Array | undefined
  #holdHead: ResponseHead | undefined
  #holdWire: WireHead | undefined
  #drainTimer: NodeJS.Timeout | undefined

  constructor(options: LiveTeeOptions) {
    this.#o = options
    this.#clientOff = options.detached
    this.done = new Promise((resolve) => (this.#resolveDone = resolve))
    if (!options.detached) options.client.onGone(() => this.#clientGone())
  }

  control(control: UpstreamControl): void {
    this.#control = control
    if (this.#abortPending) control.abort(new Error(clientAbortError().message))
  }

  started(): void {
    this.#progress.started = true
  }

  sent(): void {
    this.#progress.sent = true
  }

  head(head: ResponseHead, wire?: WireHead): void {
    if (this.#finished) return
    this.#progress.headers = true
    const { recorder } = this.#o
    if (recorder.recording) recorder.responseStart(head)
    if (this.#clientOff) return
    // A head its transport says ends the response waits for the end, so the two reach the client together.
    this.#last = wire?.final ? { kind: 'head' } : recorder.recording ? lastPart(this.#o.method, head) : { kind: 'end' }
    if (this.#last.kind === 'head') {
      this.#holdHead = head
      this.#holdWire = wire
      return
    }
    this.#deliver(() => this.#o.client.head(head, wire))
  }

  data(chunk: Uint8Array, final = false): void {
    if (this.#finished) return
    const { recorder } = this.#o
    if (recorder.recording) {
      // The store is behind (a big body streaming to it), or a fault's client side is: hold the upstream.
      const waiting = recorder.responseData(chunk)
      if (waiting) this.#holdForStore(waiting)
    }
    if (this.#clientOff) return
    // A body after a head that should have ended the answer: the head goes out first, the end waits instead.
    if (this.#holdHead) {
      this.#last = { kind: 'end' }
      this.#releaseHead()
    }
    this.#received += chunk.byteLength
    const completes = this.#last.kind === 'chunk' ? this.#received >= this.#last.length : final && recorder.recording
    if (completes && this.#held === undefined) {
      this.#held = chunk
      return
    }
    this.#deliver(() => this.#o.client.chunk(chunk))
  }

  end(trailers: HeaderPairs): void {
    if (this.#finished) return
    this.#finish()
    const { recorder } = this.#o
    const committed = recorder.recording ? recorder.responseEnd(trailers) : undefined
    if (this.#clientOff) {
      this.#settle(committed)
      return
    }
    this.#afterCommit(committed, () => this.#o.client.end(trailers))
  }

  error(err: Error, as?: { code: string; message?: string }): void {
    if (this.#finished) return
    this.#finish()
    const own = (err as { code?: unknown }).code
    // An abort the client asked for is recorded the same way on every path, whatever ended the live request.
    const failure =
      this.#clientOff && !this.#o.detached
        ? clientAbortError()
        : { code: as?.code ?? (typeof own === 'string' ? own : 'UND_ERR'), message: as?.message ?? err.message }
    const recorded: RecordedError = { ...failure, phase: errorPhase(this.#progress, failure.code) }
    const committed = this.#o.recorder.fail(recorded, recorded.phase)
    if (this.#clientOff) {
      this.#settle(committed)
      return
    }
    const afterHead = this.#progress.headers
    this.#afterCommit(committed, () => this.#o.client.failLive(err, recorded, afterHead))
  }

  /** The client gave up: before the head the live request ends now; after it, it is drained into the recording. */
  #clientGone(): void {
    if (this.#clientOff) return
    this.#clientOff = true
    this.#held = undefined
    this.#holdHead = undefined
    if (this.#finished) return
    if (!this.#o.recorder.recording || !this.#progress.headers || this.#o.drainMs <= 0) {
      this.#abortLive()
      return
    }
    // The client no longer holds the upstream: only the store does.
    this.#queue = undefined
    this.#maybeResume()
    this.#drainTimer = setTimeout(() => this.#abortLive(), this.#o.drainMs)
    this.#drainTimer.unref()
  }

  /** Ends the live request as the client abort it was (bounded drain over, or nothing to drain). */
  #abortLive(): void {
    if (this.#finished) return
    this.#finish()
    const failure = clientAbortError()
    this.#settle(this.#o.recorder.fail(failure, errorPhase(this.#progress, CLIENT_ABORT_CODE)))
    const reason = new Error(failure.message)
    if (this.#control) this.#control.abort(reason)
    else this.#abortPending = true
  }

  #finish(): void {
    this.#finished = true
    clearTimeout(this.#drainTimer)
  }

  /** Hands over what waited for the commit, then `last` (the end or the failure), once `committed` settled. */
  #afterCommit(committed: Promise<void> | undefined, last: () => void): void {
    const release = () => {
      if (!this.#clientOff) {
        this.#releaseHead()
        const held = this.#held
        this.#held = undefined
        if (held) this.#deliver(() => this.#o.client.chunk(held))
        this.#deliver(last)
      }
      this.#whenDelivered()
    }
    // A failed write loses this exchange (the session's close() reports it); the client still gets its answer.
    if (committed) void committed.catch(() => {}).then(release)
    else release()
  }

  /** Delivers a head that waited to be the last part (a body came after all, or the commit did). */
  #releaseHead(): void {
    const head = this.#holdHead
    if (!head) return
    this.#holdHead = undefined
    const wire = this.#holdWire
    this.#deliver(() => this.#o.client.head(head, wire))
  }

  /** Resolves `done` once the deliveries queued so far went out. */
  #whenDelivered(): void {
    const queue = this.#queue
    if (queue && !this.#clientOff) void queue.then(() => this.#whenDelivered())
    else this.#resolveDone()
  }

  #settle(committed: Promise<void> | undefined): void {
    if (committed) void committed.catch(() => {}).then(() => this.#resolveDone())
    else this.#resolveDone()
  }

  /** Hands one part to the client in order; while the client is not reading, the upstream waits. */
  #deliver(part: () => void | Promise<void>): void {
    if (this.#queue) {
      this.#wait(this.#queue.then(() => (this.#clientOff ? undefined : part())))
      return
    }
    let waiting: void | Promise<void>
    try {
      waiting = part()
    } catch (err) {
      this.#o.client.failWith(err as Error)
      return
    }
    if (waiting) this.#wait(waiting)
  }

  #wait(waiting: Promise<void>): void {
    const queue: Promise<void> = waiting.then(
      () => {
        if (this.#queue !== queue) return
        this.#queue = undefined
        this.#maybeResume()
      },
      (err: unknown) => {
        if (this.#queue === queue) this.#queue = undefined
        this.#o.client.failWith(err as Error)
      },
    )
    this.#queue = queue
    this.#pause()
  }

  #holdForStore(waiting: Promise<void>): void {
    this.#storeHolds++
    this.#pause()
    void waiting.finally(() => {
      this.#storeHolds--
      this.#maybeResume()
    })
  }

  #pause(): void {
    if (this.#paused || this.#finished) return
    this.#paused = true
    this.#control?.pause()
  }

  #maybeResume(): void {
    if (!this.#paused || this.#storeHolds > 0 || this.#queue !== undefined || this.#finished) return
    this.#paused = false
    this.#control?.resume()
  }
}

/** Where an answer is complete for its client. */
function lastPart(method: string, head: ResponseHead): LastPart {
  if (method === 'HEAD' || head.status === 204 || head.status === 304) return { kind: 'head' }
  const length = Number(headerValue(head.headers, 'content-length'))
  if (!Number.isSafeInteger(length) || length < 0 || headerValue(head.headers, 'transfer-encoding') !== undefined) return { kind: 'end' }
  return length === 0 ? { kind: 'head' } : { kind: 'chunk', length }
}
