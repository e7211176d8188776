/**
 * Plays a recorded outcome into a ResponseSink the way a socket would have delivered it: one data
 * callback per recorded chunk, each its own read for the app (a macrotask between chunks, so fetch's body
 * stream hands the app one chunk per read), stopping while the app is paused. What goes out when is
 * decided by the engine's playback driver, the same for the proxy.
 */
import { drivePlayback, type Pace, type Playback, type PlaybackTarget, toNodeError } from '../engine/index.ts'
import type { HeaderPairs } from '../trace/index.ts'
import { parseHeaderPairs, type ResponseSink } from './response-sink.ts'

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

/** The sink as a PlaybackTarget: pauses become waits, aborts end playback. */
function sinkTarget(sink: ResponseSink): PlaybackTarget {
  const controller = sink.controller
  const resumed = () => new Promise<void>((resolve) => controller.whenResumed(resolve))
  return {
    get gone() {
      return controller.aborted || sink.finished
    },
    head(head) {
      sink.responseStart(head.status, rawHeaderBuffers(head.headers), head.statusText, () => parseHeaderPairs(head.headers))
    },
    chunk(bytes) {
      // The parser would not hand over data while the app is paused either.
      if (controller.paused) return resumed().then(() => void (controller.aborted || sink.data(asBuffer(bytes))))
      sink.data(asBuffer(bytes))
      return controller.paused ? resumed() : undefined
    },
    separate: nextMacrotask,
    end(trailers) {
      if (controller.paused) {
        // Nor would it reach the end of the message while paused.
        void resumed().then(() => controller.aborted || sink.end(trailers.length === 0 ? [] : rawHeaderBuffers(trailers)))
        return
      }
      sink.end(trailers.length === 0 ? [] : rawHeaderBuffers(trailers))
    },
    // In-process an injected failure and a recorded one look the same to fetch: a failed request with the code.
    fail(recorded, afterHead) {
      const error = toNodeError(recorded)
      // fetch hangs its body promise when start, data and error come in one tick; let it settle first.
      if (afterHead) setImmediate(() => controller.aborted || sink.error(error))
      else sink.error(error)
    },
  }
}

/** Plays `playback` into `sink` at `pace`. Returns at once; delivery continues on timers and resumes. */
export function playBack(playback: Playback, sink: ResponseSink, pace: Pace): void {
  void drivePlayback(playback, pace, sinkTarget(sink))?.catch((err: Error) => sink.error(err))
}
