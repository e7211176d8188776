/**
 * The global fetch answering a played stream itself. Through the dispatcher API every chunk of a body costs
 * fetch its own round through a node:stream Readable, an async iterator and its byte stream (a dozen promises
 * a read); a stream of 50 events replayed that way ran at a fifth of SnapshotAgent's one read. So `install()`
 * wraps the global fetch: each call still goes through Node's fetch and this session's dispatcher (the request
 * as fetch builds it, its identity, its turn, redirects, refusals, live requests: nothing changes there), with
 * a dispatcher of its own (`FetchCall`) that knows the call. When the answer is a played body of several
 * chunks, fetch gets the head and an empty body, and the call's Response carries a byte stream that hands the
 * app one recorded chunk per read, however it reads (chunks not yet read wait in the client; past 64 KiB of
 * them, playback waits for reads).
 *
 * What fetch's own Response would have shows the same: status, statusText, `url`, `redirected`, `type` and
 * immutable headers (a constructed Response has no url, redirected or type of fetch's, and headers the app may
 * change: a subclass gives fetch's back, on clones too), a byte stream (BYOB readers work), an abort of the
 * call's signal errors the body with its reason, a recorded failure mid-body errors it with fetch's
 * `TypeError: terminated` and the failure as its cause, after the chunks before it. Left to fetch (answered as
 * before): one-chunk bodies, live answers, bodies streamed from the store, encoded bodies (fetch decodes them),
 * redirects, heads a constructed Response would refuse, a call with its own `dispatcher`, and `fetch(request)`
 * without an init (a second init would reset the request's referrer).
 */
import type { Dispatcher } from 'undici'
import type { WireHead } from '../capture/index.ts'
import { toNodeError } from '../capture/index.ts'
import { type HeaderPairs, headerValue, headFitsHttp, RECORDED_STATUS_MAX, RECORDED_STATUS_MIN, type RecordedError, type ResponseHead } from '../trace/index.ts'
import { FetchClient } from './playback.ts'
import type { AnyDispatchHandler, ResponseSink } from './response-sink.ts'

/** Where a call's requests go: the session's dispatcher, told which call each one belongs to. */
export interface CallDispatch {
  dispatchFor(opts: Dispatcher.DispatchOptions, handler: AnyDispatchHandler, call: FetchCall): boolean
}

/** What a played response keeps of fetch's own: the getters a constructed Response cannot be given. */
interface Facts {
  url: string
  redirected: boolean
  type: ResponseType
  /** fetch's own headers: immutable, where a constructed Response's may be changed. */
  headers: Headers
}

const facts = new WeakMap<object, Facts>()

/**
 * The Response class of played streams: fetch's url, redirected, type and headers, on it and on its clones.
 * Made at the first played stream: naming `Response` loads Node's fetch (~40 ms), which importing the
 * interceptor must not cost.
 */
let playedResponse: typeof Response | undefined

function playedResponseClass(): typeof Response {
  if (playedResponse) return playedResponse
  class PlayedResponse extends Response {
    override clone(): Response {
      const copy = super.clone()
      const own = facts.get(this)
      if (own) {
        Object.setPrototypeOf(copy, PlayedResponse.prototype)
        facts.set(copy, own)
      }
      return copy
    }
  }
  // Getters, not fields: Response declares them as properties, and a getter on the prototype is what fetch's has.
  for (const key of ['url', 'redirected', 'type', 'headers'] as const) {
    const inherited = Object.getOwnPropertyDescriptor(Response.prototype, key)?.get
    Object.defineProperty(PlayedResponse.prototype, key, {
      configurable: true,
      enumerable: true,
      get(this: Response) {
        const own = facts.get(this)
        return own ? own[key] : inherited?.call(this)
      },
    })
  }
  Object.defineProperty(PlayedResponse, 'name', { value: 'Response' })
  playedResponse = PlayedResponse
  return PlayedResponse
}

/** One call of the global fetch: the dispatcher fetch uses for it, and the played body, once there is one. */
export class FetchCall {
  readonly #via: CallDispatch
  /** The call's signal (init's, else the Request's): aborting it errors a played body. */
  readonly signal: AbortSignal | null
  /** The played body that replaces fetch's (set by PulledClient.head). */
  body: ReadableStream<Uint8Array> | undefined

  constructor(via: CallDispatch, signal: AbortSignal | null) {
    this.#via = via
    this.signal = signal
  }

  /** As the session's dispatcher answers it (fetch reads it to hand over request bodies as they are). */
  get isMockActive(): boolean {
    return true
  }

  dispatch(opts: Dispatcher.DispatchOptions, handler: AnyDispatchHandler): boolean {
    return this.#via.dispatchFor(opts, handler, this)
  }

  /** fetch's Response, or the played one when this call's answer was a played stream. */
  answer(res: Response): Response {
    const body = this.body
    if (!body) return res
    const Played = playedResponseClass()
    const out = new Played(body, { status: res.status, statusText: res.statusText, headers: res.headers })
    facts.set(out, { url: res.url, redirected: res.redirected, type: res.type, headers: res.headers })
    return out
  }
}

/**
 * Wraps the global fetch so each call gets its FetchCall; returns the function that puts the original back
 * (when nothing wrapped it since; a wrapper kept by someone goes straight to the original from then on).
 */
export function wrapGlobalFetch(via: CallDispatch): () => void {
  const original = globalThis.fetch
  let on = true
  const fetch = function fetch(input: RequestInfo | URL, init?: RequestInit): Promise<Response> {
    if (!on || !ownDispatcherFits(input, init)) return original(input, init)
    const call = new FetchCall(via, signalOf(input, init))
    const withCall = init == null ? { dispatcher: call } : Object.create(init, { dispatcher: { value: call, enumerable: true } })
    return original(input, withCall).then((res) => call.answer(res))
  }
  Object.defineProperty(fetch, 'length', { value: original.length })
  globalThis.fetch = fetch
  return () => {
    on = false
    if (globalThis.fetch === fetch) globalThis.fetch = original
  }
}

/**
 * False where giving the call a dispatcher would change it: the app chose one, the init is not a dictionary
 * (fetch rejects it itself), or a Request comes without a non-empty init (an init re-bases its referrer).
 */
function ownDispatcherFits(input: RequestInfo | URL, init: RequestInit | undefined): boolean {
  if (init != null && (typeof init !== 'object' || (init as { dispatcher?: unknown }).dispatcher !== undefined)) return false
  return !(input instanceof Request) || (init != null && Object.keys(init).length > 0)
}

function signalOf(input: RequestInfo | URL, init: RequestInit | undefined): AbortSignal | null {
  if (init?.signal !== undefined) return init.signal
  return input instanceof Request ? input.signal : null
}

/** Removes a call's abort listener from its signal once its client is collected. */
const listeners = new FinalizationRegistry<() => void>((unlisten) => unlisten())

/** How many bytes of played chunks the body holds before playback waits for the app's reads (fetch's own mark). */
const HELD_BYTES = 64 * 1024

/** A failure after the head as fetch reports it to the body's reader. */
function terminated(cause: Error): TypeError {
  return new TypeError('terminated', { cause })
}

/** True when a constructed Response takes this head as fetch's took it, and fetch would hand its body over as it is. */
function answerable(head: ResponseHead): boolean {
  const status = head.status
  // 3xx: fetch may follow it (and drops its body); 204/205/304 have none; outside 200-599 a Response cannot be made.
  if (status < RECORDED_STATUS_MIN || status > RECORDED_STATUS_MAX || (status >= 300 && status < 400) || status === 204 || status === 205) return false
  // An encoded body is decoded by fetch: left to it.
  return headerValue(head.headers, 'content-encoding') === undefined && headFitsHttp(head)
}

/**
 * The fetch client of one call of the wrapped fetch: as FetchClient until a played head of several chunks
 * comes; from then on its chunks go into the call's own byte stream, one chunk per read the app makes (the
 * stream holds none: a chunk goes to a pending read, else waits here, up to HELD_BYTES before playback waits).
 */
export class PulledClient extends FetchClient {
  readonly #call: FetchCall
  #controller: ReadableByteStreamController | undefined
  /** Chunks played and not yet read, and their bytes. */
  readonly #held: Array<Uint8Array<ArrayBuffer>> = []
  #heldBytes = 0
  /** The app's reader waits for a chunk (the stream asked and nothing was held). */
  #wanted = false
  /** How the body ends once the held chunks are read: closed, or failed with this error. */
  #ending: 'close' | Error | undefined
  /** Playback waiting for the app to read (more than HELD_BYTES held). */
  #waiting: (() => void) | undefined
  #left = false
  #onLeft: Array<() => void> | undefined
  #unlisten: (() => void) | undefined

  constructor(sink: ResponseSink, apart: boolean, call: FetchCall) {
    super(sink, apart)
    this.#call = call
    // Before the switch the app leaves through fetch (its abort); after it, through this call's own stream.
    super.onGone(() => {
      if (!this.#controller) this.#leave()
    })
  }

  override get gone(): boolean {
    return this.#controller ? this.#left : this.#left || super.gone
  }

  override onGone(fn: () => void): void {
    ;(this.#onLeft ??= []).push(fn)
  }

  override head(head: ResponseHead, wire?: WireHead, chunks?: number): void {
    if (wire || chunks === undefined || !this.apart || this.#call.body || !answerable(head)) {
      super.head(head, wire)
      return
    }
    // fetch gets the head and an empty body; the app gets the call's Response (FetchCall.answer).
    super.head(head)
    super.end([])
    this.#call.body = new ReadableStream(
      {
        type: 'bytes',
        start: (controller) => {
          this.#controller = controller
        },
        pull: () => this.#pull(),
        cancel: () => this.#leave(),
      },
      { highWaterMark: 0 },
    )
    const signal = this.#call.signal
    if (signal) this.#unlisten = PulledClient.#listen(signal, this)
  }

  /**
   * Errors the body when `signal` aborts. The signal may outlive many calls (one per app): it holds the client
   * weakly, and its listener goes when the client does (a body the app never read), as fetch's own listener
   * does. Static, so that the listener's scope holds no client.
   */
  static #listen(signal: AbortSignal, client: PulledClient): () => void {
    const ref = new WeakRef(client)
    const onAbort = () => {
      const alive = ref.deref()
      if (alive) alive.#abort(signal.reason)
    }
    signal.addEventListener('abort', onAbort, { once: true })
    const unlisten = () => signal.removeEventListener('abort', onAbort)
    const token = {}
    listeners.register(client, unlisten, token)
    return () => {
      listeners.unregister(token)
      unlisten()
    }
  }

  override chunk(bytes: Uint8Array): Promise<void> | undefined {
    const controller = this.#controller
    if (!controller) return super.chunk(bytes)
    if (this.#left) return undefined
    // A copy: a byte stream takes over the buffer it is given, and the recorded bytes are the store's.
    const copy = new Uint8Array(bytes)
    if (this.#wanted) {
      this.#wanted = false
      controller.enqueue(copy)
      return undefined
    }
    this.#held.push(copy)
    this.#heldBytes += copy.byteLength
    if (this.#heldBytes < HELD_BYTES) return undefined
    return new Promise<void>((resolve) => {
      this.#waiting = resolve
    })
  }

  override separate(): Promise<void> | undefined {
    // The body hands over one chunk per read itself.
    return this.#controller ? undefined : super.separate()
  }

  override end(trailers: HeaderPairs): void {
    if (!this.#controller) {
      super.end(trailers)
      return
    }
    this.#finish('close')
  }

  override fail(recorded: RecordedError, afterHead: boolean): void {
    if (!this.#controller) {
      super.fail(recorded, afterHead)
      return
    }
    this.#finish(terminated(toNodeError(recorded)))
  }

  override failLive(err: Error): void {
    if (!this.#controller) {
      super.failLive(err)
      return
    }
    this.#finish(terminated(err))
  }

  override failWith(err: Error): void {
    if (!this.#controller) {
      super.failWith(err)
      return
    }
    this.#finish(terminated(err))
  }

  /** The app's reader asks for a chunk: the oldest held one, else the end once everything was read. */
  #pull(): void {
    const next = this.#held.shift()
    if (next === undefined) {
      if (this.#ending) this.#finish(this.#ending)
      else this.#wanted = true
      return
    }
    this.#heldBytes -= next.byteLength
    ;(this.#controller as ReadableByteStreamController).enqueue(next)
    if (this.#heldBytes < HELD_BYTES) {
      const waiting = this.#waiting
      this.#waiting = undefined
      waiting?.()
    }
  }

  /** Ends the body as `ending` says once the app has read every held chunk (a failure, as fetch reports one, after them). */
  #finish(ending: 'close' | Error): void {
    if (this.#left) return
    if (this.#held.length > 0) {
      this.#ending = ending
      return
    }
    this.#left = true
    this.#unlisten?.()
    const controller = this.#controller as ReadableByteStreamController
    if (ending !== 'close') controller.error(ending)
    else {
      controller.close()
      // A BYOB read waiting for a chunk is answered "done" only this way (as fetch closes its body).
      controller.byobRequest?.respond(0)
    }
  }

  /** An abort of the call's signal: the body fails with its reason at once, as fetch's does. */
  #abort(reason: unknown): void {
    if (this.#left) return
    this.#controller?.error(reason ?? new DOMException('This operation was aborted', 'AbortError'))
    this.#leave()
  }

  /** The app is gone (an abort, a cancel): playback stops, and whoever waits for that is told. */
  #leave(): void {
    if (this.#left) return
    this.#left = true
    this.#unlisten?.()
    this.#held.length = 0
    const waiting = this.#waiting
    this.#waiting = undefined
    waiting?.()
    const fns = this.#onLeft
    this.#onLeft = undefined
    if (fns) for (const fn of fns) fn()
  }
}
