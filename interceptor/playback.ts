/**
 * Plays a recorded outcome into a ResponseSink the way a socket would have delivered it: one data
 * callback per recorded chunk, stopping while the app is paused, optionally at the recorded pace.
 */
import { type Playback, toNodeError } from '../engine/index.ts'
import type { HeaderPairs } from '../trace/index.ts'
import { parseHeaderPairs, type ResponseSink } from './response-sink.ts'

export interface PlaybackOptions {
  /** Multiplies recorded delays: 0 plays as fast as possible, 1 at the recorded pace. */
  pace: number
}

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

/** Plays `playback` into `sink`. Returns at once; delivery continues on timers and resumes. */
export function playBack(playback: Playback, sink: ResponseSink, options: PlaybackOptions): void {
  const controller = sink.controller
  const pace = Math.max(options.pace, 0)
  const t0 = performance.now()
  const chunks = playback.chunks
  const head = playback.head
  let headSent = head === undefined
  let i = 0

  // Milliseconds left until a recorded offset, scaled; 0 when not pacing.
  const wait = (atMs: number) => (pace === 0 ? 0 : atMs * pace - (performance.now() - t0))

  const step = (): void => {
    if (controller.aborted || sink.finished) return
    if (!headSent && head) {
      const ms = wait(playback.headersMs)
      if (ms >= 1) {
        setTimeout(step, ms)
        return
      }
      headSent = true
      sink.responseStart(head.status, rawHeaderBuffers(head.headers), head.statusText, () => parseHeaderPairs(head.headers))
    }
    while (i < chunks.length) {
      if (controller.aborted || sink.finished) return
      if (controller.paused) {
        controller.whenResumed(step)
        return
      }
      const chunk = chunks[i] as (typeof chunks)[number]
      const ms = wait(chunk.atMs)
      if (ms >= 1) {
        setTimeout(step, ms)
        return
      }
      i++
      sink.data(asBuffer(chunk.bytes))
    }
    if (controller.aborted || sink.finished) return
    // The parser would not reach the end of the message while paused either.
    if (controller.paused) {
      controller.whenResumed(step)
      return
    }
    if (playback.kind === 'response') {
      sink.end(playback.trailers.length === 0 ? [] : rawHeaderBuffers(playback.trailers))
      return
    }
    const error = toNodeError(playback.error)
    if (headSent && head) {
      // fetch hangs its body promise when start, data and error come in one tick; let it settle first.
      setImmediate(() => {
        if (!controller.aborted) sink.error(error)
      })
      return
    }
    const ms = wait(playback.headersMs)
    if (ms >= 1) setTimeout(() => controller.aborted || sink.error(error), ms)
    else sink.error(error)
  }

  step()
}
