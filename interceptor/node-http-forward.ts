/**
 * Sends a captured node:http request live (record, update, passthrough) through Node's own http/https client
 * on agents that msw does not intercept (internal-connection.ts), with the app's TLS options, so it reaches
 * the upstream as the app's request would and is never captured a second time. It only translates Node's
 * client events into the live tee's (capture/live-tee.ts), as capture/undici-upstream.ts does for undici:
 * what reaches the app and the recording, back-pressure, aborts and durability are decided there.
 */
import type { ClientRequest, IncomingMessage } from 'node:http'
import https from 'node:https'
import type { LiveEvents } from '../capture/index.ts'
import { type HeaderPairs, headerPairsFromRaw } from '../trace/index.ts'
import type { ForwardAgents } from './internal-connection.ts'
import type { UpstreamRoute } from './node-http-request.ts'

const http = process.getBuiltinModule('node:http') // not `import`: see trace/patch.ts

/** One request to send live: the app's request as captured (not redacted), body buffered. */
export interface LiveRequest {
  method: string
  url: URL
  /** Without hop-by-hop fields. */
  headers: HeaderPairs
  body: Uint8Array | null
  route: UpstreamRoute
}

/** What a forward needs besides the request. */
export interface ForwardContext {
  agents: ForwardAgents
  /** Called with the live ClientRequest as soon as it exists (so the capture can recognise it). */
  created(request: ClientRequest): void
}

/** The request's fields as Node's client sends them, with a Content-Length that matches the body sent. */
export function outgoingHeaders(headers: HeaderPairs, body: Uint8Array | null): string[] {
  const out: string[] = []
  for (const [k, v] of headers) if (k.toLowerCase() !== 'content-length') out.push(k, v)
  if (body !== null) out.push('content-length', String(body.byteLength))
  return out
}

/** Sends `live`, reporting what happens to `events`. */
export function forwardLive(live: LiveRequest, ctx: ForwardContext, events: LiveEvents): void {
  const { url, route } = live
  const secure = url.protocol === 'https:'
  const request = (secure ? https : http).request({
    method: live.method,
    protocol: url.protocol,
    hostname: url.hostname.replace(/^\[|\]$/g, ''),
    ...(url.port ? { port: Number(url.port) } : {}),
    path: `${url.pathname}${url.search}`,
    // An array keeps repeated fields and their order, and Node adds no Host of its own (the app's is in it).
    headers: outgoingHeaders(live.headers, live.body),
    agent: secure ? ctx.agents.https : ctx.agents.http,
    ...(route.socketPath ? { socketPath: route.socketPath } : {}),
    ...(secure ? route.tls : {}),
  })
  ctx.created(request)
  let response: IncomingMessage | undefined
  let over = false
  events.control({
    pause: () => response?.pause(),
    resume: () => response?.resume(),
    abort: () => {
      over = true
      request.destroy()
    },
  })
  trackProgress(request, secure, events)
  const fail = (err: Error & { code?: unknown }) => {
    if (over) return
    over = true
    events.error(err, recordedAs(err))
  }
  request.on('error', fail)
  request.on('response', (res) => {
    response = res
    events.head({ status: res.statusCode ?? 0, statusText: res.statusMessage ?? '', headers: headerPairsFromRaw(res.rawHeaders) })
    res.on('data', (chunk: Buffer) => {
      if (!over) events.data(chunk)
    })
    res.on('end', () => {
      // A response cut mid-body is reported by 'error', never as an end.
      if (over || !res.complete) return
      over = true
      events.end(headerPairsFromRaw(res.rawTrailers))
    })
    res.on('error', fail)
  })
  const body = live.body
  request.end(body === null ? undefined : Buffer.from(body.buffer, body.byteOffset, body.byteLength))
}

/**
 * What the trace keeps of a failure of Node's client, in undici's vocabulary (the one fetch and the proxy
 * record), so the same upstream event is the same exchange whatever path recorded it: a connection the server
 * closed ("socket hang up" before the head, "aborted" after it) is undici's UND_ERR_SOCKET "other side
 * closed"; a failure without a code stands for a reset. A node:http app replaying it gets Node's own error
 * back (node-http-response.ts).
 */
export function recordedAs(err: Error & { code?: unknown }): { code: string; message?: string } {
  if (err.code === 'ECONNRESET' && (err.message === 'socket hang up' || err.message === 'aborted')) return SERVER_CLOSED
  return { code: typeof err.code === 'string' ? err.code : 'ECONNRESET' }
}

/** undici's report of a connection the server closed (its SocketError). */
const SERVER_CLOSED = { code: 'UND_ERR_SOCKET', message: 'other side closed' }

/**
 * "Started" means connected (a reused socket already is): a refused connection is a connect failure even
 * though Node accepted the whole request into the socket's buffer before it failed.
 */
function trackProgress(request: ClientRequest, secure: boolean, events: LiveEvents): void {
  let started = false
  request.on('socket', (socket) => {
    const connected = () => {
      started = true
      events.started()
      if (request.writableFinished) events.sent()
    }
    if (!socket.connecting) connected()
    else socket.once(secure ? 'secureConnect' : 'connect', connected)
  })
  request.on('finish', () => {
    if (started) events.sent()
  })
}
