/**
 * The fetch path's client side: a ResponseSink (the app's undici handler) as the `ClientTarget` the capture
 * lifecycle plays and tees into. A played response reaches it the way a socket would have delivered it: one
 * data callback per recorded chunk, each its own read for the app, stopping while the app is paused. fetch's
 * body is a node:stream Readable under the web stream; on Node 22 and 24 its read() hands over everything it
 * holds at once. There a played response makes that Readable keep its chunks apart (response-sink.ts
 * keepChunksApart: one chunk per read()), so chunks go over without waiting and an app that awaits I/O between
 * reads still reads every chunk apart; a handler without that Readable gets the chunks a macrotask apart (by
 * then a pending read has taken the previous one). Node 26's read() hands over one chunk at a time itself.
 * Either way fetch's back-pressure pauses playback as it would a socket.
 */
import { type ClientTarget, drivePlayback, keepsChunksApart, type Pace, toNodeError, type WireHead } from '../capture/index.ts'
import type { Playback } from '../engine/index.ts'
import type { HeaderPairs, RecordedError, ResponseHead } from '../trace/index.ts'
import { type ParsedHeaders, parseHeaderPairs, type ResponseController, type ResponseSink } from './response-sink.ts'

const rawCache = new WeakMap<HeaderPairs, Buffer[]>()

// Header names repeat across every response (content-type, date, ...): their bytes are made once.
const nameBytes = new Map<string, Buffer>()
const NAME_CACHE_LIMIT = 4096

function headerNameBytes(name: string): Buffer {
  let b = nameBytes.get(name)
  if (!b) {
    b = Buffer.from(name, 'latin1')
    if (nameBytes.size < NAME_CACHE_LIMIT) nameBytes.set(name, b)
  }
  return b
}

/** Header pairs as the raw Buffer list undici hands handlers (latin1, as on the wire). Cached per list. */
export function rawHeaderBuffers(pairs: HeaderPairs): Buffer[] {
  let raw = rawCache.get(pairs)
  if (raw) return raw
  raw = []
  for (const [name, value] of pairs) raw.push(headerNameBytes(name), Buffer.from(value, 'latin1'))
  rawCache.set(pairs, raw)
  return raw
}

function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
}

let keepsApart: boolean | undefined

/** True when this runtime's Readable hands over one pushed chunk per read() (Node 26), asked of a Readable once; both in-process paths use it. */
export function readableKeepsChunksApart(): boolean {
  if (keepsApart === undefined) {
    // Taken when first asked, not imported: loading the interceptor must not cost node:stream's namespace.
    const { Readable } = process.getBuiltinModule('node:stream')
    const probe = new Readable({ read() {} })
    probe.push(Buffer.from('a'))
    probe.push(Buffer.from('b'))
    keepsApart = (probe.read() as Buffer | null)?.byteLength === 1
    probe.destroy()
  }
  return keepsApart
}

/**
 * The in-process separation step, for both paths (fetch here, node:http in node-http-response.ts): a macrotask,
 * by when the app's pending read has taken the previous chunk and asked for the next; nothing where the runtime
 * keeps pushed chunks apart itself.
 */
export function nextRead(): Promise<void> | undefined {
  return readableKeepsChunksApart() ? undefined : new Promise<void>((resolve) => setImmediate(resolve))
}

/**
 * The app's fetch as the client of a captured request: pauses become waits, an abort ends delivery and
 * reaches the app at once as its own AbortError, live failures reach it as undici reported them.
 */
export function fetchClient(sink: ResponseSink, apart: boolean): ClientTarget {
  return new FetchClient(sink, apart)
}

/** One object per request, its methods shared (no closures made per request). */
export class FetchClient implements ClientTarget {
  readonly #sink: ResponseSink
  readonly #controller: ResponseController
  #gone: Array<() => void> | undefined
  /** True while a played response's chunks must reach the app apart: the pace is not `none`. */
  protected readonly apart: boolean
  /** True once the app's body stream keeps every chunk its own read (keepChunksApart): no wait between chunks. */
  #kept = false

  constructor(sink: ResponseSink, apart: boolean) {
    this.#sink = sink
    this.apart = apart
    this.#controller = sink.controller
    this.#controller.onAbort((reason) => {
      const gone = this.#gone
      this.#gone = undefined
      if (gone) for (const fn of gone) fn()
      queueMicrotask(() => sink.error(reason))
    })
  }

  get gone(): boolean {
    return this.#controller.aborted || this.#sink.finished
  }

  onGone(fn: () => void): void {
    ;(this.#gone ??= []).push(fn)
  }

  head(head: ResponseHead, wire?: WireHead): void {
    if (wire) this.#sink.responseStart(head.status, wire.raw, head.statusText, wire.parsed ? () => wire.parsed as ParsedHeaders : undefined)
    else {
      this.#sink.responseStart(head.status, rawHeaderBuffers(head.headers), head.statusText, () => parseHeaderPairs(head.headers))
      // A played response (a live one arrives as the network delivers it): its chunks stay apart in the body.
      if (this.apart && !readableKeepsChunksApart()) this.#kept = this.#sink.keepChunksApart()
    }
  }

  chunk(bytes: Uint8Array): Promise<void> | undefined {
    const controller = this.#controller
    // The parser would not hand over data while the app is paused either.
    if (controller.paused) return this.#resumed().then(() => void (controller.aborted || this.#sink.data(asBuffer(bytes))))
    this.#sink.data(asBuffer(bytes))
    return controller.paused ? this.#resumed() : undefined
  }

  separate(): Promise<void> | undefined {
    // The body keeps chunks apart itself (and pauses playback while it holds enough): nothing to wait for.
    return this.#kept ? undefined : nextRead()
  }

  end(trailers: HeaderPairs): void {
    const raw = trailers.length === 0 ? [] : rawHeaderBuffers(trailers)
    // Nor would it reach the end of the message while paused.
    if (this.#controller.paused) void this.#resumed().then(() => this.#controller.aborted || this.#sink.end(raw))
    else this.#sink.end(raw)
  }

  // In-process an injected failure and a recorded one look the same to fetch: a failed request with the code.
  fail(recorded: RecordedError, afterHead: boolean): void {
    const error = toNodeError(recorded)
    // fetch hangs its body promise when start, data and error come in one tick; let it settle first.
    if (afterHead) setImmediate(() => this.#controller.aborted || this.#sink.error(error))
    else this.#sink.error(error)
  }

  failLive(err: Error): void {
    this.#sink.error(err)
  }

  failWith(err: Error): void {
    this.#sink.error(err)
  }

  #resumed(): Promise<void> {
    return new Promise<void>((resolve) => this.#controller.whenResumed(resolve))
  }
}

/** Plays `playback` into `sink` at `pace`. Returns at once; delivery continues on timers and resumes. */
export function playBack(playback: Playback, sink: ResponseSink, pace: Pace): void {
  const client = fetchClient(sink, keepsChunksApart(pace))
  void drivePlayback(playback, pace, client)?.catch((err: Error) => client.failWith(err))
}
