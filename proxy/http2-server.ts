/**
 * The proxy's HTTP/2 side: connections that chose `h2` by ALPN inside a CONNECT tunnel (tunnels.ts), and
 * cleartext connections that open with the HTTP/2 preface (h2c with prior knowledge, `servePlainHttp2`) are
 * served by one node:http2 server. Each stream is one exchange: routed like an HTTP/1.1 request (its session,
 * reverse mount and place in the order: request-router.ts), then carried through the capture lifecycle as
 * capture/http2-stream.ts translates it. Live requests go out over HTTP/2 when the upstream speaks it
 * (http2-upstream.ts).
 */
import type { Http2Server, IncomingHttpHeaders, ServerHttp2Session, ServerHttp2Stream } from 'node:http2'
import type { Duplex } from 'node:stream'
import { answerHttp2Stream, type CaptureOptions, captureRequest, http2Exchange, http2RequestFields, refusalResponse } from '../capture/index.ts'
import type { Session } from '../engine/index.ts'
import { ErrorCodes, headerPairsFromRaw } from '../trace/index.ts'
import type { ProxyStats } from './exchange-handler.ts'
import type { Http2Upstreams } from './http2-upstream.ts'
import type { RequestRouter, RoutedStream } from './request-router.ts'
import { createHrefResolver, type TunnelTarget } from './request-target.ts'
import { ERROR_HEADER, UPSTREAM_ERROR_HEADER, UPSTREAM_FAILED_STATUS, upstreamErrorMessage } from './responses.ts'

const END_STREAM = 0x1

/** What serving HTTP/2 streams needs from the proxy. */
export interface Http2ServingContext {
  router: RequestRouter
  stats: ProxyStats
  upstreams: Http2Upstreams
  /** How a session's requests are handled (exchange-handler.ts proxyCaptureOptions). */
  captureOptions(session: Session): CaptureOptions
  /** Tracks a stream's handling so close() can wait for it. */
  inflight(handling: Promise<void>): void
  /** `host:port` the proxy listens on, for the message to clients that use it as a server. */
  listening(): string
}

/** The proxy's HTTP/2 server. */
export interface Http2Serving {
  /** Serves HTTP/2 on a connection (a tunnel's TLS socket that chose h2; a cleartext one that sent the preface). */
  serve(socket: Duplex, target: TunnelTarget | undefined): void
  /** Ends every session at once (the proxy is closing; its sockets are destroyed next). */
  close(): void
}

/** Creates the HTTP/2 server that streams of every HTTP/2 connection go through. */
export function createHttp2Serving(ctx: Http2ServingContext): Http2Serving {
  const http2 = process.getBuiltinModule('node:http2')
  const server: Http2Server = http2.createServer()
  const connections = new WeakMap<object, { socket: Duplex; target: TunnelTarget | undefined }>()
  const sessions = new Set<ServerHttp2Session>()
  let arriving: { socket: Duplex; target: TunnelTarget | undefined } | undefined
  // 'session' is emitted within emit('connection'): the connection it serves is the one being handed over.
  server.on('session', (session: ServerHttp2Session) => {
    if (arriving) connections.set(session, arriving)
    sessions.add(session)
    session.once('close', () => sessions.delete(session))
    session.on('error', () => {})
  })
  const onStream = streamHandler(ctx, connections)
  server.on('stream', onStream)
  return {
    serve(socket, target) {
      arriving = { socket, target }
      // A server-side TLSSocket made without a tls.Server never leaves `secureConnecting` (only tls.Server's
      // handshake callback clears it), and node:http2 would wait for a 'secureConnect' that never comes.
      const tls = socket as Duplex & { secureConnecting?: boolean }
      if (tls.secureConnecting) tls.secureConnecting = false
      try {
        server.emit('connection', socket)
      } finally {
        arriving = undefined
      }
    },
    close() {
      for (const s of sessions) s.destroy()
    },
  }
}

function streamHandler(ctx: Http2ServingContext, connections: WeakMap<object, { socket: Duplex; target: TunnelTarget | undefined }>) {
  const hrefOf = createHrefResolver()
  const captureOptions = new WeakMap<Session, CaptureOptions>()
  return (stream: ServerHttp2Stream, _headers: IncomingHttpHeaders, flags: number, rawHeaders: string[]): void => {
    stream.on('error', () => {})
    const connection = stream.session ? connections.get(stream.session) : undefined
    if (!connection) {
      stream.close()
      return
    }
    const fields = http2RequestFields(rawHeaders)
    const req: RoutedStream = {
      method: fields.method,
      url: fields.path ?? '/',
      rawHeaders: fields.headers.flat(),
      socket: connection.socket as RoutedStream['socket'],
      resume: () => stream.resume(),
    }
    const route = ctx.router.stream(req, connection.target)
    if ('refusal' in route) {
      const { refusal, status } = route
      if (status === 0) {
        const r = refusalResponse(refusal, fields.headers)
        answerHttp2Stream(stream, { status: r.status, headers: r.headers, body: r.body })
      } else answerHttp2Stream(stream, textAnswer(status, refusal.code, refusal.message))
      return
    }
    ctx.stats.requests++
    // A path without a tunnel or a reverse mount names the proxy itself: nothing to forward to.
    const url = hrefOf(req, route.target)
    if (url === undefined) {
      route.ticket.release()
      ctx.stats.badRequests++
      stream.resume()
      answerHttp2Stream(
        stream,
        textAnswer(
          400,
          ErrorCodes.PROXY_BAD_REQUEST,
          `Tool Replay proxy got the HTTP/2 request "${fields.method} ${fields.path}" without an authority it can forward to. Start it with --reverse URL to serve as that upstream, or send requests through HTTPS_PROXY=http://${ctx.listening()}.`,
        ),
      )
      return
    }
    // The session header was taken out of the fields while routing.
    const headers = headerPairsFromRaw(req.rawHeaders)
    const exchange = http2Exchange(
      stream,
      { method: fields.method, url, headers, endStream: (flags & END_STREAM) !== 0 },
      {
        forward: (body, events) => ctx.upstreams.forward({ method: fields.method, url: new URL(url), headers, body }, events),
        failedBeforeHead: (error) => ({
          status: UPSTREAM_FAILED_STATUS,
          headers: [
            ['content-type', 'text/plain; charset=utf-8'],
            [ERROR_HEADER, ErrorCodes.UPSTREAM_FAILED],
            [UPSTREAM_ERROR_HEADER, error.code],
          ],
          body: Buffer.from(`${upstreamErrorMessage(error.code, error.phase, error.message)}\n`),
        }),
      },
    )
    let options = captureOptions.get(route.session)
    if (!options) {
      options = ctx.captureOptions(route.session)
      captureOptions.set(route.session, options)
    }
    const handling = captureRequest(options, exchange, route.ticket)
    if (handling) ctx.inflight(handling)
  }
}

function textAnswer(status: number, code: string, message: string) {
  return {
    status,
    headers: [
      ['content-type', 'text/plain; charset=utf-8'],
      [ERROR_HEADER, code],
    ] as Array<[string, string]>,
    body: Buffer.from(`${message}\n`),
  }
}
