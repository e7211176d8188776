/**
 * The control API of `tr-proxy serve`: a tiny HTTP server on a Unix socket in the store directory, a
 * listener of its own, so nothing sent to the proxy port can ever reach it.
 *   GET  /status       → { ok, mode, trace, proxy, stats, summary }
 *   POST /session/end  → closes the session; { ok, summary, unused }
 */
import { createHash } from 'node:crypto'
import { rmSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import type { SessionSummary } from '../engine/index.ts'
import { ErrorCodes, ToolReplayError } from '../trace/index.ts'
import type { ProxyServer } from './proxy-server.ts'

/** `<store>/proxy-control.sock`, or a name in the temp dir when that path is too long for a Unix socket. */
export function controlSocketPath(storeDir: string): string {
  const abs = resolve(storeDir)
  const inDir = join(abs, 'proxy-control.sock')
  if (Buffer.byteLength(inDir) <= 100) return inDir
  return join(tmpdir(), `tool-replay-control-${createHash('sha256').update(abs).digest('hex').slice(0, 24)}.sock`)
}

/** A running control API. */
export interface ControlApi {
  readonly socketPath: string
  close(): Promise<void>
}

/**
 * Serves the control API for `proxy` on `socketPath`. `onEnd` runs after POST /session/end closed the
 * session (serve uses it to report; the proxy keeps answering, with the 403 refusal TR_STORE_CLOSED for every request).
 */
export async function startControlApi(proxy: ProxyServer, socketPath: string, onEnd?: (summary: SessionSummary) => void): Promise<ControlApi> {
  let ended: Promise<SessionSummary> | undefined
  const server: Server = createServer((req, res) => {
    const send = (status: number, body: unknown) => {
      const text = `${JSON.stringify(body)}\n`
      res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) })
      res.end(text)
    }
    req.resume()
    const route = `${req.method} ${req.url}`
    if (route === 'GET /status') {
      send(200, {
        ok: true,
        mode: proxy.session.mode,
        trace: proxy.session.trace,
        proxy: proxy.url,
        ended: ended !== undefined,
        stats: proxy.stats,
        summary: proxy.session.summary(),
      })
    } else if (route === 'POST /session/end') {
      ended ??= proxy.session.close().then((s) => {
        onEnd?.(s)
        return s
      })
      ended.then(
        (summary) => send(200, { ok: summary.ok, summary, unused: summary.unused }),
        (err: Error & { code?: string }) => send(500, { ok: false, error: { code: err.code ?? ErrorCodes.INTERNAL, message: err.message } }),
      )
    } else {
      send(404, { ok: false, error: { code: ErrorCodes.PROXY_BAD_REQUEST, message: `No route ${route}. Use GET /status or POST /session/end.` } })
    }
  })
  // A socket file left by a process that died would make listen fail with EADDRINUSE.
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
