/**
 * The fetch path's client side: a ResponseSink (the app's undici handler) as the `ClientTarget` the capture
 * lifecycle plays and tees into. A played response reaches it the way a socket would have delivered it: one
 * data callback per recorded chunk, each its own read for the app, stopping while the app is paused. fetch's
 * body is a node:stream Readable under the web stream; on Node 22 and 24 its read() hands over everything it
 * holds at once. There a played stream of several chunks makes that Readable hold one chunk at a time
 * (response-sink.ts holdOneChunk): the next chunk goes out when the app's reader pulls, so an app that awaits
 * I/O between reads still reads every chunk apart; a handler without that Readable gets the chunks a macrotask
 * apart (by then a pending read has taken the previous one). Node 26's read() hands over one chunk at a time:
 * there chunks go over without waiting, and each is still its own read (fetch's back-pressure pauses playback
 * as it would a socket).
 */
import { type ClientTarget, drivePlayback, type Pace, toNodeError, type WireHead } from '../capture/index.ts'
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
export function fetchClient(sink: ResponseSink): ClientTarget {
  return new FetchClient(sink)
}

/** One object per request, its methods shared (no closures made per request). */
class FetchClient implements ClientTarget {
  readonly #sink: ResponseSink
  readonly #controller: ResponseController
  #gone: Array<() => void> | undefined
  /** Undefined until the first separation; then true when the app's reader pulls each chunk (holdOneChunk). */
  #pulls: boolean | undefined

  constructor(sink: ResponseSink) {
    this.#sink = sink
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
    else this.#sink.responseStart(head.status, rawHeaderBuffers(head.headers), head.statusText, () => parseHeaderPairs(head.headers))
  }

  chunk(bytes: Uint8Array): Promise<void> | undefined {
    const controller = this.#controller
    // The parser would not hand over data while the app is paused either.
    if (controller.paused) return this.#resumed().then(() => void (controller.aborted || this.#sink.data(asBuffer(bytes))))
    this.#sink.data(asBuffer(bytes))
    return controller.paused ? this.#resumed() : undefined
  }

  separate(): Promise<void> | undefined {
    if (this.#pulls === undefined) {
      // Asked only between chunks (never for a one-chunk answer, whose end must not wait for a read). The first
      // chunk went out before the body held one chunk at a time: this first separation is still a macrotask.
      this.#pulls = !readableKeepsChunksApart() && this.#sink.holdOneChunk()
      return nextRead()
    }
    // Holding one chunk, the body asks for the next when its reader took this one: chunk() waits for that.
    return this.#pulls ? undefined : nextRead()
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
  const client = fetchClient(sink)
  void drivePlayback(playback, pace, client)?.catch((err: Error) => client.failWith(err))
}
