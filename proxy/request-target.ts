/**
 * Where a request to the proxy is going: its absolute URL, from an absolute-form request line or from the
 * CONNECT tunnel it arrived through plus an origin-form path. Pure.
 */
import type { IncomingMessage } from 'node:http'

/** The origin a CONNECT tunnel was opened to, for requests that arrive through it. */
export interface TunnelTarget {
  scheme: 'http' | 'https'
  /** host[:port] as the client named it in CONNECT. */
  authority: string
}

/** The string `new URL` parses for a request: its absolute-form target, or the tunnel's origin plus the path. */
export function urlInput(rawUrl: string, target: TunnelTarget | undefined): string | undefined {
  if (/^https?:\/\//i.test(rawUrl)) return rawUrl
  if (!target || !rawUrl.startsWith('/')) return undefined
  return `${target.scheme}://${target.authority}${rawUrl}`
}

/** The request's absolute URL, or undefined when it is neither absolute nor inside a tunnel. */
export function requestUrl(req: Pick<IncomingMessage, 'url'>, target: TunnelTarget | undefined): URL | undefined {
  const input = urlInput(req.url ?? '', target)
  if (input === undefined) return undefined
  try {
    return new URL(input)
  } catch {
    return undefined
  }
}

const HREF_CACHE_SIZE = 1024

/**
 * A resolver of a request's normalized href (`new URL(...).href`), cached: clients repeat the same few URLs,
 * and parsing one per request was a visible share of a replayed request's cost.
 */
export function createHrefResolver(): (req: Pick<IncomingMessage, 'url'>, target: TunnelTarget | undefined) => string | undefined {
  /** Request URL as sent → its normalized href (null: not a valid URL). */
  const hrefs = new Map<string, string | null>()
  return (req, target) => {
    const input = urlInput(req.url ?? '', target)
    if (input === undefined) return undefined
    let href = hrefs.get(input)
    if (href === undefined) {
      href = requestUrl(req, target)?.href ?? null
      if (hrefs.size >= HREF_CACHE_SIZE) hrefs.clear()
      hrefs.set(input, href)
    }
    return href ?? undefined
  }
}

/** Parses a CONNECT target `host:port` (IPv6 in brackets); undefined when it is not one. */
export function parseAuthority(authority: string): { hostname: string; port: number } | undefined {
  const m = /^(\[[0-9a-fA-F:.]+\]|[^:/\s[\]]+):(\d{1,5})$/.exec(authority)
  if (!m) return undefined
  const port = Number(m[2])
  if (port < 1 || port > 65535) return undefined
  return { hostname: (m[1] as string).replace(/^\[|\]$/g, ''), port }
}
