/**
 * node:http2 is a transport the interceptor does not capture (undici's dispatcher and @mswjs/interceptors see
 * HTTP/1.1 only). Left alone, an HTTP/2 client (the AWS SDK's default NodeHttp2Handler, gRPC) would reach the
 * network in strict replay and go unrecorded in record mode. So while the interceptor is installed,
 * `http2.connect` refuses with TR_CAPTURE_UNAVAILABLE (counted as a miss by a strict replay) unless the app
 * asked for HTTP/2 to go out untouched (`install({ http2: false, nodeHttp: false })`: with node:http captured,
 * @mswjs/interceptors' socket interception reads every client socket as HTTP/1.1 and holds an HTTP/2 one).
 */
import type { connect } from 'node:http2'
import { syncBuiltinESMExports } from 'node:module'
import type { Session } from '../engine/index.ts'
import { ErrorCodes, ToolReplayError } from '../trace/index.ts'

/** Installs the refusing `http2.connect` (also for `import { connect } from 'node:http2'`); returns the undo. */
export function installHttp2Guard(session: Pick<Session, 'refuse'>): () => void {
  // Taken here, not imported: node:http2 (with tls and crypto) loads only when install() runs.
  const http2 = process.getBuiltinModule('node:http2')
  const original = http2.connect
  const guarded = function connect(authority: string | URL | { protocol?: string; host?: string; hostname?: string; port?: number | string }): never {
    const url = authorityUrl(authority)
    const error = http2Refusal(url)
    session.refuse({ method: 'CONNECT', url }, error)
    throw error
  } as unknown as typeof connect
  http2.connect = guarded
  syncBuiltinESMExports()
  return () => {
    if (http2.connect !== guarded) return
    http2.connect = original
    syncBuiltinESMExports()
  }
}

function authorityUrl(authority: unknown): string {
  if (typeof authority === 'string') return authority
  if (authority instanceof URL) return authority.href
  const a = (authority ?? {}) as { protocol?: string; host?: string; hostname?: string; port?: number | string }
  const host = a.host ?? `${a.hostname ?? 'localhost'}${a.port !== undefined ? `:${a.port}` : ''}`
  return `${a.protocol ?? 'https:'}//${host}`
}

function http2Refusal(url: string): ToolReplayError {
  return new ToolReplayError(
    ErrorCodes.CAPTURE_UNAVAILABLE,
    `Tool Replay does not capture HTTP/2: the node:http2 connection to ${url} was refused so that nothing goes out unrecorded or unreplayed. Make this client use HTTP/1.1 (AWS SDK v3: requestHandler: new NodeHttpHandler() from @smithy/node-http-handler), run the app through tr-proxy, or pass http2: false and nodeHttp: false to install() to let node:http2 go out untouched (the node:http capture reads sockets as HTTP/1.1 and would hold an HTTP/2 connection).`,
  )
}
