import type { ServerResponse } from 'node:http'
import { drivePlayback, type Pace, type Playback, type PlaybackTarget } from '../engine/index.ts'
import type { HeaderPairs } from '../trace/index.ts'
import { resetConnection } from './connection-reset.ts'
import { hasHeader, stripHopByHop } from './headers.ts'
import { sendUpstreamError } from './responses.ts'

/**
 * Extra time between two chunk writes, after the first was flushed to the kernel and a macrotask ran, so
 * that a client reads them apart (a client reads whatever its socket holds when it gets to run). 0 is
 * enough on loopback: measured with Node fetch (NODE_USE_ENV_PROXY), curl --no-buffer and Python
 * requests' iter_content through the HTTPS proxy, 50 events per stream, with three CPU hogs on a 2-core
 * machine: every read apart (bench/run.ts prints the figures). Raise it (`--chunk-gap-ms`) for clients
 * across a real network.
 */
export const DEFAULT_CHUNK_GAP_MS = 0

/** Options for playing back through the proxy. */
export interface ProxyPlaybackOptions {
  pace: Pace
  /** Gap between chunk writes (ms), default DEFAULT_CHUNK_GAP_MS; only with a pace that keeps chunks apart. */
  chunkGapMs?: number
}

/**
 * Plays a recorded response, or a recorded failure, back to the client. Returns a promise only when
 * there is something to wait for (pacing, chunk separation, back-pressure, a dying connection); a response
 * of one chunk is written in the caller's tick.
 */
export function writePlayback(res: ServerResponse, playback: Playback, options: ProxyPlaybackOptions): Promise<void> | undefined {
  return drivePlayback(playback, options.pace, responseTarget(res, options.chunkGapMs ?? DEFAULT_CHUNK_GAP_MS))
}

/** A ServerResponse as a PlaybackTarget: one write per chunk, flushed, then the gap. */
export function responseTarget(res: ServerResponse, gapMs: number): PlaybackTarget {
  let head: Playback['head']
  let noDelay = false
  return {
    get gone() {
      return res.destroyed
    },
    head(h) {
      head = h
      res.writeHead(h.status, h.statusText || undefined, stripHopByHop(h.headers))
    },
    chunk(bytes) {
      if (!noDelay) {
        // Small writes must leave at once, not wait for Nagle's algorithm to coalesce them.
        res.socket?.setNoDelay(true)
        noDelay = true
      }
      if (res.write(bytes)) return undefined
      return waitDrain(res)
    },
    separate() {
      return new Promise<void>((resolve) => {
        // The write callback runs once the bytes are handed to the kernel; the gap starts there.
        res.write('', () => (gapMs > 0 ? setTimeout(resolve, gapMs) : setImmediate(resolve)))
      })
    },
    end(trailers) {
      if (trailers.length > 0 && head && !hasHeader(head.headers, 'content-length')) res.addTrailers(trailersObject(trailers))
      res.end()
    },
    fail(error, afterHead, injected) {
      if (injected) {
        // A fault: the client's own connection fails (after what was written so far reached the kernel).
        if (afterHead) res.write('', () => resetConnection(res.socket))
        else resetConnection(res.socket)
        return
      }
      if (!afterHead) {
        // Failed before any response head: the client gets what the proxy sent while recording.
        sendUpstreamError(res, error.code, error.phase, error.message)
        return
      }
      // Recorded failure after the head: the partial body, then the connection dies as it did.
      res.write('', () => res.socket?.destroy())
    },
  }
}

function waitDrain(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done)
      res.off('close', done)
      resolve()
    }
    res.on('drain', done)
    res.on('close', done)
  })
}

/** Trailers as the flat array `addTrailers` takes. */
export function trailersObject(trailers: HeaderPairs): Array<[string, string]> {
  return trailers.map(([k, v]) => [k, v])
}
