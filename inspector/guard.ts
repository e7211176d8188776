/**
 * Who may talk to the inspector: every request must carry the session token (query `token`, header, or the
 * cookie the page gets) and a Host header naming the inspector itself (a DNS-rebinding page has the attacker's
 * host there); a request that changes anything (POST) must also come from the inspector's own origin and
 * carry the token in a header: a cookie alone is sent by any page the browser has open.
 */
import { timingSafeEqual } from 'node:crypto'
import { ErrorCodes, ToolReplayError } from '../trace/index.ts'

/** Header the page sends the token in. */
export const TOKEN_HEADER = 'x-tool-replay-token'
/** Cookie the page gets when it is opened with the token in its URL. */
export const TOKEN_COOKIE = 'tr_inspect'

/** What the guard reads of a request. */
export interface GuardedRequest {
  method: string
  host: string | undefined
  origin: string | undefined
  /** `token` from the query string. */
  queryToken: string | null
  headerToken: string | undefined
  cookie: string | undefined
}

/** What the request is checked against. */
export interface GuardPolicy {
  token: string
  /** Host header values accepted (host:port forms of the address the inspector listens on). */
  hosts: ReadonlySet<string>
  /** Origins accepted on mutating calls. */
  origins: ReadonlySet<string>
}

/** The Host values and origins a server on `host:port` answers to. */
export function policyFor(token: string, host: string, port: number): GuardPolicy {
  const names = new Set([host, host.includes(':') ? `[${host}]` : host])
  if (host === '127.0.0.1' || host === '::1') names.add('localhost')
  const hosts = new Set([...names].filter((n) => n !== '::1').map((n) => `${n}:${port}`))
  return { token, hosts, origins: new Set([...hosts].map((h) => `http://${h}`)) }
}

/** The request's token from the cookie header, if any. */
export function cookieToken(cookie: string | undefined): string | undefined {
  for (const part of (cookie ?? '').split(';')) {
    const [k, ...v] = part.trim().split('=')
    if (k === TOKEN_COOKIE) return v.join('=')
  }
  return undefined
}

function sameToken(a: string | null | undefined, b: string): boolean {
  if (typeof a !== 'string' || a.length !== b.length) return false
  return timingSafeEqual(Buffer.from(a), Buffer.from(b))
}

/** Throws TR_INSPECT_REFUSED (with the HTTP status in details) when the request may not proceed. */
export function checkRequest(r: GuardedRequest, policy: GuardPolicy): void {
  if (r.host === undefined || !policy.hosts.has(r.host.toLowerCase())) {
    throw refused(
      403,
      `Refused a request for host "${r.host ?? ''}": the inspector answers only to ${[...policy.hosts].join(', ')} (a page on another name could be DNS rebinding). Open the URL tr-proxy inspect printed.`,
    )
  }
  const mutating = r.method !== 'GET' && r.method !== 'HEAD'
  if (mutating) {
    if (r.origin === undefined || !policy.origins.has(r.origin)) {
      throw refused(403, `Refused a ${r.method} from origin "${r.origin ?? '(none)'}": changes are accepted only from the inspector's own page.`)
    }
    if (!sameToken(r.headerToken, policy.token)) {
      throw refused(
        401,
        `Refused a ${r.method} without the inspector's token in the ${TOKEN_HEADER} header. Reload the page from the URL tr-proxy inspect printed.`,
      )
    }
    return
  }
  if (sameToken(r.queryToken, policy.token) || sameToken(r.headerToken, policy.token) || sameToken(cookieToken(r.cookie), policy.token)) return
  throw refused(401, 'Refused a request without the inspector\'s token. Open the URL tr-proxy inspect printed (it carries "?token=...").')
}

function refused(status: number, message: string): ToolReplayError {
  return new ToolReplayError(ErrorCodes.INSPECT_REFUSED, message, { details: { status } })
}
