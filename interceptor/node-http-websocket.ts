/**
 * WebSocket upgrades made with node:http (the `ws` package, and any client that sends `Upgrade: websocket` with
 * `http.request`), captured in process on the same engine session as fetch and undici's WebSocket. The engine
 * decides (Session.handleWebSocket); this adapter carries the decision out over msw's request controller:
 * - live: msw passes the upgrade through (the permessage-deflate offer left out while recording, as the proxy
 *   does) and, once it switched, the app's socket is read frame by frame into the recorder
 *   (capture/websocket-session.ts tapWebSocket); an upstream that does not switch is recorded as its HTTP answer;
 * - replay: the recorded 101 (with an accept for this client's key) is msw's answer, and the recorded session is
 *   played (capture/websocket-session.ts playWebSocket) on the server side of the app's own socket, so the app
 *   keeps the net.Socket it would have had;
 * - a miss is refused like any request and kept in the ledger; a client message nothing recorded answers closes
 *   the session with 1008 naming TR_REPLAY_MISS, as on the other paths.
 *
 * @note msw names as a request's initiator the ClientRequest in whose async context it was made, which may be an
 * earlier request (node-http-response.ts, socketOf). The upgrade's own ClientRequest, whose 'upgrade' event
 * hands the socket to the app, is found by its Sec-WebSocket-Key among the connections msw intercepts: msw's
 * socket interceptor reports each with its server-side view (what is written there, the client reads).
 */
import type { IncomingMessage } from 'node:http'
import type { Socket } from 'node:net'
import { FetchResponse, Interceptor, type RequestController } from '@mswjs/interceptors'
import { SocketInterceptor } from '@mswjs/interceptors/net'
import { drivePlayback, errorPhase, type Pace, playWebSocket, switchedHeaders, tapWebSocket } from '../capture/index.ts'
import { type ExchangeRecorder, type Session, WebSocketConversation, type WebSocketDecision, type WebSocketRecorder } from '../engine/index.ts'
import { CLIENT_ABORT_CODE, type HeaderPairs, type ResponseHead, type ToolReplayError } from '../trace/index.ts'
import { allHeaderPairs } from './node-http-request.ts'
import type { ControllerTarget } from './node-http-response.ts'

const { ClientRequest } = process.getBuiltinModule('node:http') // not `import`: see trace/patch.ts
type AppRequest = InstanceType<typeof ClientRequest>

/** What carrying out one upgrade needs from the node:http capture. */
export interface NodeWebSocketContext {
  session: Session
  pace: Pace
  maxBodyBytes: number
  request: Request
  controller: RequestController
  /** The app's request as a ClientTarget: what a refusal or a recorded non-101 answer is played to. */
  target: ControllerTarget
  /** Answers with the refusal response (403, `x-tool-replay-error`). */
  refuse(error: ToolReplayError): void
}

/** The upgrade's own ClientRequest and the server side of its connection. */
interface Upgrade {
  request: AppRequest
  server: Socket
}

/** Server-side views of the open connections msw intercepts (see the module note). */
const views = new Set<Socket>()

/**
 * Keeps the server-side view of each connection msw intercepts from now on (call once msw is applied); returns
 * the undo. msw's socket interceptor awaits each listener in turn, and its request source, listening first,
 * parses a request a few microtasks before this listener hears of the connection: see `upgradeOf`.
 */
export function trackConnections(): () => void {
  const sockets = Interceptor.singleton(SocketInterceptor)
  const listener = ({ socket }: { socket: Socket }) => {
    views.add(socket)
    socket.once('close', () => views.delete(socket))
  }
  sockets.on('connection', listener)
  return () => {
    sockets.removeListener('connection', listener)
    views.clear()
  }
}

/** True for a request that opens a WebSocket session (RFC 6455 4.1: GET with `Upgrade: websocket`). */
export function isWebSocketUpgrade(request: Request): boolean {
  return request.method === 'GET' && request.headers.get('upgrade')?.toLowerCase() === 'websocket'
}

/**
 * Carries out the engine's decision on one node:http WebSocket upgrade. Returns false, deciding nothing, when the
 * upgrade's ClientRequest is not found (HTTP written on a raw socket): the caller treats it as an upgrade it cannot
 * capture.
 */
export async function captureNodeWebSocket(c: NodeWebSocketContext): Promise<boolean> {
  const key = c.request.headers.get('sec-websocket-key')
  // Once this turn's microtasks ran, the connection this request came on is known (see trackConnections).
  let upgrade = upgradeOf(key)
  if (!upgrade) {
    await new Promise<void>((resolve) => setImmediate(resolve))
    upgrade = upgradeOf(key)
  }
  if (!upgrade) return false
  const url = c.request.url
  const decision: WebSocketDecision = await c.session.handleWebSocket({ method: 'GET', url, headers: allHeaderPairs(c.request), body: null })
  if (decision.kind === 'fail') c.refuse(decision.error)
  else if (decision.kind === 'forward') await forward(c, upgrade, decision.recorder)
  else play(c, upgrade, decision, url)
  return true
}

/** The ClientRequest whose upgrade carries `key`, with its connection's server side; undefined unless exactly one. */
function upgradeOf(key: string | null): Upgrade | undefined {
  if (!key) return undefined
  let found: Upgrade | undefined
  for (const server of views) {
    const owner = (server as { _httpMessage?: unknown })._httpMessage
    if (!(owner instanceof ClientRequest) || owner.getHeader('sec-websocket-key') !== key) continue
    if (found) return undefined
    found = { request: owner, server }
  }
  return found
}

/** Live: msw passes the upgrade through; what comes back is recorded (a switched session frame by frame). */
function forward(c: NodeWebSocketContext, upgrade: Upgrade, recorder: WebSocketRecorder): Promise<void> {
  if (recorder.recording) {
    // As on the proxy: no extension is negotiated while recording, so every recorded payload is plain.
    c.request.headers.delete('sec-websocket-extensions')
    watchUpgrade(upgrade.request, {
      switched: (res, socket) => {
        recorder.opened(responseHead(res))
        tapWebSocket(socket, recorder, c.maxBodyBytes)
        return undefined
      },
      answered: (res) => recordAnswer(res, recorder.http()),
      failed: (err) => {
        const code = codeOf(err)
        void recorder.http().fail({ code, message: err.message }, errorPhase({ started: true, sent: true, headers: false }, code))
      },
      ended: () => void recorder.end(),
    })
  }
  return c.controller.passthrough()
}

/** Replay: the recorded 101, then the session played on the connection's server side; or the recorded non-101 answer. */
function play(c: NodeWebSocketContext, upgrade: Upgrade, decision: Extract<WebSocketDecision, { kind: 'replay' }>, url: string): void {
  const ws = decision.websocket
  if (!ws) {
    // The upstream had not switched: the app gets that HTTP answer, as recorded (`ws` reports an unexpected response).
    const o = decision.exchange.outcome
    if (o.kind === 'error' && o.error.code === CLIENT_ABORT_CODE && o.error.partial) {
      // The app gave up at the head while recording (its client dumped the body unread, see recordAnswer): it gets
      // that head again, its body ending there. (Played as a failure, msw would never flush a head without bytes.)
      const { status, statusText, headers } = o.error.partial
      const kept = headers.filter(([k]) => !/^(content-length|transfer-encoding|connection|keep-alive)$/i.test(k)).map(([k, v]): [string, string] => [k, v])
      c.controller.respondWith(new FetchResponse(null, { status, statusText, headers: kept }))
      return
    }
    void drivePlayback(decision.playback, c.pace, c.target)?.catch((err: Error) => c.target.failWith(err))
    return
  }
  const conversation = new WebSocketConversation(ws, `GET ${url}`, c.session.trace)
  watchUpgrade(upgrade.request, {
    // Played once the app has the socket and listens. What the app writes while its listeners run (`ws` emits
    // 'open' there, and a client may speak first) is held from before it gets the socket and read first: the
    // server side flows to msw's own reader, so bytes no listener of ours heard would be lost.
    switched: () => {
      const written: Buffer[] = []
      const hold = (chunk: Buffer) => void written.push(chunk)
      upgrade.server.on('data', hold)
      return () => {
        upgrade.server.off('data', hold)
        void playWebSocket(upgrade.server, conversation, {
          pace: c.pace,
          maxPayload: c.maxBodyBytes,
          onMiss: (error) => c.session.refuse({ method: 'GET', url }, error),
          written,
        })
      }
    },
  })
  const headers = switchedHeaders(ws.head, c.request.headers.get('sec-websocket-key') ?? '')
  c.controller.respondWith(new FetchResponse(null, { status: 101, statusText: ws.head.statusText || 'Switching Protocols', headers }))
}

/** How an upgrade request ends, seen on its ClientRequest before the app sees it. */
interface UpgradeWatch {
  /** Switched: runs before the app gets the socket; what it returns runs after the app's listeners. */
  switched(res: IncomingMessage, socket: Socket): (() => void) | undefined
  /** Answered with something other than a 101. */
  answered?(res: IncomingMessage): void
  /** Failed before an answer (a refused connection, a reset). */
  failed?(err: Error): void
  /** Closed before any of those (the app gave up). */
  ended?(): void
}

/** Watches the first of 'upgrade', 'response', 'error' and 'close' on `request`. */
function watchUpgrade(request: AppRequest, watch: UpgradeWatch): void {
  const emit = request.emit
  request.emit = function (this: AppRequest, event: string | symbol, ...args: unknown[]): boolean {
    if (event === 'upgrade') {
      request.emit = emit
      const [res, socket, head] = args as [IncomingMessage, Socket, Buffer]
      // As undici does: bytes that came with the 101 go back into the socket, so every reader (the tap too) reads them there.
      if (head.byteLength > 0) socket.unshift(head)
      const after = watch.switched(res, socket)
      const listened = emit.call(this, event, res, socket, Buffer.alloc(0))
      after?.()
      return listened
    }
    if (event === 'response' || event === 'error' || event === 'close') {
      request.emit = emit
      if (event === 'response') watch.answered?.(args[0] as IncomingMessage)
      else if (event === 'error') watch.failed?.(args[0] as Error)
      else watch.ended?.()
    }
    return emit.call(this, event, ...args)
  } as AppRequest['emit']
}

/** Records an answer that is not a 101 as it reaches the app (head, body chunks, its end or failure: what the app read). */
function recordAnswer(res: IncomingMessage, http: ExchangeRecorder): void {
  http.responseStart(responseHead(res))
  const emit = res.emit
  res.emit = function (this: IncomingMessage, event: string | symbol, ...args: unknown[]): boolean {
    if (event === 'data') void http.responseData(args[0] as Buffer)
    else if (event === 'end' || event === 'error' || event === 'close') {
      res.emit = emit
      const err = args[0] as Error | undefined
      // An app that gives up at the head (`ws` does, unless it listens for 'unexpected-response') has Node's client
      // dump the body unread (`_dumped`): what arrived is kept as a failure, never as the whole answer.
      if (event === 'end' && !(res as { _dumped?: boolean })._dumped) void http.responseEnd()
      else if (err) void http.fail({ code: codeOf(err), message: err.message }, 'response-body')
      else void http.fail({ code: CLIENT_ABORT_CODE, message: 'The app dropped the connection after the head; the body was not read.' }, 'response-body')
    }
    return emit.call(this, event, ...args)
  } as IncomingMessage['emit']
}

function responseHead(res: IncomingMessage): ResponseHead {
  const headers: HeaderPairs = []
  for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) headers.push([res.rawHeaders[i] as string, res.rawHeaders[i + 1] as string])
  return { status: res.statusCode ?? 0, statusText: res.statusMessage ?? '', headers }
}

function codeOf(err: Error): string {
  return (err as { code?: string }).code ?? 'ECONNRESET'
}
