/**
 * The fetch path's client side: a ResponseSink (the app's undici handler) as the `ClientTarget` the capture
 * lifecycle plays and tees into. A played response reaches it the way a socket would have delivered it: one
 * data callback per recorded chunk, each its own read for the app (a macrotask between chunks, so fetch's
 * body stream hands the app one chunk per read), stopping while the app is paused.
 */
import { type ClientTarget, drivePlayback, type Pace, toNodeError } from '../capture/index.ts'
import type { Playback } from '../engine/index.ts'
import type { HeaderPairs } from '../trace/index.ts'
import { type ParsedHeaders, parseHeaderPairs, type ResponseSink } from './response-sink.ts'

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

/** A macrotask: by then the app's pending read has taken the previous chunk and asked for the next. */
const nextMacrotask = () => new Promise<void>((resolve) => setImmediate(resolve))

/**
 * The app's fetch as the client of a captured request: pauses become waits, an abort ends delivery and
 * reaches the app at once as its own AbortError, live failures reach it as undici reported them.
 */
export function fetchClient(sink: ResponseSink): ClientTarget {
  const controller = sink.controller
  const resumed = () => new Promise<void>((resolve) => controller.whenResumed(resolve))
  const gone: Array<() => void> = []
  controller.onAbort((reason) => {
    for (const fn of gone.splice(0)) fn()
    queueMicrotask(() => sink.error(reason))
  })
  return {
    get gone() {
      return controller.aborted || sink.finished
    },
    onGone(fn) {
      gone.push(fn)
    },
    head(head, wire) {
      if (wire) sink.responseStart(head.status, wire.raw, head.statusText, wire.parsed ? () => wire.parsed as ParsedHeaders : undefined)
      else sink.responseStart(head.status, rawHeaderBuffers(head.headers), head.statusText, () => parseHeaderPairs(head.headers))
    },
    chunk(bytes) {
      // The parser would not hand over data while the app is paused either.
      if (controller.paused) return resumed().then(() => void (controller.aborted || sink.data(asBuffer(bytes))))
      sink.data(asBuffer(bytes))
      return controller.paused ? resumed() : undefined
    },
    separate: nextMacrotask,
    end(trailers) {
      const raw = trailers.length === 0 ? [] : rawHeaderBuffers(trailers)
      // Nor would it reach the end of the message while paused.
      if (controller.paused) void resumed().then(() => controller.aborted || sink.end(raw))
      else sink.end(raw)
    },
    // In-process an injected failure and a recorded one look the same to fetch: a failed request with the code.
    fail(recorded, afterHead) {
      const error = toNodeError(recorded)
      // fetch hangs its body promise when start, data and error come in one tick; let it settle first.
      if (afterHead) setImmediate(() => controller.aborted || sink.error(error))
      else sink.error(error)
    },
    failLive(err) {
      sink.error(err)
    },
    failWith(err) {
      sink.error(err)
    },
  }
}

/** Plays `playback` into `sink` at `pace`. Returns at once; delivery continues on timers and resumes. */
export function playBack(playback: Playback, sink: ResponseSink, pace: Pace): void {
  const client = fetchClient(sink)
  void drivePlayback(playback, pace, client)?.catch((err: Error) => client.failWith(err))
}
