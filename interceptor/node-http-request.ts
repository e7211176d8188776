/**
 * What the node:http capture reads from one request @mswjs/interceptors parsed off an app's socket: the
 * headers and body the engine matches on, and how the app would have reached its upstream (the TLS
 * options and Unix socket of its `http.ClientRequest`), so a forwarded request goes where the app's would.
 */
import { type ConnectionOptions, TLSSocket } from 'node:tls'
import { type HeaderPairs, headerValue, stripHopByHop } from '../trace/index.ts'
import { type BufferedBody, bufferBody } from './request-capture.ts'

const { ClientRequest } = process.getBuiltinModule('node:http') // not `import`: see trace/patch.ts

/**
 * The request's header fields as sent on the wire, without hop-by-hop fields (as the proxy records them).
 * @note msw hands a Fetch `Headers` (names lowercased, repeats joined with ", "); a request's repeated
 * fields join losslessly that way (RFC 9110 §5.3), which is also how identity compares them.
 */
export function requestHeaderPairs(request: Request): HeaderPairs {
  return stripHopByHop(allHeaderPairs(request))
}

/** Every header field of the request, hop-by-hop ones included. */
export function allHeaderPairs(request: Request): HeaderPairs {
  const pairs: HeaderPairs = []
  request.headers.forEach((value, name) => {
    pairs.push([name, value])
  })
  return pairs
}

/** Buffers the request body (at most `max` bytes, else `tooLarge()`); a value for bodiless requests, else a promise. */
export function bufferRequestBody(request: Request, headers: HeaderPairs, max: number, tooLarge: () => Error): BufferedBody | Promise<BufferedBody> {
  return bufferBody(request.body, headerValue(headers, 'content-type'), max, tooLarge)
}

/** TLS and socket options an app's request connects with, carried over to the forwarded request. */
const CARRIED_OPTIONS = [
  'ca',
  'cert',
  'key',
  'pfx',
  'passphrase',
  'crl',
  'rejectUnauthorized',
  'servername',
  'ciphers',
  'sigalgs',
  'ecdhCurve',
  'minVersion',
  'maxVersion',
  'secureProtocol',
  'secureOptions',
  'honorCipherOrder',
  'lookup',
  'family',
  'hints',
  'localAddress',
] as const

/** How the app's request reaches its upstream, for forwarding it the same way. */
export interface UpstreamRoute {
  /** TLS (and DNS) options of the app's connection; empty for plain HTTP. */
  tls: Partial<ConnectionOptions>
  /** The Unix socket the app's request went to (`socketPath`), if any. */
  socketPath?: string
}

/**
 * Reads the route of the app's `http.ClientRequest` (msw's request initiator) to `url`. Its TLS socket keeps the
 * options it was made with (the agent's and the request's: `ca`, `rejectUnauthorized`, client
 * certificates, a custom `lookup`) under Node's `connect-options` symbol, which msw reads the same way
 * for its own passthrough. The session and `checkServerIdentity` are left out: both may be msw's mocks.
 * Other clients' options (a custom `lookup` for plain HTTP, `createConnection`) are not visible here.
 */
export function upstreamRoute(initiator: unknown, url: URL): UpstreamRoute {
  // msw's initiator may be an earlier request (see node-http-response.ts, socketOf): its route is taken only
  // when it went to this request's origin.
  if (!(initiator instanceof ClientRequest) || initiator.host !== url.hostname.replace(/^\[|\]$/g, '')) return { tls: {} }
  const socketPath = (initiator as InstanceType<typeof ClientRequest> & { socketPath?: unknown }).socketPath
  const route: UpstreamRoute = { tls: {}, ...(typeof socketPath === 'string' ? { socketPath } : {}) }
  const options = connectOptionsOf(initiator.socket)
  const port = url.port || (url.protocol === 'https:' ? '443' : '80')
  if (!options || String(options.port) !== port) return route
  const tls: Record<string, unknown> = {}
  for (const name of CARRIED_OPTIONS) if (options[name] !== undefined) tls[name] = options[name]
  route.tls = tls as Partial<ConnectionOptions>
  return route
}

/** The options a TLS socket was made with (Node keeps them under its `connect-options` symbol); undefined for others. */
export function connectOptionsOf(socket: unknown): Record<string, unknown> | undefined {
  if (!(socket instanceof TLSSocket)) return undefined
  const key = Object.getOwnPropertySymbols(socket).find((s) => s.description === 'connect-options')
  return key ? (Reflect.get(socket, key) as Record<string, unknown> | undefined) : undefined
}
