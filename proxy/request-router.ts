/**
 * Where each request on the proxy port goes, decided once, here, for exchanges, tunnels and upgrades alike:
 * - its **session**: the one it names (x-tool-replay-session header, else its proxy credentials, else those of
 *   the CONNECT that opened its tunnel), else the proxy's default session; a name that is not open is refused;
 * - its **upstream**: its absolute URL (forward mode), or, for a request addressed to the proxy itself
 *   (origin-form, or a URL naming the proxy's own address), the reverse mount it maps to;
 * - its **place** in that session's arrival order: a connection holds one from the moment it is accepted
 *   (default session) or names its session on CONNECT, so TLS handshakes finishing in any order cannot
 *   reorder requests (engine/arrival-order.ts). Each session keeps its own order.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Duplex } from 'node:stream'
import type { Session, Ticket } from '../engine/index.ts'
import { ErrorCodes, ToolReplayError } from '../trace/index.ts'
import { endAndDrop } from './connection-slots.ts'
import type { ProxyStats } from './exchange-handler.ts'
import type { ProxySessions } from './proxy-sessions.ts'
import { refusalBytes, sendRefusal } from './refusal.ts'
import { requestUrl, type TunnelTarget } from './request-target.ts'
import { rawErrorResponse, sendProxyError } from './responses.ts'
import { localizeRedirects, localOriginOf, rewriteToUpstream } from './reverse-request.ts'
import type { ReverseRoutes } from './reverse-routes.ts'
import { takeSessionChoice } from './session-choice.ts'

/** Handles one request for one session (exchange-handler.ts). */
export type ExchangeHandler = (req: IncomingMessage, res: ServerResponse, target: TunnelTarget | undefined) => Promise<void> | undefined
/** Handles one Upgrade request for one session (tunnels.ts). */
export type UpgradeHandler = (req: IncomingMessage, socket: Duplex, head: Buffer, target: TunnelTarget | undefined) => void

/** An HTTP/2 stream as the router reads it: its method, `:path` as url, its fields, its connection. */
export type RoutedStream = Pick<IncomingMessage, 'method' | 'url' | 'rawHeaders' | 'socket'> & { resume(): void }

/** Where a stream goes, or its refusal (status 0: a session refusal, answered as refusals are). */
export type StreamRoute = { session: Session; target: TunnelTarget | undefined; ticket: Ticket } | { refusal: ToolReplayError; status: number }

/** What the router needs from the proxy. */
export interface RequestRouterOptions {
  sessions: ProxySessions
  reverse: ReverseRoutes | undefined
  stats: ProxyStats
  /** Builds a session's exchange handler (once per session); `arrival` gives a request its ticket. */
  exchangeHandler(session: Session, arrival: (req: IncomingMessage) => Ticket): ExchangeHandler
  /** Builds a session's upgrade handler (once per session). */
  upgradeHandler(session: Session): UpgradeHandler
  /** The address the proxy listens on, once it does. */
  self(): { host: string; port: number; url: string }
  /** How long a refused connection stays open for its client to read why (connection-slots.ts). */
  closeGraceMs: number
}

/** Decides each request's session, upstream and arrival place, then hands it to that session's handler. */
export class RequestRouter {
  readonly #o: RequestRouterOptions
  readonly #handlers = new WeakMap<Session, ExchangeHandler>()
  readonly #upgrades = new WeakMap<Session, UpgradeHandler>()
  /** A connection's place in a session's order, for its first request. */
  readonly #arrivals = new WeakMap<Duplex, { session: Session; ticket: Ticket }>()
  /** The session a CONNECT named, for the requests in its tunnel. */
  readonly #tunnelChoice = new WeakMap<Duplex, string>()

  constructor(options: RequestRouterOptions) {
    this.#o = options
  }

  /** A connection was accepted: it takes its place in the default session's order (before any CONNECT or TLS). */
  accepted(socket: Duplex): void {
    const session = this.#o.sessions.default
    if (session) this.#hold(socket, session)
  }

  /** A CONNECT arrived: the session it names (if any) holds for its tunnel, and the connection's place moves there. */
  connect(req: IncomingMessage, socket: Duplex): void {
    const choice = takeSessionChoice(req)
    if (choice === undefined) return
    this.#tunnelChoice.set(socket, choice)
    const session = this.#o.sessions.select(choice)
    if (!(session instanceof ToolReplayError) && this.#arrivals.get(socket)?.session !== session) this.#hold(socket, session)
  }

  /** The tunnel's TLS socket wraps `from`: what is known of the connection moves to it. */
  inherit(from: Duplex, to: Duplex): void {
    const held = this.#arrivals.get(from)
    this.#arrivals.delete(from)
    if (held) {
      this.#arrivals.set(to, held)
      to.once('close', () => held.ticket.release())
    }
    const choice = this.#tunnelChoice.get(from)
    if (choice !== undefined) this.#tunnelChoice.set(to, choice)
  }

  /** The connection is on its way to a request (CONNECT answered, TLS done). */
  progress(socket: Duplex): void {
    this.#arrivals.get(socket)?.ticket.progress()
  }

  /** Routes one request to its session's exchange handler, or refuses it. */
  request(req: IncomingMessage, res: ServerResponse, target: TunnelTarget | undefined): Promise<void> | undefined {
    const choice = this.#choice(req)
    const session = this.#o.sessions.select(choice)
    if (session instanceof ToolReplayError) {
      this.#refused(req)
      this.#noteRefusal(req, target, choice)
      sendRefusal(res, session)
      return undefined
    }
    const routed = this.#reverse(req, target, res)
    if (routed instanceof ToolReplayError) {
      this.#refused(req)
      sendProxyError(res, 404, routed.code, routed.message)
      return undefined
    }
    let handle = this.#handlers.get(session)
    if (!handle) {
      handle = this.#o.exchangeHandler(session, (r) => this.#claim(r.socket, session))
      this.#handlers.set(session, handle)
    }
    return handle(req, res, routed.target)
  }

  /**
   * Routes one HTTP/2 stream, given as the request fields the router reads: its session, its upstream (a
   * reverse-mode path is rewritten to its upstream URL) and its place in the order, or the refusal it gets.
   */
  stream(req: RoutedStream, target: TunnelTarget | undefined): StreamRoute {
    const choice = this.#choice(req)
    const session = this.#o.sessions.select(choice)
    if (session instanceof ToolReplayError) {
      this.#refused(req)
      this.#noteRefusal(req, target, choice)
      return { refusal: session, status: 0 }
    }
    const routed = this.#reverse(req, target, undefined)
    if (routed instanceof ToolReplayError) {
      this.#refused(req)
      return { refusal: routed, status: 404 }
    }
    return { session, target: routed.target, ticket: this.#claim(req.socket, session) }
  }

  /** Routes one Upgrade request to its session's upgrade handler, or refuses it. */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, target: TunnelTarget | undefined): void {
    const choice = this.#choice(req)
    const session = this.#o.sessions.select(choice)
    const routed = session instanceof ToolReplayError ? session : this.#reverse(req, target, undefined)
    if (session instanceof ToolReplayError || routed instanceof ToolReplayError) {
      this.#refused(req)
      if (session instanceof ToolReplayError) this.#noteRefusal(req, target, choice)
      endAndDrop(
        socket,
        session instanceof ToolReplayError ? refusalBytes(session) : rawErrorResponse(404, ErrorCodes.PROXY_BAD_REQUEST, (routed as ToolReplayError).message),
        this.#o.closeGraceMs,
      )
      return
    }
    let upgrade = this.#upgrades.get(session)
    if (!upgrade) {
      upgrade = this.#o.upgradeHandler(session)
      this.#upgrades.set(session, upgrade)
    }
    upgrade(req, socket, head, routed.target)
  }

  /** The session a request names: its header or credentials, else those of the CONNECT that opened its tunnel. */
  #choice(req: Pick<IncomingMessage, 'rawHeaders' | 'socket'>): string | undefined {
    return takeSessionChoice(req) ?? this.#tunnelChoice.get(req.socket)
  }

  /**
   * Notes a session refusal for the serve's end report, unless the request was sent to the proxy as to a
   * server with no mount to serve it (a readiness probe, a browser): that is not app traffic.
   */
  #noteRefusal(req: Pick<IncomingMessage, 'method' | 'url'>, target: TunnelTarget | undefined, choice: string | undefined): void {
    this.#o.stats.sessionRefusals++
    if (!this.#o.reverse && this.#addressedToSelf(req, target) !== undefined) return
    this.#o.sessions.noteRefusal(choice, req.method ?? 'GET', requestUrl(req, target)?.href ?? req.url ?? '')
  }

  /** A refused request: counted, its body drained, and the place its connection held given up. */
  #refused(req: Pick<IncomingMessage, 'socket'> & { resume(): void }): void {
    this.#o.stats.requests++
    this.#o.stats.badRequests++
    req.resume()
    const held = this.#arrivals.get(req.socket)
    this.#arrivals.delete(req.socket)
    held?.ticket.release()
  }

  /**
   * A request addressed to the proxy itself is a reverse-mode request: it is rewritten to the upstream URL its
   * mount maps it to (the handler then sees an ordinary absolute-form request). Without mounts it reaches the
   * handler in origin form, which explains how to use a forward proxy. Other requests pass unchanged.
   */
  #reverse(
    req: Pick<IncomingMessage, 'method' | 'url' | 'rawHeaders'>,
    target: TunnelTarget | undefined,
    res: ServerResponse | undefined,
  ): { target: TunnelTarget | undefined } | ToolReplayError {
    const path = this.#addressedToSelf(req, target)
    if (path === undefined) return { target }
    const routes = this.#o.reverse
    if (!routes) {
      req.url = path
      return { target: undefined }
    }
    const resolved = routes.resolve(path)
    if (!resolved) {
      const self = this.#o.self().url
      const mounts = routes.describe(self).map((m) => `${m.url}/ → ${m.upstream}`)
      return new ToolReplayError(
        ErrorCodes.PROXY_BAD_REQUEST,
        `Tool Replay reverse proxy has no upstream for "${req.method} ${path}": mounted ${mounts.join(', ')}. Send it under one of these, or add --reverse NAME=URL.`,
      )
    }
    if (res) localizeRedirects(res, routes, resolved.url, localOriginOf(req, this.#o.self().url))
    rewriteToUpstream(req, resolved.url)
    return { target: undefined }
  }

  /** The origin-form target of a request sent to the proxy as to a server, or undefined for a proxied request. */
  #addressedToSelf(req: Pick<IncomingMessage, 'url'>, target: TunnelTarget | undefined): string | undefined {
    const raw = req.url ?? ''
    if (target === undefined && raw.startsWith('/')) return raw
    const url = requestUrl(req, target)
    if (url?.protocol !== 'http:') return undefined
    const self = this.#o.self()
    if (Number(url.port || 80) !== self.port) return undefined
    const host = url.hostname.replace(/^\[|\]$/g, '').toLowerCase()
    return [self.host, 'localhost', '127.0.0.1', '::1'].includes(host) ? `${url.pathname}${url.search}` : undefined
  }

  /** The ticket of a request's connection (for its first request, in that session), else a new one. */
  #claim(socket: Duplex, session: Session): Ticket {
    const held = this.#arrivals.get(socket)
    if (held) {
      this.#arrivals.delete(socket)
      if (held.session === session) return held.ticket
      held.ticket.release()
    }
    return session.arrival()
  }

  #hold(socket: Duplex, session: Session): void {
    this.#arrivals.get(socket)?.ticket.release()
    const ticket = session.arrival()
    this.#arrivals.set(socket, { session, ticket })
    socket.once('close', () => ticket.release())
  }
}
