/**
 * A node:http client's response, written through @mswjs/interceptors' request controller: the head goes out
 * with `controller.respondWith()` and the body as a ReadableStream that msw writes to the client's socket,
 * one socket write (and so one `'data'` event for the app) per chunk. What goes out when is decided by the
 * capture lifecycle, as for fetch and the proxy; this is only the `ClientTarget`.
 *
 * @note Failures, as a node:http client would see them live: before any head, `controller.errorWith(err)`
 * destroys the client's socket with that error, so `req.on('error')` gets the recorded code (ECONNREFUSED,
 * ...). After the head it depends on how the connection ended. Closed by the server (Node records its own
 * "aborted", undici "other side closed"): the body stream errors and msw ends the connection, so Node's
 * client reports what it always reports then, `'aborted'` and an `ECONNRESET` "aborted" error on the
 * response. Reset (`read ECONNRESET`, ...): the app's socket reports that error and Node's client destroys
 * it, so the request gets the error first and the response is aborted after, as with a real reset.
 */
import type { Socket } from 'node:net'
import { FetchResponse, RequestController } from '@mswjs/interceptors'
import { type ClientTarget, toNodeError } from '../capture/index.ts'
import { CLIENT_ABORT_CODE } from '../engine/index.ts'
import { type HeaderPairs, stripHopByHop } from '../trace/index.ts'
import { nextRead } from './playback.ts'

const { ClientRequest } = process.getBuiltinModule('node:http') // not `import`: see trace/patch.ts

/** A ClientTarget over msw's controller. `failWith`: before the head the app's request fails with the error; after it the connection drops (see the module note). */
export type ControllerTarget = ClientTarget

/**
 * The app's socket that carries `request`. msw names as initiator the ClientRequest in whose async context
 * the request was written, which for a request made from another request's callbacks (a retry, the next
 * call in a sequence) is that earlier request. So the socket is looked for among the initiator's own and its
 * agent's sockets: the one busy with a request of this method, host and path that has no response yet.
 * Only a single match counts (two such requests at once cannot be told apart); without one, replay gives up
 * back-pressure and the reset's own error for this request.
 */
function socketOf(initiator: unknown, request: Request): Socket | undefined {
  if (!(initiator instanceof ClientRequest)) return undefined
  const url = new URL(request.url)
  const path = `${url.pathname}${url.search}`
  const hostname = url.hostname.replace(/^\[|\]$/g, '')
  const carriesThis = (socket: Socket | null | undefined): socket is Socket => {
    const owner = (socket as { _httpMessage?: unknown } | null | undefined)?._httpMessage
    return (
      socket !== null &&
      socket !== undefined &&
      !socket.destroyed &&
      owner instanceof ClientRequest &&
      !(owner as InstanceType<typeof ClientRequest> & { res?: unknown }).res &&
      owner.method === request.method &&
      owner.path === path &&
      owner.host === hostname
    )
  }
  const agent = (initiator as unknown as { agent?: { sockets?: Record<string, Socket[] | undefined> } }).agent
  const candidates = new Set<Socket | null>([initiator.socket, ...Object.values(agent?.sockets ?? {}).flatMap((list) => list ?? [])])
  const found = [...candidates].filter(carriesThis)
  return found.length === 1 ? found[0] : undefined
}

/** True when the client's socket was paused because the app is not reading (Node's http client back-pressure). */
function clientPaused(socket: Socket | null | undefined): boolean {
  return socket !== null && socket !== undefined && !socket.destroyed && socket.isPaused()
}

/**
 * Writes a response through `controller` for `request`, made by `initiator` (the app's ClientRequest, as
 * msw reports it). Its socket is watched for back-pressure: msw pushes into it without looking, so the next
 * chunk waits while the app's socket is paused.
 */
export function controllerTarget(controller: RequestController, request: Request, initiator: unknown): ControllerTarget {
  let socket: Socket | undefined | null = null
  /** The app's socket for this request, looked up once the app has written it (see `socketOf`). */
  const appSocket = () => {
    if (socket === null) socket = socketOf(initiator, request)
    return socket
  }
  let body: ReadableStreamDefaultController<Uint8Array> | undefined
  let cancelled = false
  /** `readerWants()` waits until msw asks for the next chunk, i.e. it wrote the previous one to the client. */
  const { wait: readerWants, wake: wakeUp } = oneWaiter()
  // An app that goes away (msw aborts the parsed request when its socket is destroyed) ends every wait.
  request.signal.addEventListener('abort', wakeUp, { once: true })
  const pending = () => controller.readyState === RequestController.PENDING
  // msw aborts the parsed request when the app destroys its socket, and cancels the body it no longer reads.
  const gone = () => cancelled || request.signal.aborted
  const target: ControllerTarget = {
    get gone() {
      return gone()
    },
    onGone(fn) {
      if (gone()) return
      request.signal.addEventListener('abort', fn, { once: true })
    },
    head(head) {
      if (!pending()) {
        // msw already settled it (the app aborted while the engine decided): nobody to answer.
        cancelled = true
        return
      }
      // Before msw answers: the request must not have its response yet to be recognised (see socketOf).
      appSocket()
      const stream = FetchResponse.isResponseWithBody(head.status)
        ? bodyStream({
            start: (c) => {
              body = c
            },
            pull: wakeUp,
            cancel: () => {
              cancelled = true
              wakeUp()
            },
          })
        : null
      const headers = responseHeaders(head.headers, closeRequested(request))
      controller.respondWith(new FetchResponse(stream, { status: head.status, statusText: head.statusText, headers }))
    },
    chunk(bytes) {
      if (!body || gone()) return undefined
      body.enqueue(bytes)
      const queued = (body.desiredSize ?? 0) < 0
      if (!queued && !clientPaused(appSocket())) return undefined
      return (queued ? readerWants() : Promise.resolve()).then(() =>
        clientPaused(appSocket()) && !gone() ? clientReads(appSocket() as Socket, request.signal) : undefined,
      )
    },
    // By the next macrotask the client's parser has handed the previous chunk to the app (playback.ts nextRead).
    separate: nextRead,
    end() {
      // Trailers have no place in msw's Response: node:http apps get none on this path (README, Limits).
      if (body && !gone()) body.close()
    },
    fail(recorded, afterHead) {
      // A connection the server closed before the head: Node's client reports its own "socket hang up".
      target.failWith(!afterHead && recorded.code === 'UND_ERR_SOCKET' ? socketHangUp() : toNodeError(recorded))
    },
    failLive(err) {
      target.failWith(err)
    },
    failWith(error) {
      if (pending()) return errorBeforeHead(controller, error)
      // After the partial body: let the client's parser hand it to the app first, then end the connection.
      setImmediate(() => {
        if (body && !gone()) dropAfterHead(body, appSocket(), error)
      })
    },
  }
  return target
}

/** One wait at a time, ended by `wake()` (a wake with nobody waiting does nothing). */
function oneWaiter(): { wait: () => Promise<void>; wake: () => void } {
  let wake: (() => void) | undefined
  return {
    wait: () => new Promise<void>((resolve) => (wake = resolve)),
    wake: () => {
      const w = wake
      wake = undefined
      w?.()
    },
  }
}

/**
 * Fails the request before its head: the app's socket is destroyed with `error`. From a microtask: on a kept-alive
 * socket msw reports the error in a microtask and the close on the next tick, and called from a tick (where live
 * failures arrive) the close would come first; Node's client would then fail the request with its own "socket hang
 * up" and the real error after it, with nobody listening any more (an uncaught 'error').
 */
function errorBeforeHead(controller: RequestController, error: Error): void {
  queueMicrotask(() => {
    if (controller.readyState === RequestController.PENDING) controller.errorWith(error)
  })
}

/** Waits until the app reads from its paused socket again (or the socket closes, or the request is aborted). */
function clientReads(s: Socket, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = () => {
      s.off('resume', done)
      s.off('close', done)
      signal.removeEventListener('abort', done)
      resolve()
    }
    s.on('resume', done)
    s.on('close', done)
    signal.addEventListener('abort', done, { once: true })
  })
}

/** The response body msw reads: nothing is queued ahead of its reads, so a chunk waits until msw wrote the one before it. */
function bodyStream(source: UnderlyingDefaultSource<Uint8Array>): ReadableStream<Uint8Array> {
  return new ReadableStream<Uint8Array>(source, { highWaterMark: 0 })
}

/**
 * Ends the connection after part of the body went out: a close errors the body stream (msw ends the connection);
 * a reset is reported by the app's socket, and Node's client destroys it, as on a real reset.
 */
function dropAfterHead(body: ReadableStreamDefaultController<Uint8Array>, s: Socket | undefined, error: Error): void {
  if (closedNotReset(error) || !s || s.listenerCount('error') === 0) {
    body.error(error)
    return
  }
  deferNextClose(s)
  s.emit('error', error)
}

/**
 * True for a failure that is the connection ending rather than a socket error: a server that closed it
 * mid-body (Node's "aborted", undici's UND_ERR_SOCKET), the app's own abort, a session that closed first.
 */
export function closedNotReset(error: Error & { code?: unknown }): boolean {
  if (error.code === 'ECONNRESET') return error.message === 'aborted'
  return typeof error.code !== 'string' || CLOSED_CODES.has(error.code)
}

const CLOSED_CODES = new Set(['UND_ERR_SOCKET', CLIENT_ABORT_CODE, 'TR_SESSION_CLOSED'])

/**
 * The response's header fields for the app's connection: repeats (Set-Cookie) kept as separate fields, the
 * fields that described the recorded connection (Connection, Keep-Alive, ...) dropped, Transfer-Encoding
 * kept since msw frames the body by it. An app whose request asked to close gets `Connection: close`, as a
 * server would answer.
 * @note Without that, a recorded `Connection: keep-alive` makes Node's client reuse a socket whose request
 * said close; msw stops parsing such a connection and would send the next request on it live.
 */
export function responseHeaders(pairs: HeaderPairs, closeRequested: boolean): Array<[string, string]> {
  const kept = new Set(stripHopByHop(pairs))
  const out: Array<[string, string]> = []
  for (const pair of pairs) if (kept.has(pair) || pair[0].toLowerCase() === 'transfer-encoding') out.push([pair[0], pair[1]])
  if (closeRequested) out.push(['connection', 'close'])
  return out
}

/** True when the app's request asked for its connection to close after this exchange. */
function closeRequested(request: Request): boolean {
  return /(?:^|,)\s*close\s*(?:,|$)/i.test(request.headers.get('connection') ?? '')
}

/**
 * Makes the socket's next 'close' come a turn of the event loop later, as a real socket's does (once its
 * handle has closed). msw's mocked socket emits it within the same tick as the error, ahead of whatever the
 * app's error handlers scheduled: axios, whose socket error handler destroys its request first, would then
 * report "stream has been aborted" where a real reset gives it ECONNRESET.
 */
function deferNextClose(socket: Socket): void {
  const emit = socket.emit
  socket.emit = function deferredClose(this: Socket, event: string | symbol, ...args: unknown[]): boolean {
    if (event !== 'close') return Reflect.apply(emit, this, [event, ...args]) as boolean
    socket.emit = emit
    setImmediate(() => Reflect.apply(emit, this, [event, ...args]))
    return true
  } as Socket['emit']
}

/** The error Node's http client gives when the server closes the connection before a response head. */
function socketHangUp(): Error & { code: string } {
  return Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' })
}
