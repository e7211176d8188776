/**
 * One shape for the two handler APIs a dispatcher receives: the legacy callbacks (onConnect,
 * onHeaders, onData, onComplete, onError) that Node's bundled fetch (undici 6 in Node 22, 7 in
 * Node 24) passes, and the controller API (onRequestStart ... onResponseError) of undici 8.
 * Replay and forwarding both talk to a `ResponseSink`, so neither cares which API the app uses.
 */
import type { Dispatcher } from 'undici'

/** The pre-controller handler API, still what Node's built-in fetch passes to the global dispatcher. */
export interface LegacyDispatchHandler {
  onConnect?(abort: (reason?: Error) => void, context?: unknown): void
  onResponseStarted?(): void
  onHeaders?(statusCode: number, rawHeaders: Buffer[], resume: () => void, statusText: string): boolean | undefined
  onData?(chunk: Buffer): boolean | undefined
  onComplete?(rawTrailers: Buffer[] | null): void
  onError?(err: Error): void
}

/** Either handler API. */
export type AnyDispatchHandler = Dispatcher.DispatchHandler | LegacyDispatchHandler

function abortError(): Error {
  return new DOMException('This operation was aborted', 'AbortError')
}

/**
 * The controller handed to the app's handler: it records the app's pause/resume/abort for the capture
 * lifecycle (capture/), which holds a replay or the live request while the app is paused and ends it when
 * the app aborts.
 */
export class ResponseController implements Dispatcher.DispatchController {
  #paused = false
  #aborted = false
  #reason: Error | null = null
  #onResume: (() => void) | null = null
  #onAbort: ((reason: Error) => void) | null = null
  rawHeaders: Buffer[] | null = null
  rawTrailers: Buffer[] | null = null

  get aborted(): boolean {
    return this.#aborted
  }

  get paused(): boolean {
    return this.#paused
  }

  get reason(): Error | null {
    return this.#reason
  }

  pause(): void {
    this.#paused = true
  }

  resume(): void {
    if (!this.#paused) return
    this.#paused = false
    const next = this.#onResume
    this.#onResume = null
    // Deferred: apps call resume() from inside onData/read(); re-entering playback there would recurse.
    if (next) queueMicrotask(next)
  }

  abort(reason?: Error): void {
    if (this.#aborted) return
    this.#aborted = true
    this.#reason = reason ?? abortError()
    this.#onAbort?.(this.#reason)
    // Whoever waits for a resume (a paused playback) must get to see the abort and stop.
    const next = this.#onResume
    this.#onResume = null
    if (next) queueMicrotask(next)
  }

  /** Runs `fn` once after the next resume(). */
  whenResumed(fn: () => void): void {
    this.#onResume = fn
  }

  /** Called once when the app aborts. */
  onAbort(fn: (reason: Error) => void): void {
    this.#onAbort = fn
  }
}

/** Where a response goes, whichever handler API is behind it. Calls after the end or an error are ignored. */
export interface ResponseSink {
  readonly controller: ResponseController
  readonly finished: boolean
  start(): void
  /** Returns false when the app asked to pause. `parsed`, when given, yields the parsed form of `rawHeaders` (only the controller API needs it). */
  responseStart(statusCode: number, rawHeaders: Buffer[], statusText: string, parsed?: () => ParsedHeaders): boolean
  /** Returns false when the app asked to pause. */
  data(chunk: Buffer): boolean
  end(rawTrailers: Buffer[]): void
  error(err: Error): void
  /**
   * Makes the app's body stream keep each chunk handed over its own read (see `keepChunksApart`), for a response
   * whose head went out and no chunk yet. False when the handler keeps no such stream (not fetch's).
   */
  keepChunksApart(): boolean
}

/** Headers as the controller API passes them: lowercase names, repeated fields as arrays. */
export type ParsedHeaders = Record<string, string | string[]>

/** Parses header pairs into the controller API's form (cheaper than going through Buffers). */
export function parseHeaderPairs(pairs: ReadonlyArray<readonly [string, string]>): ParsedHeaders {
  const out: ParsedHeaders = {}
  for (const [rawName, value] of pairs) {
    const name = rawName.toLowerCase()
    const prev = out[name]
    if (prev === undefined) out[name] = value
    else if (Array.isArray(prev)) prev.push(value)
    else out[name] = [prev, value]
  }
  return out
}

/** Parses raw header pairs the way undici does for the controller API: lowercase names, repeats as arrays. */
export function parseRawHeaders(raw: Buffer[]): ParsedHeaders {
  const out: ParsedHeaders = {}
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = (raw[i] as Buffer).toString('latin1').toLowerCase()
    const value = (raw[i + 1] as Buffer).toString('latin1')
    const prev = out[name]
    if (prev === undefined) out[name] = value
    else if (Array.isArray(prev)) prev.push(value)
    else out[name] = [prev, value]
  }
  return out
}

/** How many played chunks fetch's body stream holds before it pauses playback (its own mark is 64 KiB). */
const APART_CHUNKS = 16

/**
 * Makes fetch's body stream keep chunks apart. fetch (Node's bundled undici 6 and 7, and undici 8) keeps a
 * response's bytes in a node:stream Readable, the handler's `body`, whose read() on Node 22 and 24 hands its
 * reader everything it holds at once: an app that does any I/O between reads would get the chunks merged. In
 * object mode it hands over one chunk per read(), so every chunk handed over is its own read for the app
 * however it reads, and playback needs no wait between chunks; it pauses playback at APART_CHUNKS held chunks
 * (push returns false) and resumes it as the app reads.
 * @note `body` and `_readableState` are fetch's and Node's internals, the same in every version tried (Node 22,
 * 24, 26; undici 8): read by shape, so another handler (or a future fetch) is left alone and its playback keeps
 * the macrotask rule. Only an empty stream is switched: object mode counts chunks, not bytes.
 */
function keepChunksApart(handler: object): boolean {
  const state = (handler as { body?: { _readableState?: { highWaterMark?: unknown; objectMode?: unknown; length?: unknown } } }).body?._readableState
  if (!state || typeof state.highWaterMark !== 'number' || state.objectMode !== false || state.length !== 0) return false
  state.objectMode = true
  state.highWaterMark = APART_CHUNKS
  return true
}

/** True for the controller API; a handler may omit onRequestStart, so any of its callbacks decides. */
function isControllerHandler(handler: AnyDispatchHandler): handler is Dispatcher.DispatchHandler {
  const h = handler as Dispatcher.DispatchHandler
  return (
    typeof h.onRequestStart === 'function' ||
    typeof h.onResponseStart === 'function' ||
    typeof h.onResponseData === 'function' ||
    typeof h.onResponseEnd === 'function' ||
    typeof h.onResponseError === 'function'
  )
}

/** Adapts an app's handler, legacy or controller API, to a ResponseSink (one object per request, methods shared). */
export function createResponseSink(handler: AnyDispatchHandler): ResponseSink {
  return isControllerHandler(handler) ? new ControllerSink(handler) : new LegacySink(handler as LegacyDispatchHandler)
}

/** What both handler APIs share: the controller, and that a response ends once (its end or its error). */
abstract class HandlerSink implements ResponseSink {
  readonly controller = new ResponseController()
  finished = false
  abstract start(): void
  abstract responseStart(statusCode: number, rawHeaders: Buffer[], statusText: string, parsed?: () => ParsedHeaders): boolean
  abstract data(chunk: Buffer): boolean
  /** Hands the end to the handler (called once). */
  protected abstract ended(rawTrailers: Buffer[]): void
  /** Hands the error to the handler, or returns false when it has no error callback (called once). */
  protected abstract failed(err: Error): boolean
  /** The app's handler object. */
  protected abstract get handler(): object

  keepChunksApart(): boolean {
    return !this.finished && keepChunksApart(this.handler)
  }

  end(rawTrailers: Buffer[]): void {
    if (this.finished) return
    this.finished = true
    this.ended(rawTrailers)
  }

  error(err: Error): void {
    if (this.finished) return
    this.finished = true
    if (!this.failed(err)) throw err
  }
}

/** The controller API (undici 8's fetch and handlers). */
class ControllerSink extends HandlerSink {
  readonly #h: Dispatcher.DispatchHandler

  constructor(handler: Dispatcher.DispatchHandler) {
    super()
    this.#h = handler
  }

  protected get handler(): object {
    return this.#h
  }

  start(): void {
    this.#h.onRequestStart?.(this.controller, {})
  }

  responseStart(statusCode: number, rawHeaders: Buffer[], statusText: string, parsed?: () => ParsedHeaders): boolean {
    if (this.finished) return false
    const controller = this.controller
    controller.rawHeaders = rawHeaders
    ;(this.#h as LegacyDispatchHandler).onResponseStarted?.()
    this.#h.onResponseStart?.(controller, statusCode, parsed ? parsed() : parseRawHeaders(rawHeaders), statusText)
    return !controller.paused
  }

  data(chunk: Buffer): boolean {
    if (this.finished) return false
    this.#h.onResponseData?.(this.controller, chunk)
    return !this.controller.paused
  }

  protected ended(rawTrailers: Buffer[]): void {
    this.controller.rawTrailers = rawTrailers
    this.#h.onResponseEnd?.(this.controller, parseRawHeaders(rawTrailers))
  }

  protected failed(err: Error): boolean {
    if (!this.#h.onResponseError) return false
    this.#h.onResponseError(this.controller, err)
    return true
  }
}

/** The legacy callbacks (Node's bundled fetch: undici 6 in Node 22, 7 in Node 24). */
class LegacySink extends HandlerSink {
  readonly #h: LegacyDispatchHandler
  readonly #resume = () => this.controller.resume()

  constructor(handler: LegacyDispatchHandler) {
    super()
    this.#h = handler
  }

  protected get handler(): object {
    return this.#h
  }

  start(): void {
    this.#h.onConnect?.((reason) => this.controller.abort(reason))
  }

  responseStart(statusCode: number, rawHeaders: Buffer[], statusText: string): boolean {
    if (this.finished) return false
    const controller = this.controller
    controller.rawHeaders = rawHeaders
    this.#h.onResponseStarted?.()
    if (this.#h.onHeaders?.(statusCode, rawHeaders, this.#resume, statusText) === false) controller.pause()
    return !controller.paused
  }

  data(chunk: Buffer): boolean {
    if (this.finished) return false
    if (this.#h.onData?.(chunk) === false) this.controller.pause()
    return !this.controller.paused
  }

  protected ended(rawTrailers: Buffer[]): void {
    this.#h.onComplete?.(rawTrailers)
  }

  protected failed(err: Error): boolean {
    if (!this.#h.onError) return false
    this.#h.onError(err)
    return true
  }
}
