/**
 * The proxy's client side: a ServerResponse as the `ClientTarget` the capture lifecycle plays and tees into.
 * Live answers and recorded ones are written the same way, so a client cannot tell a replay from the run.
 */
import type { ServerResponse } from 'node:http'
import type { ClientTarget } from '../capture/index.ts'
import type { Playback } from '../engine/index.ts'
import { ErrorCodes, type HeaderPairs, type RecordedError, type ResponseHead } from '../trace/index.ts'
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
 * the client's connection: TLS or plain), never longer than the recorded gap between the two chunks.
 */
export function responseTarget(res: ServerResponse, gapMs: number | undefined): ClientTarget {
  return new ResponseTarget(res, gapMs)
}

/** One object per request, its methods shared (a replay answers tens of thousands of these a second). */
class ResponseTarget implements ClientTarget {
  readonly #res: ServerResponse
  readonly #gapMs: number | undefined
  #head: Playback['head']
  #noDelay = false
  /** Chunk writes not yet handed to the kernel, and who waits for the last of them (separate()). */
  #unflushed = 0
  #onFlushed: (() => void) | undefined
  readonly #written = () => {
    if (--this.#unflushed > 0 || !this.#onFlushed) return
    const resolve = this.#onFlushed
    this.#onFlushed = undefined
    resolve()
  }

  constructor(res: ServerResponse, gapMs: number | undefined) {
    this.#res = res
    this.#gapMs = gapMs
  }

  get gone(): boolean {
    return this.#res.destroyed
  }

  onGone(fn: () => void): void {
    const res = this.#res
    res.once('close', () => {
      if (!res.writableFinished) fn()
    })
  }

  head(h: ResponseHead): void {
    this.#head = h
    this.#res.writeHead(h.status, h.statusText || undefined, stripHopByHop(h.headers))
  }

  chunk(bytes: Uint8Array): Promise<void> | undefined {
    const res = this.#res
    if (!this.#noDelay) {
      // Small writes must leave at once, not wait for Nagle's algorithm to coalesce them.
      res.socket?.setNoDelay(true)
      this.#noDelay = true
    }
    this.#unflushed++
    if (res.write(bytes, this.#written)) return undefined
    return waitDrain(res)
  }

  separate(recordedGapMs: number): Promise<void> | undefined {
    // Chunks the upstream wrote together (recorded under a ms apart) go out together, as they reached the client
    // live (it read 50 such events in 1-2 reads; a macrotask between them made it 6-8, at half talkback's rate).
    if (recordedGapMs < 1) return undefined
    return this.#separate(recordedGapMs)
  }

  async #separate(recordedGapMs: number): Promise<void> {
    // The gap starts once the previous chunk was handed to the kernel (a write's callback also runs, with an
    // error, when the connection is destroyed first). Timed from the previous write instead, a replay kept pace
    // with a live run of 1 ms gaps (1.03x against 0.80x) but its client read 34-36 of 50 events apart, not 41-43.
    if (this.#unflushed > 0 && !this.#res.destroyed) await new Promise<void>((resolve) => (this.#onFlushed = resolve))
    const ms = Math.min(
      recordedGapMs,
      this.#gapMs ?? ((this.#res.socket as { encrypted?: boolean } | null)?.encrypted ? DEFAULT_CHUNK_GAP_MS : DEFAULT_PLAIN_CHUNK_GAP_MS),
    )
    // Never longer than the recording waited: chunks that came apart stay apart.
    await new Promise<void>((resolve) => (ms >= 1 ? setTimeout(resolve, ms) : setImmediate(resolve)))
  }

  end(trailers: HeaderPairs): void {
    const head = this.#head
    if (trailers.length > 0 && head && !hasHeader(head.headers, 'content-length')) this.#res.addTrailers(trailersObject(trailers))
    this.#res.end()
  }

  fail(error: RecordedError, afterHead: boolean, injected: boolean): void {
    const res = this.#res
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
  }

  // Live, the client gets what a replay of the same recording gives it.
  failLive(_err: Error, recorded: RecordedError, afterHead: boolean): void {
    this.fail(recorded, afterHead, false)
  }

  failWith(err: Error): void {
    sendProxyError(this.#res, 500, ErrorCodes.INTERNAL, `Tool Replay failed to answer this request: ${err.message}`)
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
