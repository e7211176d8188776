/**
 * Where the proxy sends the live requests of HTTP/2 clients: over HTTP/2 when the upstream speaks it (ALPN
 * `h2` on TLS; h2c with prior knowledge for an `http:` upstream, which only cleartext HTTP/2 clients reach), one session
 * per origin with its streams multiplexed as the client's were; else over HTTP/1.1 through the proxy's undici
 * Agent, as the requests of HTTP/1.1 clients go. The same upstream options apply (--resolve, --upstream-ca,
 * --insecure-upstream, the connect timeout).
 */
import type { ClientHttp2Session } from 'node:http2'
import { isIP, connect as netConnect, type Socket } from 'node:net'
import { rootCertificates, connect as tlsConnect } from 'node:tls'
import { forwardOverHttp2, forwardThroughDispatcher, type Http2LiveRequest, type Http2Timeouts, type LazyAgent, type LiveEvents } from '../capture/index.ts'
import { flatten } from './headers.ts'
import { mapHost, type UpstreamOptions } from './upstream.ts'

/** What an origin was found to speak: an open HTTP/2 session, or HTTP/1.1 (ALPN chose it). */
type Route = ClientHttp2Session | 'http/1.1'

/** The proxy's HTTP/2 upstream sessions, by origin. */
export class Http2Upstreams {
  readonly #options: UpstreamOptions
  readonly #h1: LazyAgent
  readonly #timeouts: Http2Timeouts
  readonly #routes = new Map<string, Promise<Route>>()
  readonly #sessions = new Set<ClientHttp2Session>()
  #closed = false

  /** `h1`: the Agent for upstreams that answer ALPN with http/1.1. */
  constructor(options: UpstreamOptions, h1: LazyAgent) {
    this.#options = options
    this.#h1 = h1
    // The waits undici applies to the HTTP/1.1 upstream (its defaults: 300 s each), applied here too.
    this.#timeouts = { headersTimeoutMs: options.headersTimeoutMs ?? 300_000, bodyTimeoutMs: options.bodyTimeoutMs ?? 300_000 }
  }

  /** Sends one request live, reporting to `events`. */
  forward(request: Http2LiveRequest, events: LiveEvents): void {
    this.#route(request.url).then(
      (route) => (route === 'http/1.1' ? this.#forwardH1(request, events) : forwardOverHttp2(route, request, events, this.#timeouts)),
      (err: Error) => events.error(err),
    )
  }

  /** Closes every session (streams in flight end with it). */
  close(): void {
    this.#closed = true
    for (const s of this.#sessions) s.destroy()
    this.#sessions.clear()
    this.#routes.clear()
  }

  #forwardH1(request: Http2LiveRequest, events: LiveEvents): void {
    const { url, body } = request
    const live = {
      origin: url.origin,
      path: `${url.pathname}${url.search}`,
      method: request.method,
      // `te: trailers` is an HTTP/2 request's only te; over HTTP/1.1 it would be a hop-by-hop field.
      headers: flatten(request.headers.filter(([k]) => k.toLowerCase() !== 'te')),
      body: body === null ? null : Buffer.from(body.buffer, body.byteOffset, body.byteLength),
      idempotent: false,
    }
    this.#h1.use(
      (agent) => forwardThroughDispatcher(agent, live, events),
      (err) => events.error(err),
    )
  }

  /** The origin's open session (made at its first request, made again once it closed), or http/1.1. */
  #route(url: URL): Promise<Route> {
    const origin = url.origin
    let route = this.#routes.get(origin)
    if (!route) {
      route = this.#connect(url)
      this.#routes.set(origin, route)
      const made = route
      // A failed connection is not remembered: the next request tries again, as an HTTP/1.1 client's would.
      made.catch(() => {
        if (this.#routes.get(origin) === made) this.#routes.delete(origin)
      })
    }
    return route
  }

  async #connect(url: URL): Promise<Route> {
    if (this.#closed) throw new Error('The proxy is closing.')
    const secure = url.protocol === 'https:'
    // An http: upstream is reached in cleartext HTTP/2 (prior knowledge): only a cleartext HTTP/2 client (h2c
    // on the proxy port, or inside a CONNECT tunnel) sends streams to one, and it expects such an upstream.
    const socket = await this.#socket(url, secure)
    if (secure && (socket as Socket & { alpnProtocol?: string | false }).alpnProtocol !== 'h2') {
      socket.destroy()
      return 'http/1.1'
    }
    const http2 = process.getBuiltinModule('node:http2')
    const session = http2.connect(url.origin, { createConnection: () => socket })
    this.#sessions.add(session)
    const route = this.#routes.get(url.origin)
    // A session that closes or is told to go away takes no new streams: the next request opens another.
    const forget = () => {
      this.#sessions.delete(session)
      if (this.#routes.get(url.origin) === route) this.#routes.delete(url.origin)
    }
    session.once('close', forget)
    session.once('goaway', forget)
    session.on('error', () => {})
    return session
  }

  #socket(url: URL, secure: boolean): Promise<Socket> {
    const o = this.#options
    const port = Number(url.port) || (secure ? 443 : 80)
    const target = mapHost(o, url.hostname, port)
    const bare = url.hostname.replace(/^\[|\]$/g, '')
    return new Promise((resolve, reject) => {
      const socket = secure
        ? tlsConnect({
            host: target.host,
            port: target.port || port,
            ...(isIP(bare) ? {} : { servername: bare }),
            rejectUnauthorized: !o.insecure,
            ALPNProtocols: ['h2', 'http/1.1'],
            // Passing `ca` replaces Node's roots: keep them, so --upstream-ca adds rather than replaces.
            ...(o.ca ? { ca: [...rootCertificates, String(o.ca)] } : {}),
          })
        : netConnect({ host: target.host, port: target.port || port })
      const timer = setTimeout(
        () => socket.destroy(Object.assign(new Error('Connect Timeout Error'), { code: 'UND_ERR_CONNECT_TIMEOUT' })),
        o.connectTimeoutMs ?? 10_000,
      )
      socket.once(secure ? 'secureConnect' : 'connect', () => {
        clearTimeout(timer)
        socket.off('error', fail)
        resolve(socket)
      })
      const fail = (err: Error) => {
        clearTimeout(timer)
        reject(err)
      }
      socket.once('error', fail)
    })
  }
}
