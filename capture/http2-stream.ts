/**
 * One HTTP/2 stream an app opened, as the capture lifecycle takes it: the request (pseudo-headers made into
 * method and URL, capture/http2-wire.ts), its body read off the stream (bounded), and the stream as the
 * `ClientTarget` answers are played and teed into. Shared by the proxy's HTTP/2 server and the in-process
 * capture of `http2.connect`, which differ only in where a live request goes and in how a failure before any
 * answer reaches the app (`Http2StreamHooks`).
 *
 * @note Frames as recorded: a response without body and trailers goes out as one HEADERS frame that ends the
 * stream (a gRPC "Trailers-Only" answer, which gRPC clients read only in that form); its head is held for
 * that until the next turn of the event loop. Each chunk is written as its own DATA frame: the next one is
 * written once the previous one left (nghttp2 would otherwise pack queued writes into one frame). Trailers
 * go out as trailers.
 */
import type { Http2Stream, ServerHttp2Stream } from 'node:http2'
import { ErrorCodes, type HeaderPairs, type RecordedError, type ResponseHead, type ToolReplayError } from '../trace/index.ts'
import { HTTP2_INTERNAL_ERROR, http2ErrorCodeIn, http2Fields, isHttp2Failure } from './http2-wire.ts'
import type { CapturedExchange, ReadBody } from './lifecycle.ts'
import type { ClientTarget, LiveEvents } from './live-tee.ts'
import type { WireHead } from './playback-driver.ts'
import { ERROR_HEADER } from './refusal.ts'

/** A whole answer a path makes itself (an upstream failure, an internal error). */
export interface Http2Answer {
  status: number
  headers: HeaderPairs
  body: Uint8Array
}

/** What differs between the paths that serve app streams. */
export interface Http2StreamHooks {
  /** Sends the request live (with `body`, the bytes read), reporting to `events`. */
  forward(body: Uint8Array | null, events: LiveEvents): void
  /**
   * A failure before any head that is not an HTTP/2 stream reset (a refused connection, a TLS error): return
   * the answer the app gets (the proxy: 502), or undefined after failing the app's connection as it failed live.
   */
  failedBeforeHead(error: RecordedError): Http2Answer | undefined
}

/** The request of a stream, translated. */
export interface Http2StreamRequest {
  method: string
  url: string
  headers: HeaderPairs
  /** The request's HEADERS frame ended the stream: it has no body. */
  endStream: boolean
}

/** The captured exchange of one stream. */
export function http2Exchange(stream: ServerHttp2Stream, request: Http2StreamRequest, hooks: Http2StreamHooks): CapturedExchange {
  return {
    method: request.method,
    url: request.url,
    headers: request.headers,
    httpVersion: '2',
    readBody: (max, tooLarge) => (request.endStream ? { bytes: null } : readStreamBody(stream, max, tooLarge)),
    client: new Http2StreamTarget(stream, hooks),
    forward: hooks.forward,
  }
}

/**
 * Resets a stream with `code` (RST_STREAM), after what was written so far.
 * @note `close(code)` first ends the writable side; once the writes are flushed, that END_STREAM leaves
 * before the reset and the client reads a complete answer. A write still pending holds the end back, so the
 * reset goes out first: the zero-length write is that pending write. `Http2Stream` is typed without
 * `headersSent`; only a server stream has one.
 */
export function resetHttp2Stream(stream: Http2Stream & { headersSent?: boolean }, code: number): void {
  if (stream.destroyed || stream.closed) return
  // Before any head there is no END_STREAM to race (and a write would send a 200 head first).
  if (!stream.writableEnded && stream.headersSent) stream.write(EMPTY)
  stream.close(code)
}

const EMPTY = new Uint8Array(0)

/** Answers a stream with a whole answer the path makes itself (a refusal, an error), in one go. */
export function answerHttp2Stream(stream: ServerHttp2Stream, answer: Http2Answer): void {
  if (stream.destroyed || stream.closed) return
  stream.on('error', () => {})
  // Without a body, one HEADERS frame ends the stream (a gRPC refusal is a Trailers-Only answer).
  if (answer.body.byteLength === 0) {
    stream.respond(http2Fields(answer.headers, { ':status': answer.status }), { endStream: true })
    return
  }
  stream.respond(http2Fields(answer.headers, { ':status': answer.status, 'content-length': answer.body.byteLength }))
  stream.end(answer.body)
}

/** Reads a stream's request body up to `max` bytes; past it the rest is read and dropped, then `tooLarge()` thrown. */
function readStreamBody(stream: ServerHttp2Stream, max: number, tooLarge: () => ToolReplayError): Promise<ReadBody> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let size = 0
    let over = false
    stream.on('data', (chunk: Buffer) => {
      size += chunk.byteLength
      if (size > max) {
        over = true
        chunks.length = 0
      } else if (!over) chunks.push(chunk)
    })
    stream.once('end', () => (over ? reject(tooLarge()) : resolve({ bytes: size === 0 ? null : Buffer.concat(chunks, size) })))
    // Settled already when the body ended; else the client went away while sending it.
    stream.once('close', () => resolve('gone'))
    stream.once('error', () => resolve('gone'))
  })
}

/** A server stream as the client of the lifecycle. */
class Http2StreamTarget implements ClientTarget {
  readonly #stream: ServerHttp2Stream
  readonly #hooks: Http2StreamHooks
  /** A head not sent yet: it goes out with the first chunk or the end, or on the next turn of the loop. */
  #pending: ResponseHead | undefined
  #timer: NodeJS.Immediate | undefined
  #responded = false
  /** The answer was ended or reset by this side: a close after it is not the client giving up. */
  #done = false
  #unflushed = 0
  #onFlushed: (() => void) | undefined
  readonly #written = () => {
    if (--this.#unflushed > 0 || !this.#onFlushed) return
    const resolve = this.#onFlushed
    this.#onFlushed = undefined
    resolve()
  }

  constructor(stream: ServerHttp2Stream, hooks: Http2StreamHooks) {
    this.#stream = stream
    this.#hooks = hooks
    // A stream error (the client reset it) must not become an uncaught 'error' event.
    stream.on('error', () => {})
  }

  get gone(): boolean {
    return this.#stream.destroyed || this.#stream.closed
  }

  onGone(fn: () => void): void {
    this.#stream.once('close', () => {
      if (!this.#done) fn()
    })
  }

  head(head: ResponseHead, _wire?: WireHead): void {
    this.#pending = head
    this.#timer = setImmediate(() => this.#respond(false))
  }

  chunk(bytes: Uint8Array): Promise<void> | undefined {
    if (!this.#respond(false)) return undefined
    this.#unflushed++
    if (this.#stream.write(bytes, this.#written)) return undefined
    return new Promise((resolve) => {
      const done = () => {
        this.#stream.off('drain', done)
        this.#stream.off('close', done)
        resolve()
      }
      this.#stream.on('drain', done)
      this.#stream.on('close', done)
    })
  }

  async separate(): Promise<void> {
    if (this.#unflushed > 0 && !this.gone) await new Promise<void>((resolve) => (this.#onFlushed = resolve))
    await new Promise<void>((resolve) => setImmediate(resolve))
  }

  end(trailers: HeaderPairs): void {
    // Nothing was sent after the head and nothing follows: one HEADERS frame ends the stream.
    if (this.#pending && !this.#responded && trailers.length === 0) {
      this.#respond(true)
      return
    }
    if (!this.#respond(false)) return
    this.#done = true
    const stream = this.#stream
    stream.once('wantTrailers', () => {
      try {
        stream.sendTrailers(trailers.length > 0 ? http2Fields(trailers) : {})
      } catch {
        stream.close(HTTP2_INTERNAL_ERROR)
      }
    })
    stream.end()
  }

  fail(error: RecordedError, afterHead: boolean, injected: boolean): void {
    if (!afterHead && !injected && !isHttp2Failure(error.code)) {
      const answer = this.#hooks.failedBeforeHead(error)
      this.#done = true
      if (answer) this.#answer(answer)
      return
    }
    // A reset, as it came (its code read from the recorded message), after what was written so far left.
    if (afterHead) this.#respond(false)
    this.#reset(injected ? HTTP2_INTERNAL_ERROR : http2ErrorCodeIn(error.message))
  }

  failLive(_err: Error, recorded: RecordedError, afterHead: boolean): void {
    this.fail(recorded, afterHead, false)
  }

  failWith(err: Error): void {
    if (this.#responded || this.gone) {
      this.#reset(HTTP2_INTERNAL_ERROR)
      return
    }
    this.#pending = undefined
    this.#answer({
      status: 500,
      headers: [
        ['content-type', 'text/plain; charset=utf-8'],
        [ERROR_HEADER, ErrorCodes.INTERNAL],
      ],
      body: Buffer.from(`Tool Replay failed to answer this request: ${err.message}\n`),
    })
  }

  /** Sends the held head (ending the stream when `endStream`); false when the stream is gone. */
  #respond(endStream: boolean): boolean {
    clearImmediate(this.#timer)
    const head = this.#pending
    if (this.gone) return false
    if (!head) return this.#responded
    this.#pending = undefined
    this.#responded = true
    if (endStream) this.#done = true
    try {
      this.#stream.respond(http2Fields(head.headers, { ':status': head.status }), endStream ? { endStream: true } : { waitForTrailers: true })
    } catch (err) {
      // Fields node:http2 cannot send (a recording edited by hand): the client learns why.
      this.#responded = false
      this.failWith(err as Error)
      return false
    }
    return true
  }

  #answer(answer: Http2Answer): void {
    if (this.gone) return
    this.#done = true
    this.#responded = true
    answerHttp2Stream(this.#stream, answer)
  }

  #reset(code: number): void {
    this.#done = true
    const stream = this.#stream
    if (this.gone) return
    if (this.#unflushed === 0) resetHttp2Stream(stream, code)
    else this.#onFlushed = () => resetHttp2Stream(stream, code)
  }
}
