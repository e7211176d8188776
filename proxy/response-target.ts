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
 * Extra time between two chunk writes over TLS, after the first was flushed to the kernel and a macrotask ran.
 * 0 is enough there: each write is a TLS record of its own, and clients decrypt and hand over record by record
 * (measured with Node fetch, curl --no-buffer and Python requests' iter_content through the HTTPS proxy, 50
 * events per stream, on a loaded 2-core machine: bench/suites/proxy-sse.ts).
 */
export const DEFAULT_CHUNK_GAP_MS = 0

/**
 * The same over plain HTTP (forward `http://` URLs, reverse mode): TCP keeps no boundaries, and a client reads
 * whatever its socket holds when it gets to run, so two writes a macrotask apart usually arrive as one read.
 * Measured with a Node fetch client replaying 20 chunks through the plain-HTTP proxy (e2e/stream-fidelity):
 * reads apart with a 0 ms gap 2, 1 ms 14-16, 2 ms 17-20 (14 with the test suite running beside it), 4 ms 20;
 * live at 5 ms upstream gaps 18-20 (the merges left happen while the client is busy, e.g. turning the head
 * into a Response).
 */
export const DEFAULT_PLAIN_CHUNK_GAP_MS = 2

/**
 * A ServerResponse as a ClientTarget: one write per chunk, flushed, then the gap (`gapMs`, or the default for
 * the client's connection: TLS or plain).
 */
export function responseTarget(res: ServerResponse, gapMs: number | undefined): ClientTarget {
  let head: Playback['head']
  let noDelay = false
  /** Settles once the last chunk written reached the kernel. */
  let flushed: Promise<void> | undefined
  const gap = () => gapMs ?? ((res.socket as { encrypted?: boolean } | null)?.encrypted ? DEFAULT_CHUNK_GAP_MS : DEFAULT_PLAIN_CHUNK_GAP_MS)
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
      let done: () => void = () => {}
      flushed = new Promise<void>((resolve) => (done = resolve))
      if (res.write(bytes, () => done())) return undefined
      return waitDrain(res)
    },
    async separate() {
      // The gap starts once the previous chunk was handed to the kernel (a write's callback also runs, with an
      // error, when the connection is destroyed first).
      if (flushed && !res.destroyed) await flushed
      const ms = gap()
      await new Promise<void>((resolve) => (ms > 0 ? setTimeout(resolve, ms) : setImmediate(resolve)))
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
