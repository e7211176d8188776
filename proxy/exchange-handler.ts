/**
 * One request through the proxy, translated for the capture lifecycle (capture/): its absolute URL, header
 * pairs without hop-by-hop fields, its body read off the client connection (bounded), the ServerResponse as
 * the client, and undici as the transport for live requests. What happens to it is decided and carried out
 * there, as for fetch and node:http. Driven by tests with node:http's own IncomingMessage/ServerResponse on a
 * socket-less stream.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import { type CapturedExchange, type CaptureOptions, captureRequest, forwardThroughDispatcher, type LazyAgent, type Pace } from '../capture/index.ts'
import type { Session, Ticket } from '../engine/index.ts'
import { ErrorCodes, headerPairsFromRaw } from '../trace/index.ts'
import { flatten, stripHopByHop } from './headers.ts'
import { readBody } from './request-body.ts'
import { createHrefResolver, type TunnelTarget } from './request-target.ts'
import { responseTarget } from './response-target.ts'
import { sendProxyError } from './responses.ts'

/** Counters, for tests and `GET /status`. */
export interface ProxyStats {
  requests: number
  replayed: number
  forwarded: number
  refused: number
  tunnels: number
  badRequests: number
  upgrades: number
  /** Requests a fault acted on (also counted as replayed when the fault made the answer, or forwarded). */
  faulted: number
  /** Requests refused because they named no open session (also counted as bad requests): a serve fails on them. */
  sessionRefusals: number
}

/** Creates zeroed counters. */
export function createStats(): ProxyStats {
  return { requests: 0, replayed: 0, forwarded: 0, refused: 0, tunnels: 0, badRequests: 0, upgrades: 0, faulted: 0, sessionRefusals: 0 }
}

/** What handling a request needs. */
export interface ExchangeHandlerContext {
  session: Session
  /** Where forwarded requests go (undici is imported at the first one). */
  upstream: LazyAgent
  stats: ProxyStats
  pace: Pace
  /** Gap between chunk writes (ms); undefined: the default for the client's connection. */
  chunkGapMs: number | undefined
  maxBodyBytes: number
  drainAfterAbortMs: number
  /** `host:port` the proxy listens on, for the message to clients that use it as a server. */
  listening: () => string
  /** The request's place in the order the engine sees requests (see engine/arrival-order.ts). */
  arrival: (req: IncomingMessage) => Ticket
}

/** How a session's requests are handled through the proxy (over HTTP/1.1 and HTTP/2 alike), counted in `stats`. */
export function proxyCaptureOptions(ctx: Pick<ExchangeHandlerContext, 'session' | 'pace' | 'maxBodyBytes' | 'drainAfterAbortMs' | 'stats'>): CaptureOptions {
  return {
    session: ctx.session,
    pace: ctx.pace,
    maxBodyBytes: ctx.maxBodyBytes,
    drainAfterAbortMs: ctx.drainAfterAbortMs,
    onDecision(decision) {
      if (decision.kind !== 'fail' && decision.fault) ctx.stats.faulted++
      if (decision.kind === 'replay') ctx.stats.replayed++
      else if (decision.kind === 'fail') ctx.stats.refused++
      else ctx.stats.forwarded++
    },
  }
}

/**
 * Returns the request handler. It returns a promise only for asynchronous work (body reads, forwarding,
 * paced or chunked replay): a bodiless one-chunk replay finishes in the caller's tick.
 */
export function createExchangeHandler(
  ctx: ExchangeHandlerContext,
): (req: IncomingMessage, res: ServerResponse, target: TunnelTarget | undefined) => Promise<void> | undefined {
  const hrefOf = createHrefResolver()
  const capture = proxyCaptureOptions(ctx)

  return (req, res, target) => {
    ctx.stats.requests++
    // Taken before the body is read: a slow body must not let a later request overtake it.
    const ticket = ctx.arrival(req)
    const url = hrefOf(req, target)
    if (url === undefined) {
      ticket.release()
      ctx.stats.badRequests++
      req.resume()
      sendProxyError(
        res,
        400,
        ErrorCodes.PROXY_BAD_REQUEST,
        `Tool Replay proxy got "${req.method} ${req.url}" in origin form. It is a forward proxy: point the client at it with HTTP_PROXY/HTTPS_PROXY=http://${ctx.listening()} (or run it through \`tr-proxy record -- <command>\`), or start it with --reverse URL to serve as that upstream for clients that take a base URL.`,
      )
      return undefined
    }
    const method = req.method ?? 'GET'
    const rawPairs = headerPairsFromRaw(req.rawHeaders)
    // Hop-by-hop and Proxy-* fields describe the client's connection to us, not the exchange: never recorded.
    const headers = stripHopByHop(rawPairs)
    const exchange: CapturedExchange = {
      method,
      url,
      headers,
      readBody: (max, tooLarge) => {
        const reading = readBody(req, rawPairs, max)
        if (reading === null) return { bytes: null }
        return reading.then((body) => {
          if (body === 'aborted') return 'gone'
          if (body === 'too-large') {
            ctx.stats.badRequests++
            throw tooLarge()
          }
          return { bytes: body }
        })
      },
      client: responseTarget(res, ctx.chunkGapMs),
      forward: (body, events) => {
        const u = new URL(url)
        const live = {
          origin: `${u.protocol}//${u.host}`,
          path: `${u.pathname}${u.search}`,
          method,
          headers: flatten(headers),
          body: body === null ? null : Buffer.from(body.buffer, body.byteOffset, body.byteLength),
          // Never retried or rewritten: the app's retries are part of what is recorded.
          idempotent: false,
        }
        ctx.upstream.use(
          (agent) => forwardThroughDispatcher(agent, live, events),
          (err) => events.error(err),
        )
      },
    }
    return captureRequest(capture, exchange, ticket)
  }
}
