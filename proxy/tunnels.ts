/**
 * CONNECT tunnels (TLS interception with a leaf certificate per host) and Upgrade requests. Each handler is
 * built from its context so it can be driven on its own; proxy-server.ts only wires them to the listeners.
 */
import type { IncomingMessage } from 'node:http'
import type { Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import { TLSSocket } from 'node:tls'
import type { Session, WebSocketDecision } from '../engine/index.ts'
import { ErrorCodes, headerPairsFromRaw } from '../trace/index.ts'
import { type CaRejection, watchHandshake } from './ca-rejection.ts'
import type { CertificateAuthority } from './certificate-authority.ts'
import { registerTunnelSocket } from './connection-reset.ts'
import { endAndDrop } from './connection-slots.ts'
import type { ProxyStats } from './exchange-handler.ts'
import { startsWithHttp2Preface } from './http2-cleartext.ts'
import { refusalBytes } from './refusal.ts'
import { parseAuthority, requestUrl, type TunnelTarget } from './request-target.ts'
import { rawErrorResponse } from './responses.ts'
import { playUpgrade, relayUpgrade, type WebSocketContext } from './websocket-tunnel.ts'

/** What a CONNECT handler needs. */
export interface ConnectContext {
  ca: CertificateAuthority
  stats: ProxyStats
  /** Hands a socket to the HTTP parser for requests inside the tunnel. */
  serve(socket: Duplex, target: TunnelTarget): void
  /** Hands a TLS socket that chose `h2` by ALPN, or a plain one that opened with the HTTP/2 preface, to the HTTP/2 server (http2-server.ts). */
  serveHttp2(socket: Duplex, target: TunnelTarget): void
  /** Moves what is known of the client's connection (its place in the arrival order) to the socket wrapping it. */
  inherit(from: Duplex, to: Duplex): void
  /** The connection is on its way to a request (CONNECT answered, TLS done): its place holds a while longer. */
  progress(socket: Duplex): void
  /** Remembers a socket so close() can destroy it. */
  track(socket: Duplex): void
  /** How long a tunnel may take to send its first byte and finish the TLS handshake. */
  handshakeTimeoutMs: number
  /** How long a refused connection stays open for its client to read why (connection-slots.ts). */
  closeGraceMs: number
  /** Told when a client rejects the certificate it was shown (ca-rejection.ts). */
  onCaRejected?: (rejection: CaRejection) => void
}

/** Where a tunnel leads: the host its certificate is made for (before any SNI), and the authority of its requests. */
export interface TunnelDestination {
  hostname: string
  /** host:port, as a CONNECT names it. */
  authority: string
}

/**
 * Returns what serves a connection once its destination is known: TLS (its first byte 0x16) is intercepted with a
 * leaf certificate for the host (then served over HTTP/2 or HTTP/1.1, as ALPN chose), a connection that opens
 * with the HTTP/2 preface over h2c, anything else as plain HTTP. A CONNECT tunnel after its 200, and a sealed
 * run's redirected connection (proxy/sealed-run.ts), both go through it. `head`: bytes already read from it.
 */
export function createTunnelServer(ctx: ConnectContext): (socket: Duplex, head: Buffer, to: TunnelDestination) => void {
  const intercept = async (socket: Duplex, hostname: string, authority: string, deadline: NodeJS.Timeout): Promise<void> => {
    let secureContext: Awaited<ReturnType<CertificateAuthority['secureContextFor']>>
    try {
      secureContext = await ctx.ca.secureContextFor(hostname)
    } catch {
      clearTimeout(deadline)
      socket.destroy()
      return
    }
    const tlsSocket = new TLSSocket(socket as Socket, {
      isServer: true,
      secureContext,
      // The client's own preference: an HTTP/2 client (gRPC, curl, the AWS SDK's default handler) gets h2, one
      // that lists http/1.1 first (undici) keeps it. Undefined (neither offered) ends the handshake with an alert.
      ALPNCallback: ({ protocols }) => protocols.find((p) => p === 'h2' || p === 'http/1.1'),
      SNICallback: (servername, cb) => {
        if (servername.toLowerCase() === hostname.toLowerCase()) return cb(null, secureContext)
        ctx.ca.secureContextFor(servername).then(
          (c) => cb(null, c),
          (err: Error) => cb(err),
        )
      },
    })
    ctx.inherit(socket, tlsSocket)
    if (ctx.onCaRejected) watchHandshake(tlsSocket, hostname, ctx.onCaRejected)
    tlsSocket.once('secure', () => {
      clearTimeout(deadline)
      ctx.progress(tlsSocket)
      // Which server reads the tunnel is known once ALPN chose (its data waits in the socket until then).
      if (tlsSocket.alpnProtocol === 'h2') ctx.serveHttp2(tlsSocket, { scheme: 'https', authority })
      else ctx.serve(tlsSocket, { scheme: 'https', authority })
    })
    tlsSocket.on('error', () => tlsSocket.destroy())
    // An injected fault resets the client's connection: the reset must reach the tunnel's TCP socket.
    registerTunnelSocket(tlsSocket, socket)
    ctx.track(tlsSocket)
  }

  return (socket, head, to) => {
    // A tunnel that never speaks (or never finishes its handshake) must not hold a socket forever.
    const deadline = setTimeout(() => socket.destroy(), ctx.handshakeTimeoutMs)
    deadline.unref()
    socket.once('close', () => clearTimeout(deadline))
    const start = (first: Buffer) => {
      socket.pause()
      if (first.byteLength > 0) socket.unshift(first)
      if (first[0] === 0x16) void intercept(socket, to.hostname, to.authority, deadline)
      else if (startsWithHttp2Preface(first)) {
        // HTTP/2 with prior knowledge (gRPC over a cleartext channel through HTTP_PROXY, an h2c client sealed).
        clearTimeout(deadline)
        ctx.serveHttp2(socket, { scheme: 'http', authority: to.authority })
      } else {
        // Plain HTTP inside the tunnel (a client that tunnels http:// too).
        clearTimeout(deadline)
        ctx.serve(socket, { scheme: 'http', authority: to.authority })
        socket.resume()
      }
    }
    if (head.byteLength > 0) start(head)
    else socket.once('data', start)
  }
}

/** Returns the `connect` listener: answers 200, then intercepts TLS (or serves plain HTTP) inside the tunnel. */
export function createConnectHandler(ctx: ConnectContext): (req: IncomingMessage, socket: Duplex, head: Buffer) => void {
  const tunnel = createTunnelServer(ctx)
  return (req, socket, head) => {
    socket.on('error', () => socket.destroy())
    const authority = req.url ?? ''
    const parsed = parseAuthority(authority)
    if (!parsed) {
      ctx.stats.badRequests++
      endAndDrop(socket, rawErrorResponse(400, ErrorCodes.PROXY_BAD_REQUEST, `CONNECT target "${authority}" is not host:port.`), ctx.closeGraceMs)
      return
    }
    ctx.stats.tunnels++
    ctx.progress(socket)
    ;(socket as Socket).setNoDelay?.(true)
    socket.write('HTTP/1.1 200 Connection Established\r\n\r\n')
    tunnel(socket, head, { hostname: parsed.hostname, authority })
  }
}

/** What an Upgrade handler needs. */
export interface UpgradeContext extends WebSocketContext {
  session: Session
  stats: ProxyStats
}

/**
 * Returns the `upgrade` listener: the engine decides (Session.handleWebSocket); live modes relay the session
 * (recording it in record and update), replay plays it, a miss is refused (and kept in the ledger, so a run that
 * swallows the failed socket still fails).
 */
export function createUpgradeHandler(ctx: UpgradeContext): (req: IncomingMessage, socket: Duplex, head: Buffer, target: TunnelTarget | undefined) => void {
  return (req, socket, head, target) => {
    socket.on('error', () => socket.destroy())
    const url = requestUrl(req, target)
    if (!url) {
      ctx.stats.badRequests++
      endAndDrop(socket, rawErrorResponse(400, ErrorCodes.PROXY_BAD_REQUEST, `Upgrade request "${req.url}" is not in absolute form.`), ctx.closeGraceMs)
      return
    }
    const captured = {
      method: req.method ?? 'GET',
      url: url.href,
      headers: headerPairsFromRaw(req.rawHeaders).filter(([k]) => !/^proxy-/i.test(k)),
      body: null,
    }
    const carryOut = (decision: WebSocketDecision) => {
      if (decision.kind === 'fail') {
        ctx.stats.refused++
        endAndDrop(socket, refusalBytes(decision.error), ctx.closeGraceMs)
        return
      }
      ctx.stats.upgrades++
      if (decision.kind === 'replay') {
        ctx.stats.replayed++
        void playUpgrade(req, socket, decision, ctx, ctx.session, `GET ${url.href}`).catch(() => socket.destroy())
        return
      }
      void relayUpgrade(req, socket, head, url, ctx, decision.recorder).catch(() => socket.destroy())
    }
    let decision: WebSocketDecision | Promise<WebSocketDecision>
    try {
      decision = ctx.session.handleWebSocket(captured)
    } catch (err) {
      socket.destroy(err as Error)
      return
    }
    if (decision instanceof Promise) {
      socket.pause()
      decision.then(
        (d) => {
          socket.resume()
          carryOut(d)
        },
        () => socket.destroy(),
      )
    } else carryOut(decision)
  }
}
