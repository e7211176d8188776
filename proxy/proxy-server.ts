/**
 * The proxy: absolute-form HTTP requests and CONNECT tunnels with TLS interception (forward mode), and
 * requests sent to it as to a server (reverse mode, see reverse-routes.ts). Every request goes to an engine
 * session's `handle()`; the proxy only translates between the wire and its decision. This file wires the
 * parts (request-router.ts picks each request's session and upstream; exchange-handler.ts, tunnels.ts) to two
 * node:http listeners and enforces the connection limits; the parts are built and tested on their own.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import { checkPathOptions, type PathOptions } from '../capture/index.ts'
import type { Session, SessionSummary } from '../engine/index.ts'
import { ErrorCodes, ToolReplayError } from '../trace/index.ts'
import { type CaRejection, oncePerHost } from './ca-rejection.ts'
import type { CertificateAuthority } from './certificate-authority.ts'
import { ConnectionSlots } from './connection-slots.ts'
import { createExchangeHandler, createStats, type ProxyStats, proxyCaptureOptions } from './exchange-handler.ts'
import { takeFromHttp1 } from './http2-cleartext.ts'
import { createHttp2Serving, type Http2Serving } from './http2-server.ts'
import { Http2Upstreams } from './http2-upstream.ts'
import { type ProxyLimits, resolveProxyLimits } from './proxy-limits.ts'
import { ProxySessions } from './proxy-sessions.ts'
import { RequestRouter } from './request-router.ts'
import type { TunnelTarget } from './request-target.ts'
import { sendProxyError } from './responses.ts'
import { type ReverseMount, ReverseRoutes } from './reverse-routes.ts'
import { type ConnectContext, createConnectHandler, createTunnelServer, createUpgradeHandler, type TunnelDestination } from './tunnels.ts'
import { lazyUpstreamAgent, type UpstreamOptions } from './upstream.ts'

const { createServer } = process.getBuiltinModule('node:http') // not `import`: see trace/patch.ts

export type { ProxyStats } from './exchange-handler.ts'

/**
 * Options for `startProxy`: a capture path's (capture/path-options.ts: `pace`, `maxBodyBytes`, the request body
 * buffered for matching, a larger one gets 413, and `drainAfterAbortMs`), checked as the interceptor's are.
 */
export interface ProxyServerOptions extends PathOptions {
  /**
   * The default session: requests that name none are handed to it (from `openSession`). Without one, every
   * request must name a session opened with `proxy.sessions.open()` (the control API's POST /sessions).
   */
  session?: Session
  /** Reverse mode: upstreams served on the proxy port (see parseReverse); forward mode keeps working. */
  reverse?: readonly ReverseMount[]
  /** The CA leaf certificates for intercepted hosts are signed with. */
  ca: CertificateAuthority
  /** Interface to bind. Default 127.0.0.1: the proxy is not reachable from other machines unless asked. */
  host?: string
  /** Port; 0 (default) picks a free one. */
  port?: number
  upstream?: UpstreamOptions
  /** Most ms between chunk writes when chunks are kept apart, never more than recorded (default: 0 over TLS, 2 over plain HTTP; see response-target.ts). */
  chunkGapMs?: number
  limits?: ProxyLimits
  /**
   * Serve HTTP/2 with prior knowledge (h2c) on the proxy port: a connection that opens with the HTTP/2 preface
   * is served over HTTP/2 (reverse mode for cleartext HTTP/2 clients: gRPC's insecure channels, the AWS SDK's
   * HTTP/2 handler at an http:// endpoint). Their streams reach `http:` upstreams over h2c. Default false.
   */
  h2c?: boolean
  /** Called once per host when a client rejects the proxy's certificate for it (it does not trust the CA). */
  onCaRejected?: (rejection: CaRejection) => void
}

/** A running proxy; `D` is the type of its default session (undefined on a sessions-only proxy). */
export interface ProxyServer<D extends Session | undefined = Session> {
  /** `http://127.0.0.1:PORT`: the value for HTTP_PROXY / HTTPS_PROXY, and the local origin in reverse mode. */
  readonly url: string
  readonly host: string
  readonly port: number
  /** The default session. */
  readonly session: D
  /** The default session and the named ones opened while it runs. */
  readonly sessions: ProxySessions
  /** The reverse-mode mounts, when there are any. */
  readonly reverse: ReverseRoutes | undefined
  readonly ca: CertificateAuthority
  readonly stats: Readonly<ProxyStats>
  /**
   * Stops accepting, lets in-flight exchanges finish (up to `graceMs`, default 5000), closes every session and
   * resolves with the default session's summary (named sessions still open: `sessions.leftOpen()`).
   */
  close(options?: { graceMs?: number }): Promise<D extends Session ? SessionSummary : undefined>
}

/**
 * Starts the forward proxy on `host:port` (default 127.0.0.1, a free port).
 * @example
 * const session = await openSession({ mode: 'replay', trace: 'checkout', store })
 * const proxy = await startProxy({ session, ca: await loadCertificateAuthority(storeDir) })
 * // HTTPS_PROXY=proxy.url ... then:
 * const summary = await proxy.close()
 */
export async function startProxy(options: ProxyServerOptions & { session: Session }): Promise<ProxyServer>
export async function startProxy(options: ProxyServerOptions): Promise<ProxyServer<Session | undefined>>
export async function startProxy(options: ProxyServerOptions): Promise<ProxyServer<Session | undefined>> {
  const { session, ca } = options
  const sessions = new ProxySessions(session)
  const reverse = options.reverse && options.reverse.length > 0 ? new ReverseRoutes(options.reverse) : undefined
  const limits = resolveProxyLimits(options.limits, 'options')
  const path = checkPathOptions(options)
  const stats = createStats()
  const upstream = lazyUpstreamAgent(options.upstream ?? {})
  // A recording proxy forwards from its first request: undici loads while the app starts, not on that request.
  // Replay loads it only if a request is ever forwarded (a strict replay never forwards).
  if (session && session.mode !== 'replay') upstream.warm()
  const sockets = new Set<Duplex>()
  const inflight = new Set<Promise<void>>()
  const host = options.host ?? '127.0.0.1'
  let port = 0
  const listening = () => `${host.includes(':') ? `[${host}]` : host}:${port}`

  const track = (socket: Duplex) => {
    sockets.add(socket)
    socket.once('close', () => sockets.delete(socket))
  }
  const handlerContext = {
    upstream,
    stats,
    ...path,
    chunkGapMs: options.chunkGapMs,
    listening,
  }
  const router = new RequestRouter({
    sessions,
    reverse,
    stats,
    exchangeHandler: (s, arrival) => createExchangeHandler({ ...handlerContext, session: s, arrival }),
    upgradeHandler: (s) =>
      createUpgradeHandler({
        session: s,
        stats,
        upstream: options.upstream ?? {},
        closeGraceMs: limits.closeGraceMs,
        pace: handlerContext.pace,
        maxBodyBytes: handlerContext.maxBodyBytes,
      }),
    self: () => ({ host, port, url: `http://${listening()}` }),
    closeGraceMs: limits.closeGraceMs,
  })
  const { http2, http2Upstreams, outer, inner, slots, tunnel } = createServing({ options, limits, stats, router, upstream, handlerContext, inflight, track })

  // Before listening, so a CA the certificate library cannot use fails the start (TR_PROXY_START_FAILED), not
  // the first intercepted connection.
  await ca.warmUp()
  await listen(outer, host, options.port ?? 0)
  port = (outer.address() as AddressInfo).port

  let closed: Promise<SessionSummary | undefined> | undefined
  const proxy: ProxyServer<Session | undefined> = {
    url: `http://${listening()}`,
    host,
    port,
    session,
    sessions,
    reverse,
    ca,
    stats,
    close(closeOptions = {}) {
      slots.close()
      closed ??= shutDown({ outer, inner, http2, http2Upstreams, inflight, sockets, upstream, session, sessions }, closeOptions.graceMs ?? 5000)
      return closed as Promise<SessionSummary>
    },
  }
  doors.set(proxy, proxyDoor({ outer, slots, router, track, stats, tunnel }))
  return proxy
}

/** What the proxy's listeners are built from (made once in startProxy). */
interface ServingContext {
  options: ProxyServerOptions
  limits: ReturnType<typeof resolveProxyLimits>
  stats: ProxyStats
  router: RequestRouter
  upstream: ReturnType<typeof lazyUpstreamAgent>
  handlerContext: Omit<Parameters<typeof createExchangeHandler>[0], 'session' | 'arrival'>
  inflight: Set<Promise<void>>
  track(socket: Duplex): void
}

/**
 * The proxy's listeners: the outer server (absolute-form requests, CONNECT, upgrades, h2c), the inner one that
 * serves what comes out of intercepted tunnels, HTTP/2 serving, and the connection slots that bound them all.
 */
function createServing(ctx: ServingContext) {
  const { options, limits, stats, router, upstream, handlerContext, inflight, track } = ctx
  const onRequest = requestEntry(router, inflight)
  const { ca } = options
  const tunnelTargets = new WeakMap<Duplex, TunnelTarget>()
  const http2Upstreams = new Http2Upstreams(options.upstream ?? {}, upstream)
  const http2 = createHttp2Serving({
    router,
    stats,
    upstreams: http2Upstreams,
    captureOptions: (s) => proxyCaptureOptions({ ...handlerContext, session: s }),
    inflight: (handling) => {
      const tracked = handling.catch(() => {})
      inflight.add(tracked)
      void tracked.finally(() => inflight.delete(tracked))
    },
    listening: handlerContext.listening,
  })

  const serverOptions = {
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    // Node checks the two timeouts above on this interval: keep it well under the shortest.
    connectionsCheckingInterval: Math.max(10, Math.min(1000, Math.floor(limits.headersTimeoutMs / 4))),
  }
  const outer: Server = createServer(serverOptions, (req, res) => onRequest(req, res, undefined))
  const inner: Server = createServer(serverOptions, (req, res) => onRequest(req, res, tunnelTargets.get(req.socket)))
  const slots = new ConnectionSlots(limits, stats)
  const tunnelContext: ConnectContext = {
    ca,
    stats,
    track,
    handshakeTimeoutMs: limits.headersTimeoutMs,
    closeGraceMs: limits.closeGraceMs,
    ...(options.onCaRejected ? { onCaRejected: oncePerHost(options.onCaRejected) } : {}),
    progress: (socket) => router.progress(socket),
    inherit: (from, to) => {
      router.inherit(from, to)
      slots.layer(from, to)
    },
    serve: (socket, target) => {
      tunnelTargets.set(socket, target)
      inner.emit('connection', socket)
    },
    serveHttp2: (socket, target) => {
      slots.http2(socket)
      http2.serve(socket, target)
    },
  }
  const connect = createConnectHandler(tunnelContext)
  const tunnel = createTunnelServer(tunnelContext)
  outer.on('connect', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    router.connect(req, socket)
    slots.tunneled(socket)
    connect(req, socket, head)
  })
  outer.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => router.upgrade(req, socket, head, undefined))
  if (options.h2c) {
    // Before the slots' own clientError listener, which would answer the preface with an HTTP/1.1 400.
    outer.prependListener('clientError', (err: NodeJS.ErrnoException & { rawPacket?: Buffer }, socket: Duplex) => {
      if (err.code !== 'HPE_PAUSED_H2_UPGRADE') return
      takeFromHttp1(socket as Socket, err.rawPacket ?? Buffer.alloc(0))
      slots.http2(socket)
      http2.serve(socket, undefined)
    })
  }
  inner.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => router.upgrade(req, socket, head, tunnelTargets.get(req.socket)))
  outer.on('connection', (socket: Socket) => {
    if (!slots.admit(socket)) return
    router.accepted(socket)
    track(socket)
  })
  for (const server of [outer, inner]) slots.watch(server)
  return { http2, http2Upstreams, outer, inner, slots, tunnel }
}

/** How a sealed run's listeners hand connections to this proxy: as if accepted on its port, or as a tunnel. */
function proxyDoor(ctx: {
  outer: Server
  slots: ConnectionSlots
  router: RequestRouter
  track(socket: Duplex): void
  stats: ProxyStats
  tunnel: ReturnType<typeof createTunnelServer>
}): ConnectionDoor {
  const { outer, slots, router, track, stats, tunnel } = ctx
  return {
    proxy(socket, head) {
      if (head && head.byteLength > 0) socket.unshift(head)
      outer.emit('connection', socket)
      socket.resume()
    },
    tunnel(socket, head, to) {
      if (!slots.admit(socket)) return
      router.accepted(socket)
      track(socket)
      slots.tunneled(socket)
      stats.tunnels++
      router.progress(socket)
      socket.setNoDelay(true)
      tunnel(socket, head, to)
    },
  }
}

/**
 * How connections accepted elsewhere reach a proxy: a sealed run's listeners inside its namespace
 * (proxy/sealed-run.ts). Internal: not on the ProxyServer users get.
 */
export interface ConnectionDoor {
  /** A connection made to the proxy port: served as if this proxy had accepted it (`head`: bytes already read from it). */
  proxy(socket: Socket, head?: Buffer): void
  /** A connection whose destination is known: served as after a CONNECT to it (TLS intercepted, or plain HTTP). */
  tunnel(socket: Socket, head: Buffer, to: TunnelDestination): void
}

const doors = new WeakMap<ProxyServer<Session | undefined>, ConnectionDoor>()

/** The door of a proxy started by startProxy. */
export function connectionDoor(proxy: ProxyServer<Session | undefined>): ConnectionDoor {
  const door = doors.get(proxy)
  if (!door) throw new ToolReplayError(ErrorCodes.INTERNAL, 'connectionDoor: this proxy was not started by startProxy.')
  return door
}

/** How each request enters: routed to its session, its handling tracked for close(), any throw answered as a 500. */
function requestEntry(router: RequestRouter, inflight: Set<Promise<void>>) {
  return (req: IncomingMessage, res: ServerResponse, target: TunnelTarget | undefined): void => {
    const fail = (err: unknown) =>
      sendProxyError(
        res,
        500,
        ErrorCodes.INTERNAL,
        `Tool Replay proxy failed on ${req.method} ${req.url}: ${(err as Error)?.message ?? String(err)}. This is a bug; please report it.`,
      )
    let p: Promise<void> | undefined
    try {
      p = router.request(req, res, target)
    } catch (err) {
      fail(err)
    }
    if (p) {
      const tracked = p.catch(fail)
      inflight.add(tracked)
      void tracked.finally(() => inflight.delete(tracked))
    }
  }
}

/** Stops accepting, gives requests in flight `graceMs`, then closes every socket, the upstream Agent and the sessions. */
async function shutDown(
  parts: {
    outer: Server
    inner: Server
    http2: Http2Serving
    http2Upstreams: Http2Upstreams
    inflight: Set<Promise<void>>
    sockets: Set<Duplex>
    upstream: { close(): Promise<void> }
    session: Session | undefined
    sessions: ProxySessions
  },
  graceMs: number,
): Promise<SessionSummary | undefined> {
  parts.outer.close()
  parts.outer.closeIdleConnections()
  parts.inner.closeIdleConnections()
  let timer: NodeJS.Timeout | undefined
  await Promise.race([Promise.allSettled([...parts.inflight]), new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs)))])
  clearTimeout(timer)
  parts.http2.close()
  parts.http2Upstreams.close()
  for (const s of parts.sockets) s.destroy()
  await parts.upstream.close().catch(() => {})
  const [summary] = await Promise.all([parts.session?.close(), parts.sessions.closeAll()])
  return summary
}

function listen(server: Server, host: string, port: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(
        new ToolReplayError(
          ErrorCodes.PROXY_START_FAILED,
          `Failed to start the proxy on ${host}:${port}: ${err.code ?? err.message}. ${err.code === 'EADDRINUSE' ? 'Pick another --port, or omit it for a free one.' : 'Check --host and --port.'}`,
          { cause: err },
        ),
      ),
    )
    server.listen(port, host, () => {
      server.on('error', () => {})
      resolve()
    })
  })
}
