/**
 * A session of one's own on a shared, running `tr-proxy serve`: opened and closed through its control API,
 * selected by the proxy credentials in the proxy URL it hands out (`http://NAME:x@127.0.0.1:8080`). What test
 * setups use to give every test file its own trace on one proxy (proxy-test-setup.ts), and what
 * `tr-proxy session open|close` calls.
 */
import { readFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { rootCertificates } from 'node:tls'
import type { Dispatcher } from 'undici'
import type { Mode, SessionSummary } from '../engine/index.ts'
import { defaultStoreDir } from '../store/index.ts'
import { type ErrorCode, ErrorCodes, parseJson, ToolReplayError } from '../trace/index.ts'
import { controlSocketPath, type NamedSessionStatus } from './control-api.ts'
import { proxyEnvironment } from './proxy-env.ts'
import type { SessionSpec } from './session-spec.ts'

const { request } = process.getBuiltinModule('node:http') // not `import`: see trace/patch.ts

/** Where the shared proxy is: its URL (TOOL_REPLAY_PROXY) and its store (TOOL_REPLAY_STORE), or its control socket. */
export interface SharedProxyAddress {
  /** The serve's proxy URL, e.g. `http://127.0.0.1:8080`; its port names the control socket. Default TOOL_REPLAY_PROXY. */
  proxy?: string
  /** The serve's store directory (the control socket lives there). Default TOOL_REPLAY_STORE, else `.tool-replay/store`. */
  storeDir?: string
  /** The control socket itself, when known (overrides proxy + storeDir). */
  control?: string
  /** Variables to read; default process.env. */
  env?: Record<string, string | undefined>
}

/** A session opened on a shared proxy. */
export interface SharedProxySession {
  readonly name: string
  readonly mode: Mode
  readonly trace: string
  /** The proxy URL that selects this session: `http://NAME:x@127.0.0.1:PORT`. */
  readonly proxyUrl: string
  /** The proxy CA certificate (PEM file) a client must trust for HTTPS. */
  readonly caPath: string
  /** Environment for a child process: proxy variables with this session's credentials, and the CA files. */
  readonly env: Record<string, string>
  /** A dispatcher (undici ProxyAgent) that sends this process's requests through the session. */
  readonly dispatcher: Dispatcher
  /** Closes the session on the proxy (its trace completes) and resolves with its summary. Idempotent. */
  close(): Promise<SessionSummary>
}

/** How long a control call may take: opening a session loads its trace, which for a big one takes a while. */
const CONTROL_TIMEOUT_MS = 60_000

/** The control socket of the shared proxy an address names. */
export function sharedControlSocket(address: SharedProxyAddress = {}): string {
  if (address.control) return address.control
  const env = address.env ?? process.env
  const proxy = address.proxy ?? env.TOOL_REPLAY_PROXY
  if (!proxy) {
    throw new ToolReplayError(
      ErrorCodes.INVALID_OPTION,
      'No shared proxy named: set TOOL_REPLAY_PROXY to the URL `tr-proxy serve` prints (e.g. http://127.0.0.1:8080), and TOOL_REPLAY_STORE to its store if it is not .tool-replay/store.',
    )
  }
  let port: number
  try {
    const url = new URL(proxy)
    port = Number(url.port || (url.protocol === 'https:' ? 443 : 80))
  } catch {
    throw new ToolReplayError(
      ErrorCodes.INVALID_OPTION,
      `TOOL_REPLAY_PROXY "${proxy}" is not a URL: give the proxy URL \`tr-proxy serve\` prints, e.g. http://127.0.0.1:8080.`,
    )
  }
  return controlSocketPath(address.storeDir || env.TOOL_REPLAY_STORE || defaultStoreDir(), port)
}

/**
 * One call to a serve's control API. Resolves with the JSON answer; an error answer rejects with its
 * ToolReplayError (same code and message); no answer rejects with TR_PROXY_START_FAILED naming the socket.
 */
export function controlCall(socketPath: string, method: string, path: string, body?: unknown): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const text = body === undefined ? undefined : JSON.stringify(body)
    const req = request(
      {
        socketPath,
        method,
        path,
        // A connection per call: a kept-alive one the serve closed while a test file ran (its keep-alive
        // timeout) fails the next call with EPIPE.
        agent: false,
        timeout: CONTROL_TIMEOUT_MS,
        headers: text === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) },
      },
      (res) => {
        const parts: Buffer[] = []
        res.on('data', (c: Buffer) => parts.push(c))
        res.on('error', reject)
        res.on('end', () => {
          let answer: Record<string, unknown>
          try {
            answer = parseJson(Buffer.concat(parts).toString('utf8')) as Record<string, unknown>
          } catch {
            return reject(
              new ToolReplayError(
                ErrorCodes.PROXY_START_FAILED,
                `The control socket ${socketPath} answered ${method} ${path} with something that is not JSON.`,
              ),
            )
          }
          const error = answer.error as { code?: string; message?: string; details?: Record<string, unknown> } | undefined
          if ((res.statusCode ?? 500) >= 400 && error) {
            return reject(
              new ToolReplayError(
                (error.code ?? ErrorCodes.INTERNAL) as ErrorCode,
                error.message ?? 'control API error',
                error.details ? { details: error.details } : {},
              ),
            )
          }
          resolve(answer)
        })
      },
    )
    req.on('timeout', () => req.destroy(new Error(`no answer within ${CONTROL_TIMEOUT_MS} ms`)))
    req.on('error', (err: NodeJS.ErrnoException) =>
      reject(
        new ToolReplayError(
          ErrorCodes.PROXY_START_FAILED,
          `Failed to reach the control API of \`tr-proxy serve\` at ${socketPath}: ${err.code ?? err.message}. Is the serve running (\`tr-proxy serve --list\`), and are TOOL_REPLAY_PROXY / TOOL_REPLAY_STORE its URL and store?`,
          { cause: err },
        ),
      ),
    )
    req.end(text)
  })
}

/**
 * Opens a named session on a running `tr-proxy serve`.
 * @example
 * const s = await openSharedSession({ name: 'checkout', trace: 'checkout', mode: 'replay' }, { proxy: 'http://127.0.0.1:8080' })
 * // children: spawn(cmd, { env: { ...process.env, ...s.env } }); this process: fetch(url, { dispatcher: s.dispatcher })
 * const summary = await s.close()
 */
export async function openSharedSession(spec: Partial<SessionSpec> & { name: string }, address: SharedProxyAddress = {}): Promise<SharedProxySession> {
  const socket = sharedControlSocket(address)
  const status = await controlCall(socket, 'GET', '/status')
  const caPath = status.ca as string
  // Read before the session opens, so a failure here never leaves a session open on the serve.
  const caPem = await readFile(caPath, 'utf8')
  // undici is imported here, not when the proxy's CLI (which imports this module) starts.
  const { ProxyAgent } = await import('undici')
  const answer = await controlCall(socket, 'POST', '/sessions', spec)
  const session = answer.session as NamedSessionStatus
  // Written next to the CA by the serve (proxy-env.ts writeCaBundle).
  const bundlePath = join(dirname(caPath), 'bundle.pem')
  const dispatcher = new ProxyAgent({ uri: session.proxy, requestTls: { ca: [...rootCertificates, caPem] } })
  let closed: Promise<SessionSummary> | undefined
  return {
    name: session.name,
    mode: session.mode as Mode,
    trace: session.trace,
    proxyUrl: session.proxy,
    caPath,
    env: proxyEnvironment({ proxyUrl: session.proxy, caPath, bundlePath }),
    dispatcher,
    close() {
      closed ??= (async () => {
        await dispatcher.close().catch(() => {})
        const done = await controlCall(socket, 'DELETE', `/sessions/${encodeURIComponent(session.name)}`)
        return done.summary as SessionSummary
      })()
      return closed
    },
  }
}
