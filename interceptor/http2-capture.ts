/**
 * node:http2 capture: while install() is in place, `http2.connect` (also an ESM named import) gives the app
 * a real `ClientHttp2Session` whose socket is one end of an in-memory pair (node:stream `duplexPair`, handed
 * over through `createConnection`). The other end is served by an in-process HTTP/2 server, and each stream
 * the app opens is one exchange through the capture lifecycle (capture/http2-stream.ts), as fetch and
 * node:http requests are: replayed, refused, or forwarded live over a session to the real authority opened
 * with the original `http2.connect` and the app's own options (TLS options included), outside
 * @mswjs/interceptors' socket interception. One upstream session per app session, opened at its first live
 * request: a strict replay opens none.
 *
 * A failure to reach the upstream (a refused connection, a TLS error) fails the app's session with that
 * error, as it did live; a stream reset resets the app's stream with its code.
 *
 * @note An app that brings its own connected socket (`createConnection`, as @grpc/grpc-js does) made that
 * connection itself, before `http2.connect`: that socket is the live transport (record, passthrough), and is
 * left unused and closed with the app's session otherwise. See docs/http2-grpc.md.
 */
import type { ClientHttp2Session, connect as http2Connect, SecureClientSessionOptions, ServerHttp2Stream } from 'node:http2'
import { syncBuiltinESMExports } from 'node:module'
import type { Duplex } from 'node:stream'
import type { ConnectionOptions } from 'node:tls'
import {
  type CaptureOptions,
  captureOptions,
  captureRequest,
  forwardOverHttp2,
  http2Exchange,
  http2RequestFields,
  type LiveEvents,
  type PathOptions,
  toNodeError,
} from '../capture/index.ts'
import type { Session } from '../engine/index.ts'
import { runAsInternalConnection } from './internal-connection.ts'

/** Options for `installHttp2Capture` (install() passes its own): the path's (capture/path-options.ts) and the session. */
export interface Http2CaptureOptions extends PathOptions {
  session: Session
  /**
   * The node:http capture holds every socket the app connects itself (@mswjs/interceptors' socket interception
   * answers `connect` without reaching the network until a request on it is decided): a socket the app brings
   * to `http2.connect` then never reaches its server, so live requests go over a connection of the capture's
   * own, made with that socket's TLS settings.
   */
  appSocketsHeld?: boolean
}

type Connect = typeof http2Connect
type Authority = Parameters<Connect>[0]
type ConnectOptions = SecureClientSessionOptions & { createConnection?: (authority: URL, options: object) => Duplex }

/** One app session as the in-process server sees it. */
interface AppConnection {
  /** `scheme://host:port` the app connected to. */
  origin: URL
  /** The app's end of the pair: destroyed with an error, it fails the app's session as a live connect failure would. */
  appEnd: Duplex
  /** The live session to the real authority (opened at the first forward). */
  upstream(): ClientHttp2Session
}

/**
 * Captures `http2.connect` for one session; returns the undo (the original comes back). The most recent
 * install wins while it is in place, as for the dispatcher.
 */
export function installHttp2Capture(options: Http2CaptureOptions): () => void {
  const http2 = process.getBuiltinModule('node:http2')
  const { duplexPair } = process.getBuiltinModule('node:stream') as typeof import('node:stream') & { duplexPair(): [Duplex, Duplex] }
  const original = http2.connect
  const capture: CaptureOptions = captureOptions(options.session, options)
  const server = http2.createServer()
  const connections = new WeakMap<object, AppConnection>()
  let arriving: AppConnection | undefined
  server.on('session', (s: object) => {
    if (arriving) connections.set(s, arriving)
  })
  server.on('stream', (stream: ServerHttp2Stream, _headers: unknown, flags: number, raw: string[]) => {
    const app = stream.session ? connections.get(stream.session) : undefined
    if (app) serveStream(capture, app, stream, flags, raw)
    else stream.close()
  })

  const captured = function connect(authority: Authority, connectOptions?: unknown, listener?: unknown): ClientHttp2Session {
    if (typeof connectOptions === 'function') {
      listener = connectOptions
      connectOptions = undefined
    }
    const appOptions = (connectOptions ?? {}) as ConnectOptions
    const origin = authorityUrl(authority)
    const [appEnd, ourEnd] = duplexPair()
    // A socket the app connected itself is the live transport; strict replay never writes to it.
    const own = appOptions.createConnection ? appOptions.createConnection(origin, appOptions) : undefined
    let upstream: ClientHttp2Session | undefined
    const app: AppConnection = {
      origin,
      appEnd,
      upstream() {
        if (upstream && !upstream.closed && !upstream.destroyed) return upstream
        const transport = own && (options.appSocketsHeld ? () => connectLike(own, origin) : () => own)
        const live = runAsInternalConnection(() =>
          original(authority, transport ? { ...appOptions, createConnection: transport } : withoutCreateConnection(appOptions)),
        )
        live.on('error', () => {})
        upstream = live
        return live
      },
    }
    ourEnd.once('close', () => {
      upstream?.close()
      own?.destroy()
    })
    arriving = app
    try {
      server.emit('connection', ourEnd)
    } finally {
      arriving = undefined
    }
    const args: unknown[] = [authority, { ...appOptions, createConnection: () => appEnd }]
    if (typeof listener === 'function') args.push(listener)
    return (original as (...a: unknown[]) => ClientHttp2Session)(...args)
  } as Connect
  http2.connect = captured
  syncBuiltinESMExports()
  return () => {
    server.close()
    if (http2.connect !== captured) return
    http2.connect = original
    syncBuiltinESMExports()
  }
}

/** One stream of an app session through the lifecycle. */
function serveStream(capture: CaptureOptions, app: AppConnection, stream: ServerHttp2Stream, flags: number, raw: string[]): void {
  const fields = http2RequestFields(raw)
  const scheme = fields.scheme ?? app.origin.protocol.slice(0, -1)
  const authority = fields.authority ?? app.origin.host
  let url: URL
  try {
    url = new URL(`${scheme}://${authority}${fields.path ?? '/'}`)
  } catch {
    stream.close()
    return
  }
  const ticket = capture.session.arrival()
  const exchange = http2Exchange(
    stream,
    { method: fields.method, url: url.href, headers: fields.headers, endStream: (flags & 0x1) !== 0 },
    {
      forward: (body: Uint8Array | null, events: LiveEvents) =>
        forwardOverHttp2(app.upstream(), { method: fields.method, url, headers: fields.headers, body }, events),
      failedBeforeHead: (error) => {
        // The app's connection fails as it did live: its session gets the error, its streams are cancelled.
        app.appEnd.destroy(toNodeError(error))
        return undefined
      },
    },
  )
  void captureRequest(capture, exchange, ticket)
}

/**
 * A connection to `origin` like the app's own `socket`, opened by the capture: plain TCP, or TLS with the
 * options the app gave `tls.connect` (its CA or secure context, server name, identity check, verification).
 */
function connectLike(socket: Duplex, origin: URL): Duplex {
  const port = Number(origin.port) || (origin.protocol === 'https:' ? 443 : 80)
  const host = origin.hostname.replace(/^\[|\]$/g, '')
  if (!(socket as { encrypted?: boolean }).encrypted) return process.getBuiltinModule('node:net').connect({ host, port })
  // tls.connect keeps its options on the socket under this symbol (msw reads them the same way).
  const key = Object.getOwnPropertySymbols(socket).find((s) => s.description === 'connect-options')
  const given = (key ? Reflect.get(socket, key) : undefined) as ConnectionOptions | undefined
  const { socket: _, host: __, port: ___, path: ____, ...options } = given ?? {}
  return process.getBuiltinModule('node:tls').connect({ ...options, host, port, ALPNProtocols: ['h2'] })
}

function withoutCreateConnection(options: ConnectOptions): ConnectOptions {
  const { createConnection: _, ...rest } = options
  return rest
}

/** The URL `http2.connect` was given, as node:http2 reads it (a string, a URL, or `{ protocol, host | hostname, port }`). */
function authorityUrl(authority: unknown): URL {
  if (authority instanceof URL) return authority
  if (typeof authority === 'string') return new URL(authority)
  const a = (authority ?? {}) as { protocol?: string; host?: string; hostname?: string; port?: number | string }
  const host = a.host ?? `${a.hostname ?? 'localhost'}${a.port !== undefined ? `:${a.port}` : ''}`
  return new URL(`${a.protocol ?? 'https:'}//${host}`)
}
