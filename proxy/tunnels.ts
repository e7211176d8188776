/**
 * CONNECT tunnels (TLS interception with a leaf certificate per host) and Upgrade requests. Each handler is
 * built from its context so it can be driven on its own; proxy-server.ts only wires them to the listeners.
 */
import type { IncomingMessage } from 'node:http'
import type { Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import { TLSSocket } from 'node:tls'
import type { Session } from '../engine/index.ts'
import { ErrorCodes, headerPairsFromRaw } from '../trace/index.ts'
import type { CertificateAuthority } from './certificate-authority.ts'
import { registerTunnelSocket } from './connection-reset.ts'
import { endAndDrop } from './connection-slots.ts'
import type { ProxyStats } from './exchange-handler.ts'
import { refusalBytes } from './refusal.ts'
import { parseAuthority, requestUrl, type TunnelTarget } from './request-target.ts'
import { rawErrorResponse } from './responses.ts'
import type { UpstreamOptions } from './upstream.ts'
import { passUpgradeThrough } from './websocket-tunnel.ts'

/** What a CONNECT handler needs. */
export interface ConnectContext {
  ca: CertificateAuthority
  stats: ProxyStats
  /** Hands a socket to the HTTP parser for requests inside the tunnel. */
  serve(socket: Duplex, target: TunnelTarget): void
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
}

/** Where a tunnel leads: the host its certificate is made for (before any SNI), and the authority of its requests. */
export interface TunnelDestination {
  hostname: string
  /** host:port, as a CONNECT names it. */
  authority: string
}

/**
 * Returns what serves a connection once its destination is known: TLS (its first byte 0x16) is intercepted with a
 * leaf certificate for the host, anything else served as plain HTTP. A CONNECT tunnel after its 200, and a sealed
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
      // HTTP/1.1 only: the engine and the trace model are per-exchange, and h2 multiplexing gains nothing offline.
      ALPNProtocols: ['http/1.1'],
      SNICallback: (servername, cb) => {
        if (servername.toLowerCase() === hostname.toLowerCase()) return cb(null, secureContext)
        ctx.ca.secureContextFor(servername).then(
          (c) => cb(null, c),
          (err: Error) => cb(err),
        )
      },
    })
    ctx.inherit(socket, tlsSocket)
    tlsSocket.once('secure', () => {
      clearTimeout(deadline)
      ctx.progress(tlsSocket)
    })
    tlsSocket.on('error', () => tlsSocket.destroy())
    // An injected fault resets the client's connection: the reset must reach the tunnel's TCP socket.
    registerTunnelSocket(tlsSocket, socket)
    ctx.track(tlsSocket)
    ctx.serve(tlsSocket, { scheme: 'https', authority })
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
      else {
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
export interface UpgradeContext {
  session: Session
  stats: ProxyStats
  upstream: UpstreamOptions
  /** How long a refused connection stays open for its client to read why (connection-slots.ts). */
  closeGraceMs: number
}

/** Returns the `upgrade` listener: the engine decides; live modes pass through unrecorded, strict replay refuses. */
export function createUpgradeHandler(ctx: UpgradeContext): (req: IncomingMessage, socket: Duplex, head: Buffer, target: TunnelTarget | undefined) => void {
  return (req, socket, head, target) => {
    socket.on('error', () => socket.destroy())
    const url = requestUrl(req, target)
    if (!url) {
      ctx.stats.badRequests++
      endAndDrop(socket, rawErrorResponse(400, ErrorCodes.PROXY_BAD_REQUEST, `Upgrade request "${req.url}" is not in absolute form.`), ctx.closeGraceMs)
      return
    }
    // Strict replay keeps a refused upgrade in the ledger, so a run that swallows the failed socket still fails.
    const decision = ctx.session.handleUpgrade({ method: req.method ?? 'GET', url: url.href, headers: headerPairsFromRaw(req.rawHeaders), body: null })
    if (decision.kind === 'fail') {
      ctx.stats.refused++
      endAndDrop(socket, refusalBytes(decision.error), ctx.closeGraceMs)
      return
    }
    ctx.stats.upgrades++
    void passUpgradeThrough(req, socket, head, url, ctx.upstream, ctx.closeGraceMs)
  }
}
