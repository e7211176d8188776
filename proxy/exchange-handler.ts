/**
 * One request through the proxy: resolve its URL, read its body (bounded), ask the engine, then carry the
 * decision out (play back, forward and record, or refuse). No matching or strictness logic lives here.
 * Driven by tests with node:http's own IncomingMessage/ServerResponse on a socket-less stream.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Agent } from 'undici'
import { bodyTooLarge, type Decision, type Pace, type Session, type Ticket } from '../engine/index.ts'
import { ErrorCodes, type HeaderPairs, headerPairsFromRaw } from '../trace/index.ts'
import { forwardRequest } from './forward.ts'
import { stripHopByHop } from './headers.ts'
import { writePlayback } from './playback.ts'
import { sendRefusal } from './refusal.ts'
import { readBody } from './request-body.ts'
import { createHrefResolver, type TunnelTarget } from './request-target.ts'
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
}

/** Creates zeroed counters. */
export function createStats(): ProxyStats {
  return { requests: 0, replayed: 0, forwarded: 0, refused: 0, tunnels: 0, badRequests: 0, upgrades: 0 }
}

/** What handling a request needs. */
export interface ExchangeHandlerContext {
  session: Session
  agent: Agent
  stats: ProxyStats
  pace: Pace
  chunkGapMs: number
  maxBodyBytes: number
  drainAfterAbortMs: number
  /** `host:port` the proxy listens on, for the message to clients that use it as a server. */
  listening: () => string
  /** The request's place in the order the engine sees requests (see engine/arrival-order.ts). */
  arrival: (req: IncomingMessage) => Ticket
}

/**
 * Returns the request handler. It returns a promise only for asynchronous work (body reads, forwarding,
 * paced or chunked replay): a bodiless one-chunk replay finishes in the caller's tick.
 */
export function createExchangeHandler(
  ctx: ExchangeHandlerContext,
): (req: IncomingMessage, res: ServerResponse, target: TunnelTarget | undefined) => Promise<void> | undefined {
  const hrefOf = createHrefResolver()
  /** Each request's ticket, taken when it arrives (its connection's, for the first request on it). */
  const tickets = new WeakMap<IncomingMessage, Ticket>()
  const ticket = (req: IncomingMessage): Ticket => tickets.get(req) ?? ctx.arrival(req)
  const playbackOptions = { pace: ctx.pace, chunkGapMs: ctx.chunkGapMs }

  const decide = (req: IncomingMessage, res: ServerResponse, url: string, rawPairs: HeaderPairs, body: Buffer | null): Promise<void> | undefined => {
    // Hop-by-hop and Proxy-* fields describe the client's connection to us, not the exchange: never recorded.
    const headers = stripHopByHop(rawPairs)
    const decision = ticket(req).turn(() => ctx.session.handle({ method: req.method ?? 'GET', url, headers, body }))
    // A promise only when an earlier connection holds its place, or when the store must be asked (big traces).
    if (decision instanceof Promise) return decision.then((d) => carryOut(req, res, url, headers, body, d as Decision))
    return carryOut(req, res, url, headers, body, decision)
  }

  const carryOut = (
    req: IncomingMessage,
    res: ServerResponse,
    url: string,
    headers: HeaderPairs,
    body: Buffer | null,
    decision: Decision,
  ): Promise<void> | undefined => {
    if (decision.kind === 'replay') {
      ctx.stats.replayed++
      return writePlayback(res, decision.playback, playbackOptions)
    }
    if (decision.kind === 'fail') {
      ctx.stats.refused++
      sendRefusal(res, decision.error)
      return undefined
    }
    ctx.stats.forwarded++
    return forwardRequest(ctx.agent, { url: new URL(url), method: req.method ?? 'GET', headers, body }, res, decision.recorder, {
      drainAfterAbortMs: ctx.drainAfterAbortMs,
    })
  }

  return (req, res, target) => {
    ctx.stats.requests++
    // Taken before the body is read: a slow body must not let a later request overtake it.
    const t = ctx.arrival(req)
    tickets.set(req, t)
    res.once('close', () => t.release())
    const url = hrefOf(req, target)
    if (url === undefined) {
      ctx.stats.badRequests++
      req.resume()
      sendProxyError(
        res,
        400,
        ErrorCodes.PROXY_BAD_REQUEST,
        `Tool Replay proxy got "${req.method} ${req.url}" in origin form. It is a forward proxy: point the client at it with HTTP_PROXY/HTTPS_PROXY=http://${ctx.listening()} (or run it through \`tr-proxy record -- <command>\`).`,
      )
      return undefined
    }
    const rawPairs = headerPairsFromRaw(req.rawHeaders)
    const reading = readBody(req, rawPairs, ctx.maxBodyBytes)
    if (reading === null) return decide(req, res, url, rawPairs, null)
    return reading.then((body) => {
      if (body === 'aborted') return undefined
      if (body === 'too-large') {
        ctx.stats.badRequests++
        const error = bodyTooLarge(req.method ?? 'GET', url, ctx.maxBodyBytes)
        ctx.session.refuse({ method: req.method ?? 'GET', url }, error)
        sendProxyError(res, 413, error.code, error.message)
        return undefined
      }
      return decide(req, res, url, rawPairs, body)
    })
  }
}
