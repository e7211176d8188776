/**
 * Helpers for the named-session e2e tests: a real `tr-proxy serve` process, and an upstream (HTTP and HTTPS
 * on loopback) that answers every request with a body no other request gets, counts connections, and keeps
 * the headers it was sent (to prove what the proxy forwarded).
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { createServer as createHttpsServer } from 'node:https'
import type { AddressInfo, Socket } from 'node:net'
import { fileURLToPath } from 'node:url'

export const BIN = fileURLToPath(new URL('../../bin/tr-proxy.js', import.meta.url))
export const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url))

/** A running `tr-proxy serve`. */
export interface ServeProcess {
  child: ChildProcess
  /** The proxy URL it printed. */
  url: string
  /** Everything it wrote to stderr so far. */
  stderr(): string
  /** SIGTERM, then its exit code and output. */
  stop(): Promise<{ code: number | null; stderr: string }>
}

/** Starts `tr-proxy serve ARGS` and resolves once it listens (rejects if it exits first or takes over 60 s). */
export async function startServe(args: string[]): Promise<ServeProcess> {
  const child = spawn(process.execPath, [BIN, 'serve', ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
  let text = ''
  child.stdout?.resume()
  child.stderr?.on('data', (c: Buffer) => (text += c))
  const exited = once(child, 'exit')
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve did not listen within 60 s: ${text}`)), 60_000)
    const check = () => {
      const m = /listening on (http:\/\/\S+)/.exec(text)
      if (m) {
        clearTimeout(timer)
        resolve(m[1] as string)
      }
    }
    child.stderr?.on('data', check)
    child.once('exit', () => {
      clearTimeout(timer)
      reject(new Error(`serve exited: ${text}`))
    })
  })
  return {
    child,
    url,
    stderr: () => text,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
      const [code] = await exited
      return { code: code as number | null, stderr: text }
    },
  }
}

/** One request as the upstream saw it. */
export interface SeenRequest {
  method: string
  path: string
  headers: Record<string, string | string[] | undefined>
}

/** An upstream on 127.0.0.1:0, plain HTTP and (with `tls`) HTTPS, answering `{ path, served }` JSON. */
export interface CountingUpstream {
  httpPort: number
  httpsPort: number | undefined
  /** TCP connections accepted so far, both servers. */
  readonly connections: number
  seen: SeenRequest[]
  close(): Promise<void>
}

/** Starts the counting upstream; `served` is one counter over every request, so no two answers are equal. */
export async function startCountingUpstream(tls?: { cert: string; key: string }): Promise<CountingUpstream> {
  const state = { connections: 0, served: 0, seen: [] as SeenRequest[] }
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    req.resume()
    req.on('end', () => {
      state.seen.push({ method: req.method ?? '', path: req.url ?? '', headers: { ...req.headers } })
      const body = JSON.stringify({ path: req.url, served: ++state.served })
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) })
      res.end(body)
    })
  }
  const servers: Server[] = [createHttpServer(handler)]
  if (tls) servers.push(createHttpsServer({ cert: tls.cert, key: tls.key }, handler))
  const sockets = new Set<Socket>()
  for (const s of servers) {
    s.on('connection', (socket: Socket) => {
      state.connections++
      sockets.add(socket)
      socket.on('close', () => sockets.delete(socket))
    })
    s.listen(0, '127.0.0.1')
    await once(s, 'listening')
  }
  const port = (s: Server | undefined) => (s ? (s.address() as AddressInfo).port : undefined)
  return {
    httpPort: port(servers[0]) as number,
    httpsPort: port(servers[1]),
    get connections() {
      return state.connections
    },
    seen: state.seen,
    async close() {
      for (const s of sockets) s.destroy()
      await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))))
    },
  }
}
