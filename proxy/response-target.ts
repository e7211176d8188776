/**
 * The proxy's client side: a ServerResponse as the `ClientTarget` the capture lifecycle plays and tees into.
 * Live answers and recorded ones are written the same way, so a client cannot tell a replay from the run.
 */
import type { ServerResponse } from 'node:http'
import type { ClientTarget } from '../capture/index.ts'
import type { Playback } from '../engine/index.ts'
import { ErrorCodes, type HeaderPairs } from '../trace/index.ts'
import { resetConnection } from './connection-reset.ts'
import { hasHeader, stripHopByHop } from './headers.ts'
import { sendProxyError, sendUpstreamError } from './responses.ts'

/**
 * Extra time between two chunk writes, after the first was flushed to the kernel and a macrotask ran, so
 * that a client reads them apart (a client reads whatever its socket holds when it gets to run). 0 is
 * enough on loopback: measured with Node fetch (NODE_USE_ENV_PROXY), curl --no-buffer and Python
 * requests' iter_content through the HTTPS proxy, 50 events per stream, with three CPU hogs on a 2-core
 * machine: every read apart (bench/run.ts prints the figures). Raise it (`--chunk-gap-ms`) for clients
 * across a real network.
 */
export const DEFAULT_CHUNK_GAP_MS = 0

/** A ServerResponse as a ClientTarget: one write per chunk, flushed, then the gap. */
export function responseTarget(res: ServerResponse, gapMs: number): ClientTarget {
  let head: Playback['head']
  let noDelay = false
  const target: ClientTarget = {
    get gone() {
      return res.destroyed
    },
    onGone(fn) {
      res.once('close', () => {
        if (!res.writableFinished) fn()
      })
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
    // Live, the client gets what a replay of the same recording gives it.
    failLive(_err, recorded, afterHead) {
      target.fail(recorded, afterHead, false)
    },
    failWith(err) {
      sendProxyError(res, 500, ErrorCodes.INTERNAL, `Tool Replay failed to answer this request: ${err.message}`)
    },
  }
  return target
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
