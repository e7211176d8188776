/**
 * The forward proxy: absolute-form HTTP requests and CONNECT tunnels with TLS interception. Every request
 * goes to the engine's `session.handle()`; the proxy only translates between the wire and its decision
 * (replay / forward with a recorder / fail). No matching or strictness logic lives here.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import { TLSSocket } from 'node:tls'
import type { Agent } from 'undici'
import type { Session, SessionSummary } from '../engine/index.ts'
import { ErrorCodes, type HeaderPairs, headerPairsFromRaw, ToolReplayError } from '../trace/index.ts'
import type { CertificateAuthority } from './certificate-authority.ts'
import { forwardRequest } from './forward.ts'
import { stripHopByHop } from './headers.ts'
import { type Pace, writePlayback } from './playback.ts'
import { REFUSED_STATUS, sendProxyError } from './responses.ts'
import { createUpstreamAgent, type UpstreamOptions } from './upstream.ts'
import { passUpgradeThrough } from './websocket-tunnel.ts'

/** Options for `startProxy`. */
export interface ProxyServerOptions {
  /** The engine session every request is handed to (from `openSession`). */
  session: Session
  /** The CA leaf certificates for intercepted hosts are signed with. */
  ca: CertificateAuthority
  /** Interface to bind. Default 127.0.0.1: the proxy is not reachable from other machines unless asked. */
  host?: string
  /** Port; 0 (default) picks a free one. */
  port?: number
  upstream?: UpstreamOptions
  /** Replay pacing; default 'none' (chunk boundaries kept, no waits). */
  pace?: Pace
  /** Largest request body buffered for identity, in bytes (default 64 MiB); larger gets 413. */
  maxBodyBytes?: number
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
}

/** A running proxy. */
export interface ProxyServer {
  /** `http://127.0.0.1:PORT`: the value for HTTP_PROXY / HTTPS_PROXY. */
  readonly url: string
  readonly host: string
  readonly port: number
  readonly session: Session
  readonly ca: CertificateAuthority
  readonly stats: Readonly<ProxyStats>
  /** Stops accepting, lets in-flight exchanges finish (up to `graceMs`, default 5000), closes the session. */
  close(options?: { graceMs?: number }): Promise<SessionSummary>
}

interface Target {
  scheme: 'http' | 'https'
  /** host[:port] as the client named it in CONNECT. */
  authority: string
}

const DEFAULT_MAX_BODY = 64 * 1024 * 1024

/**
 * Starts the forward proxy on `host:port` (default 127.0.0.1, a free port).
 * @example
 * const session = await openSession({ mode: 'replay', trace: 'checkout', store })
 * const proxy = await startProxy({ session, ca: await loadCertificateAuthority(storeDir) })
 * // HTTPS_PROXY=proxy.url ... then:
 * const summary = await proxy.close()
 */
export async function startProxy(options: ProxyServerOptions): Promise<ProxyServer> {
  const { session, ca } = options
  const upstreamOptions = options.upstream ?? {}
  const pace = options.pace ?? 'none'
  const maxBody = options.maxBodyBytes ?? DEFAULT_MAX_BODY
  const stats: ProxyStats = { requests: 0, replayed: 0, forwarded: 0, refused: 0, tunnels: 0, badRequests: 0, upgrades: 0 }
  const agent: Agent = createUpstreamAgent(upstreamOptions)
  const targets = new WeakMap<Duplex, Target>()
  /** Request URL as sent → its normalized href (null: not a valid URL); see requestHref. */
  const hrefs = new Map<string, string | null>()
  const sockets = new Set<Duplex>()
  const inflight = new Set<Promise<void>>()

  const track = (socket: Duplex) => {
    sockets.add(socket)
    socket.once('close', () => sockets.delete(socket))
  }

  const onRequest = (target: Target | undefined) => (req: IncomingMessage, res: ServerResponse) => {
    const fail = (err: unknown) =>
      sendProxyError(
        res,
        500,
        ErrorCodes.INTERNAL,
        `Tool Replay proxy failed on ${req.method} ${req.url}: ${(err as Error)?.message ?? String(err)}. This is a bug; please report it.`,
      )
    let p: Promise<void> | undefined
    try {
      p = handleRequest(req, res, target)
    } catch (err) {
      fail(err)
    }
    // Only asynchronous work (body reads, forwarding, paced replay) is tracked: a bodiless replay
    // finishes in this tick, without a promise.
    if (p) {
      const tracked = p.catch(fail)
      inflight.add(tracked)
      void tracked.finally(() => inflight.delete(tracked))
    }
  }

  function handleRequest(req: IncomingMessage, res: ServerResponse, target: Target | undefined): Promise<void> | undefined {
    stats.requests++
    const url = requestHref(req, target)
    if (url === undefined) {
      stats.badRequests++
      req.resume()
      sendProxyError(
        res,
        400,
        ErrorCodes.PROXY_BAD_REQUEST,
        `Tool Replay proxy got "${req.method} ${req.url}" in origin form. It is a forward proxy: point the client at it with HTTP_PROXY/HTTPS_PROXY=http://${hostPort()} (or run it through \`tr-proxy record -- <command>\`).`,
      )
      return undefined
    }
    const rawPairs = headerPairsFromRaw(req.rawHeaders)
    const reading = readBody(req, rawPairs, maxBody)
    if (reading === null) return decide(req, res, url, rawPairs, null)
    return reading.then((body) => {
      if (body === 'aborted') return undefined
      if (body === 'too-large') {
        stats.badRequests++
        const error = new ToolReplayError(
          ErrorCodes.PROXY_BAD_REQUEST,
          `Request body of ${req.method} ${url} exceeds ${maxBody} bytes; the proxy buffers bodies to match them. Raise maxBodyBytes.`,
        )
        session.refuse({ method: req.method ?? 'GET', url }, error)
        sendProxyError(res, 413, error.code, error.message)
        return undefined
      }
      return decide(req, res, url, rawPairs, body)
    })
  }

  function decide(req: IncomingMessage, res: ServerResponse, url: string, rawPairs: HeaderPairs, body: Buffer | null): Promise<void> | undefined {
    // Hop-by-hop and Proxy-* fields describe the client's connection to us, not the exchange: never recorded.
    const headers = stripHopByHop(rawPairs)
    const decision = session.handle({ method: req.method ?? 'GET', url, headers, body })
    if (decision.kind === 'replay') {
      stats.replayed++
      return writePlayback(res, decision.playback, pace)
    }
    if (decision.kind === 'fail') {
      stats.refused++
      sendProxyError(res, REFUSED_STATUS, decision.error.code, decision.error.message)
      return undefined
    }
    stats.forwarded++
    return forwardRequest(agent, { url: new URL(url), method: req.method ?? 'GET', headers, body }, res, decision.recorder)
  }

  function onUpgrade(target: Target | undefined) {
    return (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      socket.on('error', () => socket.destroy())
      const url = requestUrl(req, target)
      if (!url) {
        stats.badRequests++
        socket.end(rawError(400, ErrorCodes.PROXY_BAD_REQUEST, `Upgrade request "${req.url}" is not in absolute form.`))
        return
      }
      // The engine decides: live modes pass upgrades through unrecorded; strict replay refuses them and
      // keeps them in the ledger, so a run that swallows the failed socket still fails.
      const decision = session.handleUpgrade({ method: req.method ?? 'GET', url: url.href, headers: headerPairsFromRaw(req.rawHeaders), body: null })
      if (decision.kind === 'fail') {
        stats.refused++
        socket.end(rawError(REFUSED_STATUS, decision.error.code, decision.error.message))
        return
      }
      stats.upgrades++
      void passUpgradeThrough(req, socket, head, url, upstreamOptions)
    }
  }

  function onConnect(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', () => socket.destroy())
    const authority = req.url ?? ''
    const parsed = parseAuthority(authority)
    if (!parsed) {
      stats.badRequests++
      socket.end(rawError(400, ErrorCodes.PROXY_BAD_REQUEST, `CONNECT target "${authority}" is not host:port.`))
      return
    }
    stats.tunnels++
    socket.write('HTTP/1.1 200 Connection Established\r\n\r\n')
    const start = (first: Buffer) => {
      socket.pause()
      if (first.byteLength > 0) socket.unshift(first)
      if (first[0] === 0x16) void intercept(socket, parsed.hostname, authority)
      else {
        // Plain HTTP inside the tunnel (a client that tunnels http:// too).
        targets.set(socket, { scheme: 'http', authority })
        inner.emit('connection', socket)
        socket.resume()
      }
    }
    if (head.byteLength > 0) start(head)
    else socket.once('data', start)
  }

  async function intercept(socket: Duplex, hostname: string, authority: string): Promise<void> {
    let secureContext: Awaited<ReturnType<CertificateAuthority['secureContextFor']>>
    try {
      secureContext = await ca.secureContextFor(hostname)
    } catch {
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
        ca.secureContextFor(servername).then(
          (ctx) => cb(null, ctx),
          (err: Error) => cb(err),
        )
      },
    })
    tlsSocket.on('error', () => tlsSocket.destroy())
    targets.set(tlsSocket, { scheme: 'https', authority })
    track(tlsSocket)
    inner.emit('connection', tlsSocket)
  }

  function requestUrl(req: IncomingMessage, target: Target | undefined): URL | undefined {
    const input = urlInput(req, target)
    if (input === undefined) return undefined
    try {
      return new URL(input)
    } catch {
      return undefined
    }
  }

  /**
   * The request's absolute URL, normalized as `new URL(...).href` would be. Cached: clients repeat the
   * same few URLs, and parsing one per request was a visible share of a replayed request's cost.
   */
  function requestHref(req: IncomingMessage, target: Target | undefined): string | undefined {
    const input = urlInput(req, target)
    if (input === undefined) return undefined
    let href = hrefs.get(input)
    if (href === undefined) {
      href = requestUrl(req, target)?.href ?? null
      if (hrefs.size >= HREF_CACHE_SIZE) hrefs.clear()
      hrefs.set(input, href)
    }
    return href ?? undefined
  }

  const outer: Server = createServer({ requestTimeout: 0 }, onRequest(undefined))
  const inner: Server = createServer({ requestTimeout: 0 }, (req, res) => onRequest(targets.get(req.socket))(req, res))
  outer.on('connect', onConnect)
  outer.on('upgrade', onUpgrade(undefined))
  inner.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => onUpgrade(targets.get(req.socket))(req, socket, head))
  for (const server of [outer, inner]) {
    server.on('connection', track)
    server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
      stats.badRequests++
      if (socket.writable && err.code !== 'ECONNRESET') {
        socket.end(rawError(400, ErrorCodes.PROXY_BAD_REQUEST, `Malformed HTTP request (${err.code ?? err.message}). Send HTTP/1.1 to the proxy.`))
      } else socket.destroy()
    })
  }

  const host = options.host ?? '127.0.0.1'
  await ca.warmUp()
  await new Promise<void>((resolve, reject) => {
    outer.once('error', (err: NodeJS.ErrnoException) =>
      reject(
        new ToolReplayError(
          ErrorCodes.PROXY_START_FAILED,
          `Failed to start the proxy on ${host}:${options.port ?? 0}: ${err.code ?? err.message}. ${err.code === 'EADDRINUSE' ? 'Pick another --port, or omit it for a free one.' : 'Check --host and --port.'}`,
          { cause: err },
        ),
      ),
    )
    outer.listen(options.port ?? 0, host, () => resolve())
  })
  outer.on('error', () => {})
  const port = (outer.address() as AddressInfo).port
  const hostPort = () => `${host.includes(':') ? `[${host}]` : host}:${port}`

  let closed: Promise<SessionSummary> | undefined
  return {
    url: `http://${hostPort()}`,
    host,
    port,
    session,
    ca,
    stats,
    close(closeOptions = {}) {
      closed ??= (async () => {
        outer.close()
        outer.closeIdleConnections()
        inner.closeIdleConnections()
        const grace = closeOptions.graceMs ?? 5000
        let timer: NodeJS.Timeout | undefined
        await Promise.race([
          Promise.allSettled([...inflight]),
          new Promise<void>((resolve) => {
            timer = setTimeout(resolve, grace)
          }),
        ])
        clearTimeout(timer)
        for (const s of sockets) s.destroy()
        await agent.close().catch(() => {})
        return session.close()
      })()
      return closed
    },
  }
}

const HREF_CACHE_SIZE = 1024

/** The string `new URL` parses for a request: its absolute-form target, or the tunnel's origin plus the path. */
function urlInput(req: IncomingMessage, target: Target | undefined): string | undefined {
  const raw = req.url ?? ''
  if (/^https?:\/\//i.test(raw)) return raw
  if (!target || !raw.startsWith('/')) return undefined
  return `${target.scheme}://${target.authority}${raw}`
}

function parseAuthority(authority: string): { hostname: string; port: number } | undefined {
  const m = /^(\[[0-9a-fA-F:.]+\]|[^:/\s[\]]+):(\d{1,5})$/.exec(authority)
  if (!m) return undefined
  const port = Number(m[2])
  if (port < 1 || port > 65535) return undefined
  return { hostname: (m[1] as string).replace(/^\[|\]$/g, ''), port }
}

function rawError(status: number, code: string, message: string): string {
  const body = `${message}\n`
  const reason = status === 400 ? 'Bad Request' : status === REFUSED_STATUS ? 'Tool Replay Refused' : 'Error'
  return `HTTP/1.1 ${status} ${reason}\r\ncontent-type: text/plain; charset=utf-8\r\nx-tool-replay-error: ${code}\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`
}

/** True when the request has a Content-Length or Transfer-Encoding field (one pass, few lowercase copies). */
function announcesBody(pairs: HeaderPairs): boolean {
  for (const [name] of pairs) {
    if (name.length !== 14 && name.length !== 17) continue
    const lower = name.toLowerCase()
    if (lower === 'content-length' || lower === 'transfer-encoding') return true
  }
  return false
}

function readBody(req: IncomingMessage, rawPairs: HeaderPairs, max: number): Promise<Buffer | null | 'too-large' | 'aborted'> | null {
  // No Content-Length and no Transfer-Encoding: HTTP/1.1 says there is no body (RFC 9112 6.3).
  // Read from the raw pairs: touching req.headers would build Node's header object for nothing.
  if (!announcesBody(rawPairs)) {
    req.resume()
    return null
  }
  return new Promise((resolve) => {
    const chunks: Buffer[] = []
    let size = 0
    let overflow = false
    req.on('data', (chunk: Buffer) => {
      size += chunk.byteLength
      if (size > max) overflow = true
      else chunks.push(chunk)
    })
    req.once('end', () => resolve(overflow ? 'too-large' : size === 0 ? null : Buffer.concat(chunks, size)))
    req.once('error', () => resolve('aborted'))
    req.once('close', () => {
      if (!req.complete) resolve('aborted')
    })
  })
}
