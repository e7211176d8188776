/**
 * HTTP/2 test upstreams and clients: a node:http2 server on 127.0.0.1:0 (TLS with h2 and http/1.1 by ALPN,
 * or cleartext h2c) that counts its connections, with routes that exercise what HTTP/2 adds (trailers, a
 * Trailers-Only answer, stream resets); and a node:http2 client that reads a stream the way an app does,
 * each DATA frame one read.
 */
import { once } from 'node:events'
import http, { type IncomingMessage } from 'node:http'
import http2, { type ClientHttp2Session, type ServerHttp2Stream } from 'node:http2'
import net, { type AddressInfo, type Socket } from 'node:net'
import { createServer as createTlsServer, connect as tlsConnect } from 'node:tls'

export const H2_HELLO = 'hello over h2\n'
export const H2_CHUNKS = ['one;', 'two;', 'three;']
export const H2_PARTIAL = 'partial-before-reset'

export interface Http2Upstream {
  port: number
  /** Connections accepted (TLS: handshakes finished). */
  readonly connections: number
  /** Streams (and HTTP/1.1 requests) seen, as "METHOD path". */
  requests: string[]
  close(): Promise<void>
}

/** Starts an HTTP/2 upstream: TLS (h2 or http/1.1, as ALPN chooses) when `tls` is given, else cleartext h2c. */
export async function startHttp2Upstream(tls?: { cert: string; key: string }): Promise<Http2Upstream> {
  const state = { connections: 0, requests: [] as string[] }
  const h2 = http2.createServer()
  h2.on('stream', (stream: ServerHttp2Stream, headers) => {
    stream.on('error', () => {})
    const chunks: Buffer[] = []
    stream.on('data', (c: Buffer) => chunks.push(c))
    stream.on('end', () => {
      state.requests.push(`${headers[':method']} ${headers[':path']}`)
      void route(stream, String(headers[':path']), Buffer.concat(chunks))
    })
  })
  // HTTP/1.1 clients (ALPN http/1.1) get the same answers where HTTP/1.1 can carry them.
  const h1 = http.createServer((req, res) => {
    state.requests.push(`${req.method} ${req.url}`)
    if (req.url === '/hello') {
      res.writeHead(200, { 'content-type': 'text/plain', 'x-upstream': 'h1' })
      res.end(H2_HELLO)
    } else {
      res.writeHead(404)
      res.end()
    }
  })
  const server: net.Server = tls
    ? createTlsServer({ ...tls, ALPNProtocols: ['h2', 'http/1.1'] }, (socket) => {
        state.connections++
        ;(socket.alpnProtocol === 'h2' ? h2 : h1).emit('connection', socket)
      })
    : net.createServer((socket) => {
        state.connections++
        h2.emit('connection', socket)
      })
  const sockets = new Set<Socket>()
  server.on('connection', (s: Socket) => {
    sockets.add(s)
    s.on('close', () => sockets.delete(s))
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  return {
    port: (server.address() as AddressInfo).port,
    get connections() {
      return state.connections
    },
    requests: state.requests,
    close: async () => {
      for (const s of sockets) s.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

async function route(stream: ServerHttp2Stream, path: string, body: Buffer): Promise<void> {
  switch (path) {
    case '/hello':
      stream.respond({ ':status': 200, 'content-type': 'text/plain', 'x-upstream': 'h2' })
      stream.end(H2_HELLO)
      return
    case '/echo':
      stream.respond({ ':status': 200, 'content-type': 'application/octet-stream' })
      stream.end(body)
      return
    case '/stream': {
      stream.respond({ ':status': 200, 'content-type': 'text/plain' }, { waitForTrailers: true })
      stream.once('wantTrailers', () => stream.sendTrailers({ 'x-checksum': 'abc123', 'x-count': String(H2_CHUNKS.length) }))
      for (const [i, c] of H2_CHUNKS.entries()) {
        await new Promise<void>((resolve) => stream.write(c, () => resolve()))
        if (i < H2_CHUNKS.length - 1) await sleep(30)
      }
      stream.end()
      return
    }
    case '/trailers-only':
      // How a gRPC server answers an error: one HEADERS frame that ends the stream.
      stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '5', 'grpc-message': 'not found' }, { endStream: true })
      return
    case '/reset-mid':
      stream.respond({ ':status': 200, 'content-type': 'text/plain' })
      stream.write(H2_PARTIAL)
      await sleep(30)
      // A write still pending holds close()'s END_STREAM back, so the reset is what the client reads.
      stream.write(Buffer.alloc(0))
      stream.close(http2.constants.NGHTTP2_ENHANCE_YOUR_CALM)
      return
    case '/hang':
      // Never answers (until the connection goes).
      return
    case '/reset-before':
      stream.close(http2.constants.NGHTTP2_REFUSED_STREAM)
      return
    default:
      stream.respond({ ':status': 404 })
      stream.end()
  }
}

/** An HTTP/2 session to `https://host` through the proxy's CONNECT tunnel, trusting `ca`. */
export async function connectThroughProxy(proxyPort: number, host: string, ca: string): Promise<ClientHttp2Session> {
  const req = http.request({ host: '127.0.0.1', port: proxyPort, method: 'CONNECT', path: `${host}:443`, headers: { host: `${host}:443` } })
  req.end()
  const [res, socket] = (await once(req, 'connect')) as [IncomingMessage, Socket]
  if (res.statusCode !== 200) throw new Error(`CONNECT answered ${res.statusCode}`)
  const secure = tlsConnect({ socket, servername: host, ca, ALPNProtocols: ['h2'] })
  await once(secure, 'secureConnect')
  const session = http2.connect(`https://${host}`, { createConnection: () => secure })
  session.on('error', () => {})
  return session
}

/** What a client read of one stream. */
export interface Http2Read {
  status: number | undefined
  headers: Record<string, unknown>
  /** The response head ended the stream (HEADERS with END_STREAM). */
  headersEnded: boolean
  /** One entry per 'data' event. */
  chunks: string[]
  trailers: Record<string, unknown> | undefined
  /** The RST_STREAM code the stream closed with (0: none). */
  rstCode: number
  error: string | undefined
}

/** Sends one request on `session` and reads its whole answer. */
export function h2Request(
  session: ClientHttp2Session,
  path: string,
  options: { method?: string; body?: string; headers?: Record<string, string> } = {},
): Promise<Http2Read> {
  return new Promise((resolve) => {
    const read: Http2Read = { status: undefined, headers: {}, headersEnded: false, chunks: [], trailers: undefined, rstCode: 0, error: undefined }
    const stream = session.request({ ':method': options.method ?? 'GET', ':path': path, ...options.headers }, { endStream: options.body === undefined })
    stream.on('response', (headers, flags) => {
      read.status = Number(headers[':status'])
      read.headers = Object.fromEntries(Object.entries(headers))
      read.headersEnded = (flags & http2.constants.NGHTTP2_FLAG_END_STREAM) !== 0
    })
    stream.on('data', (c: Buffer) => read.chunks.push(c.toString()))
    stream.on('trailers', (t) => (read.trailers = Object.fromEntries(Object.entries(t))))
    stream.on('error', (err: Error & { code?: string }) => (read.error = err.code ?? err.message))
    stream.on('close', () => {
      read.rstCode = stream.rstCode ?? 0
      resolve(read)
    })
    if (options.body !== undefined) stream.end(options.body)
  })
}
