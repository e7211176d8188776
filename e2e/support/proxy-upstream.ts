/** Test upstreams for the proxy e2e tests: HTTP(S) servers on port 0 that count their connections. */
import { once } from 'node:events'
import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { createServer as createHttpsServer } from 'node:https'
import type { AddressInfo, Socket } from 'node:net'
import { gzipSync } from 'node:zlib'
import { loadCertificateAuthority } from '../../proxy/index.ts'
import { tempDir } from './proxy-harness.ts'

export const HELLO = 'hello from upstream\n'
export const JSON_BODY = JSON.stringify({ id: 1, name: 'Ada', tags: ['a', 'b'] })
export const GZIP_TEXT = 'compressed '.repeat(200)
export const STREAM_CHUNKS = ['data: one\n\n', 'data: two\n\n', 'data: three\n\n']
export const RESET_PARTIAL = 'partial-body-before-reset'
/** A 10 MB body, written in 64 KiB pieces. */
export const BIG_BODY = Buffer.alloc(10 * 1024 * 1024, 'the quick brown fox jumps over the lazy dog 0123456789\n')

/** A test PKI: its own CA (not the proxy's), and a leaf for the given names. */
export async function createTestPki(hosts: string[]): Promise<{ caPem: string; caPath: string; certs: Record<string, { cert: string; key: string }> }> {
  const dir = tempDir('tr-upstream-ca-')
  const ca = await loadCertificateAuthority(dir)
  const certs: Record<string, { cert: string; key: string }> = {}
  for (const h of hosts) certs[h] = await ca.issueLeaf(h)
  return { caPem: ca.certPem, caPath: ca.certPath, certs }
}

export interface TestUpstream {
  port: number
  /** TCP connections accepted so far. */
  connections: number
  /** Requests seen, as "METHOD path". */
  requests: string[]
  close(): Promise<void>
}

/** Starts an upstream on 127.0.0.1:0 (HTTPS when `tls` is given) with fixed routes. */
export async function startUpstream(tls?: { cert: string; key: string }): Promise<TestUpstream> {
  const state = { connections: 0, requests: [] as string[] }
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      state.requests.push(`${req.method} ${req.url}`)
      route(req, res, Buffer.concat(chunks))
    })
  }
  const server: Server = tls ? createHttpsServer({ cert: tls.cert, key: tls.key }, handler) : createHttpServer(handler)
  const sockets = new Set<Socket>()
  server.on(tls ? 'secureConnection' : 'connection', () => state.connections++)
  server.on('connection', (s: Socket) => {
    sockets.add(s)
    s.on('close', () => sockets.delete(s))
  })
  // WebSocket-style upgrade: answer 101, then echo every byte back.
  server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
    state.requests.push(`UPGRADE ${req.url}`)
    socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n')
    if (head.byteLength > 0) socket.write(head)
    socket.pipe(socket)
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

function route(req: IncomingMessage, res: ServerResponse, body: Buffer): void {
  const path = (req.url ?? '/').split('?')[0]
  switch (path) {
    case '/hello':
      res.writeHead(200, { 'content-type': 'text/plain', 'x-upstream': 'yes' })
      res.end(HELLO)
      return
    case '/json':
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON_BODY)
      return
    case '/gzip':
      res.writeHead(200, { 'content-type': 'text/plain', 'content-encoding': 'gzip' })
      res.end(gzipSync(GZIP_TEXT))
      return
    case '/whoami':
      // What reached the upstream: the Host it was addressed as and every header name.
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ host: req.headers.host, headers: Object.keys(req.headers).sort() }))
      return
    case '/redirect': {
      // ?to=LOCATION: a redirect, absolute or not, as the upstream's own API would send it.
      const to = new URL(req.url ?? '/', 'http://x').searchParams.get('to') ?? '/hello'
      res.writeHead(302, { location: to.replace('{self}', `${(req.socket as { encrypted?: boolean }).encrypted ? 'https' : 'http'}://${req.headers.host}`) })
      res.end()
      return
    }
    case '/echo':
      res.writeHead(200, { 'content-type': req.headers['content-type'] ?? 'application/octet-stream' })
      res.end(body)
      return
    case '/stream': {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      let i = 0
      const next = () => {
        if (i < STREAM_CHUNKS.length) {
          res.write(STREAM_CHUNKS[i++])
          setTimeout(next, 5)
        } else res.end()
      }
      next()
      return
    }
    case '/sse': {
      // ?n=EVENTS&gap=MS&delay=MS: the head after `delay`, then one event every `gap` ms.
      const q = new URL(req.url ?? '/', 'http://x').searchParams
      const n = Number(q.get('n') ?? 20)
      const gap = Number(q.get('gap') ?? 5)
      setTimeout(
        () => {
          res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
          let i = 0
          const next = () => {
            res.write(`data: {"n":${i},"text":"event ${i} of ${n}"}\n\n`)
            if (++i < n) setTimeout(next, gap)
            else res.end()
          }
          next()
        },
        Number(q.get('delay') ?? 0),
      )
      return
    }
    case '/big': {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(BIG_BODY.byteLength) })
      let offset = 0
      const pump = () => {
        while (offset < BIG_BODY.byteLength) {
          const piece = BIG_BODY.subarray(offset, offset + 64 * 1024)
          offset += piece.byteLength
          if (!res.write(piece)) {
            res.once('drain', pump)
            return
          }
        }
        res.end()
      }
      pump()
      return
    }
    case '/reset':
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '1000' })
      res.write(RESET_PARTIAL, () =>
        setTimeout(() => {
          // A TCP RST where the socket is plain TCP; a TLS socket can only be destroyed (FIN).
          const socket = req.socket as Socket & { encrypted?: boolean }
          if (socket.encrypted) socket.destroy()
          else socket.resetAndDestroy()
        }, 20),
      )
      return
    case '/hangup':
      // The connection closes before any response head (a server that crashed on the request).
      req.socket.destroy()
      return
    case '/slow': {
      res.writeHead(200, { 'content-type': 'text/plain' })
      const timer = setInterval(() => res.write('tick\n'), 10)
      res.on('close', () => clearInterval(timer))
      return
    }
    default:
      res.writeHead(404, { 'content-type': 'text/plain' })
      res.end('not found\n')
  }
}
