/**
 * The control API of `tr-proxy serve`: a tiny HTTP server on a Unix socket in the store directory, a
 * listener of its own, so nothing sent to the proxy port can ever reach it. Each serve has its own socket,
 * named by its proxy port (`<store>/proxy-control-<port>.sock`), so several serves can share a store. When
 * that path is too long for a Unix socket, the socket lives where the store's own socket does then: in a
 * directory of the temp dir private to this user (`tool-replay-<uid>`, 0700, checked before use), never in
 * the shared temp dir itself, where another user could reach it and open sessions or read traces.
 * Its routes (status, the default session's end, named sessions opened and closed) are in control-routes.ts.
 */
import { createHash } from 'node:crypto'
import { readdirSync, rmSync } from 'node:fs'
import type { Server } from 'node:http'
import { dirname, join, resolve } from 'node:path'
import type { Session, SessionSummary } from '../engine/index.ts'
import { privateDirProblem, privateTempDir } from '../store/index.ts'
import { ErrorCodes, ToolReplayError } from '../trace/index.ts'
import { type ControlContext, createControlRoutes } from './control-routes.ts'
import type { ProxyServer } from './proxy-server.ts'

const { createServer, request } = process.getBuiltinModule('node:http') // not `import`: see trace/patch.ts

const SOCKET_NAME = /^proxy-control-(\d{1,5})\.sock$/

/**
 * The control socket of the serve whose proxy listens on `port`: `<store>/proxy-control-<port>.sock`, or a
 * name (with a hash of the store path) in this user's private temp directory when that path is too long for a
 * Unix socket (about 107 bytes on Linux, 103 on macOS).
 */
export function controlSocketPath(storeDir: string, port: number): string {
  const abs = resolve(storeDir)
  const inDir = join(abs, `proxy-control-${port}.sock`)
  if (Buffer.byteLength(inDir) <= 100) return inDir
  return join(privateTempDir(), `${tempPrefix(abs)}${port}.sock`)
}

/**
 * Makes sure a socket outside the store goes into a directory only this user can enter: created 0700, and
 * refused (TR_PROXY_START_FAILED) when it is a symlink, someone else's, or open to others.
 */
async function assertPrivateSocketDir(socketPath: string): Promise<void> {
  const parent = dirname(socketPath)
  if (parent !== privateTempDir()) return
  const problem = await privateDirProblem(parent)
  if (problem) {
    throw new ToolReplayError(
      ErrorCodes.PROXY_START_FAILED,
      `Failed to start the control API on ${socketPath}: ${parent} is not a directory private to this user (${problem}), so another user could reach the socket. Remove that directory, or use a shorter --store path so the socket can live inside the store.`,
      { details: { socket: socketPath, directory: parent } },
    )
  }
}

function tempPrefix(absStore: string): string {
  return `tool-replay-control-${createHash('sha256').update(absStore).digest('hex').slice(0, 24)}-`
}

/** A named session as GET /status and GET /sessions show it. */
export interface NamedSessionStatus {
  name: string
  mode: string
  trace: string
  /** The proxy URL that selects it: `http://NAME:x@127.0.0.1:PORT`. */
  proxy: string
  header: { name: string; value: string }
  summary: SessionSummary
}

/** What GET /status answers. */
export interface ServeStatus {
  ok: boolean
  /** The default session's mode and trace; null on a sessions-only serve. */
  mode: string | null
  trace: string | null
  proxy: string
  pid: number
  socket: string
  /** The proxy CA certificate's path. */
  ca: string
  ended: boolean
  stats: unknown
  summary: SessionSummary | null
  /** Reverse-mode mounts: local base URL → upstream. */
  reverse: Array<{ name: string | null; url: string; upstream: string }>
  sessions: NamedSessionStatus[]
}

/**
 * The serves running on a store: every control socket of the store that answers GET /status (within
 * `timeoutMs`), sorted by port. Socket files left by a serve that died are skipped.
 */
export async function listServes(storeDir: string, timeoutMs = 2000): Promise<ServeStatus[]> {
  const abs = resolve(storeDir)
  const prefix = tempPrefix(abs)
  const sockets = [
    ...namesIn(abs)
      .filter((n) => SOCKET_NAME.test(n))
      .map((n) => join(abs, n)),
    ...namesIn(privateTempDir())
      .filter((n) => n.startsWith(prefix) && /^\d{1,5}\.sock$/.test(n.slice(prefix.length)))
      .map((n) => join(privateTempDir(), n)),
  ]
  const answers = await Promise.all(sockets.map((p) => getStatus(p, timeoutMs)))
  return answers.filter((a): a is ServeStatus => a !== undefined).sort((a, b) => Number(new URL(a.proxy).port) - Number(new URL(b.proxy).port))
}

function namesIn(dir: string): string[] {
  try {
    return readdirSync(dir)
  } catch {
    return []
  }
}

/** GET /status on a control socket; undefined when nothing answers there (a stale file, no listener). */
export function getStatus(socketPath: string, timeoutMs = 2000): Promise<ServeStatus | undefined> {
  return new Promise((resolvePromise) => {
    const req = request({ socketPath, method: 'GET', path: '/status', timeout: timeoutMs }, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (c: string) => {
        // A status is small; anything else on this socket is not ours.
        if (text.length < 1_000_000) text += c
      })
      res.on('end', () => {
        try {
          const body = JSON.parse(text) as ServeStatus
          resolvePromise(res.statusCode === 200 && typeof body.proxy === 'string' ? body : undefined)
        } catch {
          resolvePromise(undefined)
        }
      })
      res.on('error', () => resolvePromise(undefined))
    })
    req.on('timeout', () => req.destroy())
    req.on('error', () => resolvePromise(undefined))
    req.end()
  })
}

/** A running control API. */
export interface ControlApi {
  readonly socketPath: string
  close(): Promise<void>
}

/** Options for `startControlApi` (see ControlContext). */
export type ControlApiOptions = Omit<ControlContext, 'proxy' | 'socketPath'>

/**
 * Serves the control API for `proxy` on `socketPath`. After POST /session/end closed the default session the
 * proxy keeps answering, with the 403 refusal TR_STORE_CLOSED for every request that falls to it.
 */
export async function startControlApi(proxy: ProxyServer<Session | undefined>, socketPath: string, options: ControlApiOptions = {}): Promise<ControlApi> {
  await assertPrivateSocketDir(socketPath)
  const routes = createControlRoutes({ ...options, proxy, socketPath })
  const server: Server = createServer(routes.handle)
  // Another serve answering here (same port on another loopback address) keeps its socket; a socket file
  // left by a process that died would make listen fail with EADDRINUSE, so it goes.
  const other = await getStatus(socketPath, 1000)
  if (other) {
    throw new ToolReplayError(
      ErrorCodes.PROXY_START_FAILED,
      `Failed to start the control API on ${socketPath}: another \`tr-proxy serve\` (pid ${other.pid}, proxy ${other.proxy}, ${other.mode === null ? 'sessions only' : `${other.mode} of trace "${other.trace}"`}) answers there. Stop it, or give this serve another --port (each serve's control socket is named by its port).`,
      { details: { socket: socketPath, other: { pid: other.pid, proxy: other.proxy } } },
    )
  }
  rmSync(socketPath, { force: true })
  await new Promise<void>((resolveListen, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(
        new ToolReplayError(
          ErrorCodes.PROXY_START_FAILED,
          `Failed to start the control API on ${socketPath}: ${err.code ?? err.message}. Is another \`tr-proxy serve\` using this store?`,
          {
            cause: err,
          },
        ),
      ),
    )
    server.listen(socketPath, () => resolveListen())
  })
  return {
    socketPath,
    close: async () => {
      server.closeAllConnections()
      await new Promise<void>((r) => server.close(() => r()))
      rmSync(socketPath, { force: true })
    },
  }
}
