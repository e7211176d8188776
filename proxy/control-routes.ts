/**
 * The routes of the control API (control-api.ts serves them on the serve's Unix socket):
 *   GET    /status         → { ok, mode, trace, proxy, pid, socket, ca, ended, stats, summary, reverse, sessions }
 *   POST   /session/end    → closes the default session; { ok, summary, unused }
 *   GET    /sessions       → { ok, sessions: [{ name, mode, trace, proxy, header, summary }] }
 *   POST   /sessions       → opens a named session from { name, trace, mode, recordAs?, tail?, keepUnused? }; 201
 *   DELETE /sessions/NAME  → closes it; { ok, name, summary, ledger, unused }
 * Errors are `{ ok: false, error: { code, message, details } }` with a status that fits the code.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Session, SessionSummary } from '../engine/index.ts'
import { type ErrorCode, ErrorCodes, isToolReplayError, parseJson, ToolReplayError } from '../trace/index.ts'
import type { ProxyServer } from './proxy-server.ts'
import { SESSION_HEADER, SESSION_PASSWORD } from './session-choice.ts'
import { parseSessionSpec, type SessionSpec } from './session-spec.ts'

/** What the routes act on. */
export interface ControlContext {
  proxy: ProxyServer<Session | undefined>
  socketPath: string
  /** Opens the engine session for a named session (the serve's store, redaction and labels); absent: POST /sessions is refused. */
  openSession?: (spec: SessionSpec) => Promise<Session>
  /** Runs after POST /session/end closed the default session. */
  onEnd?: (summary: SessionSummary) => void
  /** Runs after a named session was opened or closed (serve logs it). */
  onSession?: (event: { name: string; opened: boolean; summary?: SessionSummary }) => void
}

/** Largest request body the control API reads (a session request is a few hundred bytes). */
const MAX_CONTROL_BODY = 64 * 1024

const STATUS_BY_CODE: Partial<Record<ErrorCode, number>> = {
  [ErrorCodes.INVALID_OPTION]: 400,
  [ErrorCodes.PROXY_BAD_REQUEST]: 400,
  [ErrorCodes.SESSION_UNKNOWN]: 404,
  [ErrorCodes.TRACE_NOT_FOUND]: 404,
  [ErrorCodes.SESSION_EXISTS]: 409,
}

/** How a named session is shown: its name, what it serves, and how a client selects it. */
export function describeNamedSession(proxy: ProxyServer<Session | undefined>, name: string, session: Session) {
  const url = new URL(proxy.url)
  url.username = name
  // A password too: Node's fetch before undici 8 (Node 22, 24) sends no Proxy-Authorization for a user alone.
  url.password = SESSION_PASSWORD
  return {
    name,
    mode: session.mode,
    trace: session.trace,
    proxy: url.href.replace(/\/$/, ''),
    header: { name: SESSION_HEADER, value: name },
    summary: session.summary(),
  }
}

/** Returns the request listener of the control API. */
export function createControlRoutes(ctx: ControlContext): { handle: (req: IncomingMessage, res: ServerResponse) => void } {
  const { proxy } = ctx
  let ended: Promise<SessionSummary> | undefined
  const status = () => ({
    ok: true,
    mode: proxy.session?.mode ?? null,
    trace: proxy.session?.trace ?? null,
    proxy: proxy.url,
    pid: process.pid,
    socket: ctx.socketPath,
    ca: proxy.ca.certPath,
    ended: ended !== undefined,
    stats: proxy.stats,
    summary: proxy.session?.summary() ?? null,
    reverse: proxy.reverse?.describe(proxy.url) ?? [],
    sessions: proxy.sessions.list().map((s) => describeNamedSession(proxy, s.name, s.session)),
  })

  const endDefault = (): Promise<unknown> => {
    const session = proxy.session
    if (!session)
      throw new ToolReplayError(
        ErrorCodes.SESSION_UNKNOWN,
        'This serve has no default session (--sessions-only). Close named sessions with DELETE /sessions/NAME.',
      )
    ended ??= session.close().then((s) => {
      ctx.onEnd?.(s)
      return s
    })
    return ended.then((summary) => ({ ok: summary.ok, summary, unused: summary.unused }))
  }

  const open = async (req: IncomingMessage): Promise<[number, unknown]> => {
    if (!ctx.openSession) throw new ToolReplayError(ErrorCodes.INVALID_OPTION, 'This proxy does not open sessions through its control API.')
    const spec = parseSessionSpec(await readJson(req))
    const openSession = ctx.openSession
    const session = await proxy.sessions.open(spec.name, () => openSession(spec))
    ctx.onSession?.({ name: spec.name, opened: true })
    return [201, { ok: true, session: describeNamedSession(proxy, spec.name, session) }]
  }

  const close = async (name: string): Promise<unknown> => {
    const summary = await proxy.sessions.close(name)
    ctx.onSession?.({ name, opened: false, summary })
    return { ok: summary.ok, name, summary, ledger: [...summary.misses, ...summary.exhausted], unused: summary.unused }
  }

  const route = async (req: IncomingMessage): Promise<[number, unknown]> => {
    const path = (req.url ?? '/').split('?')[0] as string
    const sessionPath = /^\/sessions\/([^/]+)$/.exec(path)
    if (req.method === 'GET' && path === '/status') return [200, status()]
    if (req.method === 'POST' && path === '/session/end') return [200, await endDefault()]
    if (req.method === 'GET' && path === '/sessions') return [200, { ok: true, sessions: status().sessions }]
    if (req.method === 'POST' && path === '/sessions') return open(req)
    if (req.method === 'DELETE' && sessionPath) return [200, await close(sessionNameInPath(sessionPath[1] as string))]
    throw new ToolReplayError(
      ErrorCodes.PROXY_BAD_REQUEST,
      `No route ${req.method} ${path}. Use GET /status, POST /session/end, GET /sessions, POST /sessions or DELETE /sessions/NAME.`,
    )
  }

  const handle = (req: IncomingMessage, res: ServerResponse) => {
    // Only POST /sessions reads a body; any other is drained so the connection can be reused.
    if (!(req.method === 'POST' && req.url === '/sessions')) req.resume()
    const send = (code: number, body: unknown) => {
      const text = `${JSON.stringify(body)}\n`
      res.writeHead(code, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) })
      res.end(text)
    }
    route(req).then(
      ([code, body]) => send(code, body),
      (err: unknown) => {
        req.resume()
        const e = isToolReplayError(err) ? err : new ToolReplayError(ErrorCodes.INTERNAL, (err as Error)?.message ?? String(err), { cause: err })
        send(STATUS_BY_CODE[e.code] ?? 500, { ok: false, error: { code: e.code, message: e.message, ...(e.details ? { details: e.details } : {}) } })
      },
    )
  }
  return { handle }
}

/** Reads a small JSON body (TR_INVALID_OPTION when it is too big or not JSON). */
function readJson(req: IncomingMessage): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = []
    let size = 0
    req.on('data', (c: Buffer) => {
      size += c.byteLength
      if (size <= MAX_CONTROL_BODY) parts.push(c)
    })
    req.on('error', reject)
    req.on('end', () => {
      if (size > MAX_CONTROL_BODY) return reject(new ToolReplayError(ErrorCodes.INVALID_OPTION, `The request body is over ${MAX_CONTROL_BODY} bytes.`))
      try {
        resolve(parseJson(Buffer.concat(parts).toString('utf8')))
      } catch (err) {
        reject(new ToolReplayError(ErrorCodes.INVALID_OPTION, `The request body is not JSON: ${(err as Error).message}.`))
      }
    })
  })
}

/** The session name in `DELETE /sessions/NAME`, percent-decoded; a malformed escape is a bad request, not a crash. */
function sessionNameInPath(segment: string): string {
  try {
    return decodeURIComponent(segment)
  } catch {
    throw new ToolReplayError(
      ErrorCodes.INVALID_OPTION,
      `Invalid session name in the path: "${segment}" is not valid percent-encoding. Name the session as \`GET /sessions\` lists it.`,
    )
  }
}
