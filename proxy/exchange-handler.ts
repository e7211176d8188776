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

/** A signal that aborts when the client closes the connection before its response was written. */
function clientGoneSignal(res: ServerResponse): AbortSignal {
  const controller = new AbortController()
  res.once('close', () => {
    if (!res.writableFinished) controller.abort()
  })
  return controller.signal
}

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
    // With faults, a fault's wait (a timeout, a latency) ends when the client goes away.
    const signal = ctx.session.faults ? clientGoneSignal(res) : undefined
    const decision = ticket(req).turn(() => ctx.session.handle({ method: req.method ?? 'GET', url, headers, body, ...(signal ? { signal } : {}) }))
    // A promise when an earlier connection holds its place, when the store must be asked (big traces), or
    // while a fault makes the client wait.
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
    if (decision.kind !== 'fail' && decision.fault) ctx.stats.faulted++
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
    const request = { url: new URL(url), method: req.method ?? 'GET', headers, body }
    const options = { drainAfterAbortMs: ctx.drainAfterAbortMs }
    if (!decision.client) return forwardRequest(ctx.agent, request, res, decision.recorder, options)
    // A fault acts on the answer: the upstream's response goes to the recorder, the client gets the engine's playback.
    const forwarding = forwardRequest(ctx.agent, request, null, decision.recorder, options)
    const playing = decision.client.then((playback) => writePlayback(res, playback, playbackOptions))
    return Promise.all([forwarding, playing]).then(() => undefined)
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
        `Tool Replay proxy got "${req.method} ${req.url}" in origin form. It is a forward proxy: point the client at it with HTTP_PROXY/HTTPS_PROXY=http://${ctx.listening()} (or run it through \`tr-proxy record -- <command>\`), or start it with --reverse URL to serve as that upstream for clients that take a base URL.`,
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
