/**
 * Carrying a reverse-mode request through the forward proxy's machinery: the request is rewritten into the
 * absolute-form request a forward proxy would have received for the upstream (its URL and Host), so the
 * exchange handler, the engine and the trace see exactly what forward mode sees; redirects that point into
 * a mounted upstream are rewritten on the way back so the client stays on the proxy.
 */
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http'
import { localizeLocation, type ReverseRoutes } from './reverse-routes.ts'

/**
 * Points the request at `upstreamUrl`: `req.url` becomes that absolute URL and the Host field the upstream's
 * authority (the client sent the proxy's own, `127.0.0.1:PORT`), as an HTTP reverse proxy does.
 */
export function rewriteToUpstream(req: Pick<IncomingMessage, 'url' | 'rawHeaders'>, upstreamUrl: string): void {
  req.url = upstreamUrl
  const host = new URL(upstreamUrl).host
  const raw = req.rawHeaders
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if ((raw[i] as string).length === 4 && (raw[i] as string).toLowerCase() === 'host') raw[i + 1] = host
  }
}

/** The local origin a client used to reach the proxy (its Host field), for the URLs it is sent back. */
export function localOriginOf(req: Pick<IncomingMessage, 'rawHeaders'>, fallback: string): string {
  const raw = req.rawHeaders
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if ((raw[i] as string).toLowerCase() === 'host' && /^[A-Za-z0-9.:[\]-]+$/.test(raw[i + 1] as string)) return `http://${raw[i + 1]}`
  }
  return fallback
}

/**
 * Rewrites the `Location` field of the response head sent to the client (a live response or a replayed one)
 * with localizeLocation. Only what the client is sent changes: the recorder gets the upstream's head as is,
 * so the trace keeps the upstream's own Location and replays the same on every path.
 */
export function localizeRedirects(res: ServerResponse, routes: ReverseRoutes, upstreamUrl: string, localOrigin: string): void {
  const localize = (v: string) => localizeLocation(v, upstreamUrl, routes, localOrigin)
  const writeHead = res.writeHead
  // writeHead is the one door every response head goes through (playback, forwarding, refusals, errors).
  res.writeHead = function (this: ServerResponse, status: number, ...rest: unknown[]) {
    const set = this.getHeader('location')
    if (typeof set === 'string') this.setHeader('location', localize(set))
    const i = rest.length > 0 && typeof rest[0] !== 'string' && rest[0] !== undefined ? 0 : 1
    if (rest[i] !== undefined) rest[i] = rewriteLocation(rest[i], localize)
    return (writeHead as (this: ServerResponse, status: number, ...args: unknown[]) => ServerResponse).call(this, status, ...rest)
  } as ServerResponse['writeHead']
}

/** The headers argument of writeHead (an object, a flat [k, v, ...] array or [k, v] pairs) with Location rewritten. */
export function rewriteLocation(headers: unknown, localize: (value: string) => string): unknown {
  const isLocation = (name: unknown) => typeof name === 'string' && name.length === 8 && name.toLowerCase() === 'location'
  if (Array.isArray(headers)) {
    if (headers.length > 0 && Array.isArray(headers[0])) {
      return (headers as Array<[string, string]>).map(([k, v]) => (isLocation(k) ? [k, localize(String(v))] : [k, v]))
    }
    return headers.map((v, i) => (i % 2 === 1 && isLocation(headers[i - 1]) ? localize(String(v)) : v))
  }
  if (headers && typeof headers === 'object') {
    const out: OutgoingHttpHeaders = { ...(headers as OutgoingHttpHeaders) }
    for (const [k, v] of Object.entries(out)) if (isLocation(k) && typeof v === 'string') out[k] = localize(v)
    return out
  }
  return headers
}
