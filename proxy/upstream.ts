import { isIP, connect as netConnect, type Socket } from 'node:net'
import { rootCertificates, connect as tlsConnect } from 'node:tls'
import type { Agent } from 'undici'
import { LazyAgent, type Undici } from '../capture/index.ts'
import { ErrorCodes, ToolReplayError } from '../trace/index.ts'

/** How the proxy reaches upstreams. */
export interface UpstreamOptions {
  /** Extra CA certificates (PEM) trusted for upstream TLS, on top of Node's roots (`--upstream-ca FILE`). */
  ca?: string | Buffer
  /** Skip upstream certificate verification (`--insecure-upstream`). Off by default. */
  insecure?: boolean
  /** Host mapping: `api.test` → 127.0.0.1:8443 (`--resolve api.test=127.0.0.1:8443`). TLS still verifies `api.test`. */
  resolve?: Record<string, { host: string; port: number }>
  /** Connect timeout in ms (default 10000). */
  connectTimeoutMs?: number
  /** Wait for a response head at most this long, in ms (default: undici's, 300000). */
  headersTimeoutMs?: number
  /** Wait for the next piece of a response body at most this long, in ms (default: undici's, 300000). */
  bodyTimeoutMs?: number
}

/** A mapping target for a request to `hostname:port`, or the host itself. */
export function mapHost(options: UpstreamOptions, hostname: string, port: number): { host: string; port: number } {
  const bare = hostname.replace(/^\[|\]$/g, '').toLowerCase()
  return options.resolve?.[`${bare}:${port}`] ?? options.resolve?.[bare] ?? { host: bare, port }
}

/**
 * Parses `--resolve` values: `host=ip:port`, `host:port=ip:port` or `host=ip` (port kept).
 * @example parseResolve(['api.test=127.0.0.1:8443']) // { 'api.test': { host: '127.0.0.1', port: 8443 } }
 */
export function parseResolve(values: readonly string[]): Record<string, { host: string; port: number }> {
  const out: Record<string, { host: string; port: number }> = {}
  for (const value of values) {
    const m = /^([^=\s]+)=(\[[^\]]+\]|[^:\s]+)(?::(\d+))?$/.exec(value)
    const port = m?.[3] === undefined ? undefined : Number(m[3])
    if (!m || (port !== undefined && (port < 1 || port > 65535))) {
      throw new ToolReplayError(ErrorCodes.INVALID_OPTION, `Invalid --resolve "${value}": expected HOST=ADDRESS:PORT, e.g. --resolve api.test=127.0.0.1:8443.`)
    }
    const [, from, to] = m as unknown as [string, string, string]
    const key = from.toLowerCase()
    const defaultPort = /:(\d+)$/.exec(key)?.[1]
    out[key] = { host: to.replace(/^\[|\]$/g, ''), port: port ?? Number(defaultPort ?? 0) }
  }
  return out
}

/** The proxy's upstream: its undici Agent (createUpstreamAgent), made at the first forward (capture's LazyAgent). */
export function lazyUpstreamAgent(options: UpstreamOptions): LazyAgent {
  return new LazyAgent((undici) => createUpstreamAgent(options, undici))
}

/**
 * An undici Agent for the proxy's own upstream calls. It is a plain Agent, so HTTP(S)_PROXY and
 * NODE_USE_ENV_PROXY in the proxy's environment never apply (no proxy loops), and it speaks HTTP/1.1
 * only, like the client side.
 */
export function createUpstreamAgent(options: UpstreamOptions, undici: Pick<Undici, 'Agent' | 'buildConnector'>): Agent {
  const { Agent, buildConnector } = undici
  const base = buildConnector({
    allowH2: false,
    timeout: options.connectTimeoutMs ?? 10_000,
    rejectUnauthorized: !options.insecure,
    ...(options.ca ? { ca: [...tlsRootCertificates(), String(options.ca)] } : {}),
  })
  return new Agent({
    allowH2: false,
    ...(options.headersTimeoutMs !== undefined ? { headersTimeout: options.headersTimeoutMs } : {}),
    ...(options.bodyTimeoutMs !== undefined ? { bodyTimeout: options.bodyTimeoutMs } : {}),
    connect: (opts, callback) => {
      const port = Number(opts.port) || (opts.protocol === 'https:' ? 443 : 80)
      const target = mapHost(options, opts.hostname, port)
      const servername = opts.servername || (isIP(opts.hostname.replace(/^\[|\]$/g, '')) ? undefined : opts.hostname)
      base({ ...opts, hostname: target.host, port: String(target.port || port), ...(servername ? { servername } : {}) }, callback)
    },
  })
}

/** Opens a raw (TLS when `secure`) connection to an upstream, for WebSocket pass-through. */
export function connectRaw(options: UpstreamOptions, hostname: string, port: number, secure: boolean): Promise<Socket> {
  const target = mapHost(options, hostname, port)
  return new Promise((resolve, reject) => {
    const bare = hostname.replace(/^\[|\]$/g, '')
    const socket = secure
      ? tlsConnect({
          host: target.host,
          port: target.port || port,
          ...(isIP(bare) ? {} : { servername: bare }),
          rejectUnauthorized: !options.insecure,
          ALPNProtocols: ['http/1.1'],
          ...(options.ca ? { ca: [...tlsRootCertificates(), String(options.ca)] } : {}),
        })
      : netConnect({ host: target.host, port: target.port || port })
    socket.once(secure ? 'secureConnect' : 'connect', () => {
      socket.off('error', reject)
      resolve(socket)
    })
    socket.once('error', reject)
  })
}

function tlsRootCertificates(): readonly string[] {
  // Passing `ca` replaces Node's roots; keep them so --upstream-ca adds rather than replaces.
  return rootCertificates
}
