/**
 * node:http capture: requests made with `http.request`/`https.request` and the clients built on them (axios,
 * got, older SDKs) go through the same engine session as fetch, by way of @mswjs/interceptors'
 * `ClientRequestInterceptor` (as msw uses it). Like the fetch dispatcher this only translates: the session
 * decides (replay, forward, fail); replay plays through the shared playback driver into msw's response
 * controller, a forward goes live on connections msw does not see.
 *
 * @note msw forwards a request to listeners only when its initiator is an `http.ClientRequest`, so fetch
 * (undici) traffic, which the dispatcher captures, does not arrive here. msw credits work done inside a
 * ClientRequest's callbacks to that request, so every connection Tool Replay opens itself (the dispatcher's
 * live fetch requests, this capture's live requests) is made outside msw's interception
 * (internal-connection.ts), and a forwarded request is also recognised by identity: nothing is captured twice.
 */
import { syncBuiltinESMExports } from 'node:module'
import type { Socket } from 'node:net'
import type { HttpRequestEvent } from '@mswjs/interceptors'
import { ClientRequestInterceptor } from '@mswjs/interceptors/ClientRequest'
import { HttpRequestInterceptor } from '@mswjs/interceptors/http'
import { type CaptureOptions, captureOptions, captureRequest, drivePlayback, type PathOptions, refusalPlayback } from '../capture/index.ts'
import type { SESSION_OPTIONS, Session } from '../engine/index.ts'
import { ErrorCodes, type OptionInputs, ToolReplayError } from '../trace/index.ts'
import { trustHeldHttp2Sockets } from './http2-held-sockets.ts'
import { createForwardAgents, type ForwardAgents } from './internal-connection.ts'
import { ignoreMockedTlsSessions } from './mocked-tls-session.ts'
import { forwardLive } from './node-http-forward.ts'
import { allHeaderPairs, bufferRequestBody, requestHeaderPairs, upstreamRoute } from './node-http-request.ts'
import { type ControllerTarget, controllerTarget } from './node-http-response.ts'
import { captureNodeWebSocket, isWebSocketUpgrade, trackConnections } from './node-http-websocket.ts'

const { ClientRequest } = process.getBuiltinModule('node:http') // not `import`: see trace/patch.ts

/**
 * Options for `installNodeHttpCapture` (install() passes its own): the path's (capture/path-options.ts; with
 * the default pace each recorded chunk is one `'data'` event), the session and its `tail` (SESSION_OPTIONS): with
 * 'live', requests Tool Replay does not capture are not refused.
 */
export interface NodeHttpCaptureOptions extends PathOptions, Pick<OptionInputs<typeof SESSION_OPTIONS>, 'tail'> {
  /** The session that decides, shared with the fetch dispatcher so one trace holds both in request order. */
  session: Session
}

/** A running node:http capture. */
export interface NodeHttpCapture {
  /** Stops capturing; an earlier capture still installed takes over again. Idempotent. */
  uninstall(): void
  /** Uninstalls and closes the connections used for live requests. Idempotent. */
  close(): void
}

/**
 * Captures the requests one session decides on. The most recently installed capture gets every request,
 * as the most recently installed dispatcher gets every fetch.
 */
class NodeHttpHandler {
  readonly #session: Session
  readonly #capture: CaptureOptions
  readonly #liveTail: boolean
  readonly #agents: ForwardAgents = createForwardAgents()
  #closed = false

  constructor(options: NodeHttpCaptureOptions) {
    this.#session = options.session
    this.#capture = captureOptions(options.session, options)
    this.#liveTail = options.tail === 'live'
  }

  /** Answers one request msw parsed off an app's socket. */
  async handle(event: HttpRequestEvent): Promise<void> {
    const { request, controller, initiator } = event
    const target = controllerTarget(controller, request, initiator)
    try {
      await this.#handle(event, target)
    } catch (err) {
      // Never left unanswered: msw would send an unanswered request live, even in strict replay.
      target.failWith(err instanceof Error ? err : new ToolReplayError(ErrorCodes.INTERNAL, String(err)))
    }
    // msw passes a request through once its listeners return unanswered, so return only once it is answered
    // (a response head, a failure, or msw's own answer to an app that went away).
    await controller.handled
  }

  /**
   * A request msw parsed on a socket no ClientRequest owns (an app's own undici Agent, HTTP on a raw socket):
   * not captured, so live modes let msw send it as it is; strict replay refuses it and counts it, since
   * sending it would be a silent live request. Returns undefined to let msw pass it through.
   */
  refuseUncaptured(event: HttpRequestEvent): Promise<void> | undefined {
    if (this.#session.mode !== 'replay' || this.#liveTail || this.#closed) return undefined
    const { request, controller } = event
    const error = new ToolReplayError(
      ErrorCodes.REPLAY_MISS,
      `Failed to replay ${request.method} ${request.url}: it was written on a socket no node:http request owns (an own undici Agent or Client passed as \`dispatcher\`, HTTP on a raw socket), which Tool Replay neither records nor replays, so strict replay refuses it instead of letting it go live. Use the global dispatcher (drop the per-request \`dispatcher\`), or run the app under \`tr-proxy replay --strict\`.`,
    )
    this.#session.refuse({ method: request.method, url: request.url }, error)
    refuse(controllerTarget(controller, request, undefined), error)
    return controller.handled
  }

  close(): void {
    this.#closed = true
    this.#agents.destroy()
  }

  async #handle(event: HttpRequestEvent, target: ControllerTarget): Promise<void> {
    const { request, controller } = event
    const { method, url } = request
    if (this.#closed) {
      refuse(target, new ToolReplayError(ErrorCodes.STORE_CLOSED, `Failed to capture ${method} ${url}: the Tool Replay node:http capture is closed.`))
      return
    }
    if (isWebSocketUpgrade(request)) {
      const { pace, maxBodyBytes } = this.#capture
      const c = { session: this.#session, pace, maxBodyBytes, request, controller, target, refuse: (error: ToolReplayError) => refuse(target, error) }
      if (await captureNodeWebSocket(c)) return
    }
    if (method === 'CONNECT' || request.headers.has('upgrade')) {
      // Other upgrades and tunnels (and a WebSocket upgrade no ClientRequest owns) are never recorded: live modes
      // let msw pass the socket through untouched; strict replay refuses them through the engine, which keeps
      // them in the ledger.
      const decision = this.#session.handleUpgrade({ method, url, headers: allHeaderPairs(request), body: null })
      if (decision.kind === 'forward') await controller.passthrough()
      else refuse(target, decision.kind === 'fail' ? decision.error : new ToolReplayError(ErrorCodes.INTERNAL, 'handleUpgrade replayed an upgrade'))
      return
    }
    // Its place in the order the engine sees requests, taken as soon as msw hands the request over (fetch
    // takes its own at dispatch), so one trace holds both in the order the app made them.
    const ticket = this.#session.arrival()
    const { initiator } = event
    const headers = requestHeaderPairs(request)
    // Not awaited to its end: handle() returns once the request is answered, and the answer streams on.
    void captureRequest(
      this.#capture,
      {
        method,
        url,
        headers,
        // The app went away while its body was read: msw already failed the request.
        readBody: (max, tooLarge) => {
          const body = bufferRequestBody(request, headers, max, tooLarge)
          if (!(body instanceof Promise)) return body
          return body.then((b) => (request.signal.aborted ? 'gone' : b))
        },
        client: target,
        forward: (body, events) =>
          forwardLive(
            { method, url: new URL(url), headers, body, route: upstreamRoute(initiator, new URL(url)) },
            { agents: this.#agents, created: (live) => ownRequests.add(live) },
            events,
          ),
      },
      ticket,
    )
  }
}

/** Answers a refused request with the refusal response (403, `x-tool-replay-error`), as on the other paths. */
function refuse(target: ControllerTarget, error: ToolReplayError): void {
  // One chunk, nothing recorded to wait for: no pacing applies.
  void drivePlayback(refusalPlayback(error), { kind: 'none' }, target)?.catch((err: Error) => target.failWith(err))
}

/** Installed captures, most recent last; requests go to the last one. */
const handlers: NodeHttpHandler[] = []
/** The live requests captures send themselves: msw must let them through untouched. */
const ownRequests = new WeakSet<object>()
let interceptor: ClientRequestInterceptor | undefined
/** Sees every HTTP request msw parses, for the node:http ones msw could not credit to their ClientRequest. */
let socketInterceptor: HttpRequestInterceptor | undefined
/** Undoes the verified report of held h2-only TLS sockets (http2-held-sockets.ts). */
let untrustHttp2Sockets: (() => void) | undefined
/** Stops keeping the server side of intercepted connections (node-http-websocket.ts). */
let untrackConnections: (() => void) | undefined

function onRequest(event: HttpRequestEvent): Promise<void> | undefined {
  // Unreachable while msw honours internal connections; kept so a change there cannot loop a forward back.
  if (ownRequests.has(event.initiator as object)) return undefined
  return handlers.at(-1)?.handle(event)
}

/**
 * A request msw parsed outside the context of its patched `http.request` (a reference taken before install(),
 * an ESM binding not yet synced) arrives with its socket as initiator, and msw would pass it through live.
 * When a ClientRequest owns that socket it is a node:http request like any other: captured, with that
 * ClientRequest as its initiator. Any other request (no ClientRequest owns its socket) is refused in strict
 * replay. Requests credited to a ClientRequest come through `onRequest` instead.
 */
function onSocketRequest(event: HttpRequestEvent): Promise<void> | undefined {
  if (event.initiator instanceof ClientRequest) return undefined
  const owner = (event.initiator as (Partial<Socket> & { _httpMessage?: unknown }) | undefined)?._httpMessage
  if (!(owner instanceof ClientRequest)) return handlers.at(-1)?.refuseUncaptured(event)
  return onRequest({ ...event, initiator: owner } as HttpRequestEvent)
}

/** Applies msw's interceptors, or undoes what was applied and throws TR_CAPTURE_UNAVAILABLE. */
function applyInterceptors(): void {
  ignoreMockedTlsSessions()
  const clientRequests = new ClientRequestInterceptor()
  const sockets = new HttpRequestInterceptor()
  try {
    clientRequests.on('request', onRequest)
    clientRequests.apply()
    sockets.on('request', onSocketRequest)
    sockets.apply()
  } catch (err) {
    // msw's apply() already undid its own half; dispose() is a no-op on one that never applied.
    clientRequests.dispose()
    sockets.dispose()
    throw new ToolReplayError(
      ErrorCodes.CAPTURE_UNAVAILABLE,
      `Cannot capture node:http requests: @mswjs/interceptors could not patch node:http (${err instanceof Error ? err.message : String(err)}). Another ClientRequestInterceptor (msw's setupServer, a second copy of Tool Replay) may be applied in this process: dispose it before install(), or pass \`nodeHttp: false\` to leave node:http requests to it.`,
      { cause: err },
    )
  }
  interceptor = clientRequests
  socketInterceptor = sockets
  untrustHttp2Sockets = trustHeldHttp2Sockets()
  untrackConnections = trackConnections()
  // msw patches the CJS module objects; ESM namespaces and named imports of node:http(s) see it only once synced.
  syncBuiltinESMExports()
}

/**
 * Starts capturing node:http requests in this process for `options.session`; throws TR_CAPTURE_UNAVAILABLE
 * (with nothing left applied) when msw cannot patch node:http.
 * @example
 * const capture = installNodeHttpCapture({ session })
 * await axios.get('https://api.test/users/1')
 * capture.close()
 */
export function installNodeHttpCapture(options: NodeHttpCaptureOptions): NodeHttpCapture {
  if (!interceptor) applyInterceptors()
  const handler = new NodeHttpHandler(options)
  handlers.push(handler)
  let installed = true
  const uninstall = () => {
    if (!installed) return
    installed = false
    handlers.splice(handlers.indexOf(handler), 1)
    if (handlers.length === 0 && interceptor) {
      interceptor.dispose()
      socketInterceptor?.dispose()
      untrustHttp2Sockets?.()
      untrustHttp2Sockets = undefined
      untrackConnections?.()
      untrackConnections = undefined
      interceptor = undefined
      socketInterceptor = undefined
      syncBuiltinESMExports()
    }
  }
  return {
    uninstall,
    close() {
      uninstall()
      handler.close()
    },
  }
}
