/**
 * A node:http client's response, written through @mswjs/interceptors' request controller: the head goes out
 * with `controller.respondWith()` and the body as a ReadableStream that msw writes to the client's socket,
 * one socket write (and so one `'data'` event for the app) per chunk. What goes out when is decided by the
 * engine's playback driver, as for fetch and the proxy; this is only the `PlaybackTarget`.
 *
 * @note Failures, as a node:http client would see them live: before any head, `controller.errorWith(err)`
 * destroys the client's socket with that error, so `req.on('error')` gets the recorded code (ECONNREFUSED,
 * ...). After the head, the body stream errors and msw drops the connection, so Node's own client reports
 * what it always reports for a connection lost mid-body: `'aborted'` and an `ECONNRESET` "aborted" error.
 */
import type { Socket } from 'node:net'
import { FetchResponse, RequestController } from '@mswjs/interceptors'
import { type PlaybackTarget, toNodeError } from '../engine/index.ts'
import type { HeaderPairs } from '../trace/index.ts'

/** A PlaybackTarget over msw's controller, plus a way to fail with a given error object (a live failure, as it came). */
export interface ControllerTarget extends PlaybackTarget {
  /** Before the head: the app's request fails with `error`. After it: the connection drops (see the module note). */
  failWith(error: Error): void
}

/** A macrotask: by then the client's parser has handed the previous chunk to the app as its own read. */
const nextMacrotask = () => new Promise<void>((resolve) => setImmediate(resolve))

/** True when the client's socket was paused because the app is not reading (Node's http client back-pressure). */
function clientPaused(socket: Socket | null | undefined): boolean {
  return socket !== null && socket !== undefined && !socket.destroyed && socket.isPaused()
}

/**
 * Writes a response through `controller` for `request`. `socket` is the app's socket (the ClientRequest's),
 * watched for back-pressure: msw pushes into it without looking, so the next chunk waits while it is paused.
 */
export function controllerTarget(controller: RequestController, request: Request, socket: Socket | null | undefined): ControllerTarget {
  let body: ReadableStreamDefaultController<Uint8Array> | undefined
  let cancelled = false
  let wake: (() => void) | undefined
  const wakeUp = () => {
    const w = wake
    wake = undefined
    w?.()
  }
  // An app that goes away (msw aborts the parsed request when its socket is destroyed) ends every wait.
  request.signal.addEventListener('abort', wakeUp, { once: true })
  const pending = () => controller.readyState === RequestController.PENDING
  const gone = () => cancelled || request.signal.aborted || (socket?.destroyed ?? false)
  /** Waits until msw asks for the next chunk, i.e. it wrote the previous one to the client. */
  const readerWants = () => new Promise<void>((resolve) => (wake = resolve))
  const clientReads = () =>
    new Promise<void>((resolve) => {
      const s = socket as Socket
      const done = () => {
        s.off('resume', done)
        s.off('close', done)
        request.signal.removeEventListener('abort', done)
        resolve()
      }
      s.on('resume', done)
      s.on('close', done)
      request.signal.addEventListener('abort', done, { once: true })
    })
  const target: ControllerTarget = {
    get gone() {
      return gone()
    },
    head(head) {
      if (!pending()) {
        // msw already settled it (the app aborted while the engine decided): nobody to answer.
        cancelled = true
        return
      }
      const stream = FetchResponse.isResponseWithBody(head.status)
        ? new ReadableStream<Uint8Array>(
            {
              start: (c) => {
                body = c
              },
              pull: wakeUp,
              cancel: () => {
                cancelled = true
                wakeUp()
              },
            },
            // Nothing is queued ahead of msw's reads: a chunk waits until msw wrote the one before it.
            { highWaterMark: 0 },
          )
        : null
      controller.respondWith(new FetchResponse(stream, { status: head.status, statusText: head.statusText, headers: responseHeaders(head.headers) }))
    },
    chunk(bytes) {
      if (!body || gone()) return undefined
      body.enqueue(bytes)
      const queued = (body.desiredSize ?? 0) < 0
      if (!queued && !clientPaused(socket)) return undefined
      return (queued ? readerWants() : Promise.resolve()).then(() => (clientPaused(socket) && !gone() ? clientReads() : undefined))
    },
    separate: nextMacrotask,
    end() {
      // Trailers have no place in msw's Response: node:http apps get none on this path (README, Limits).
      if (body && !gone()) body.close()
    },
    fail(recorded) {
      target.failWith(toNodeError(recorded))
    },
    failWith(error) {
      if (pending()) {
        controller.errorWith(error)
        return
      }
      // After the partial body: let the client's parser hand it to the app first, then drop the connection.
      setImmediate(() => {
        if (body && !gone()) body.error(error)
      })
    },
  }
  return target
}

/** Header pairs as Fetch `Headers` input, repeats (Set-Cookie) kept as separate fields. */
function responseHeaders(pairs: HeaderPairs): Array<[string, string]> {
  return pairs.map(([k, v]) => [k, v])
}
