/**
 * How a request names the proxy session it belongs to: the `x-tool-replay-session` header, or the user
 * of the proxy credentials in the proxy URL (`http://NAME:x@127.0.0.1:8080` makes clients send
 * `Proxy-Authorization: Basic base64("NAME:")`, on CONNECT too), so clients that cannot add headers
 * can still choose. Pure, apart from taking the header out of the request it was read from.
 */
import type { IncomingMessage } from 'node:http'
import { ErrorCodes, ToolReplayError } from '../trace/index.ts'

/** The request header that names a session; it is removed before the request is recorded or forwarded. */
export const SESSION_HEADER = 'x-tool-replay-session'

/** Session names: safe unescaped in a URL's user part, a header value and a file name. */
const SESSION_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/

/** The password in the proxy URLs Tool Replay hands out (`http://NAME:x@host:port`); ignored when read. */
export const SESSION_PASSWORD = 'x'

/** Throws TR_INVALID_OPTION unless `name` is a usable session name. */
export function assertSessionName(name: unknown): asserts name is string {
  if (typeof name === 'string' && SESSION_NAME.test(name)) return
  throw new ToolReplayError(
    ErrorCodes.INVALID_OPTION,
    `Invalid session name ${JSON.stringify(name)}: use 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit (it goes into proxy URLs as http://NAME:x@host:port).`,
  )
}

/** A session name made from any text (a trace name, a test file): disallowed characters become '-'. */
export function sessionNameFrom(text: string): string {
  const name = text
    .replace(/[^A-Za-z0-9._-]+/g, '-')
    .replace(/^[^A-Za-z0-9]+/, '')
    .slice(0, 128)
  return name || 'session'
}

/**
 * The user part of a `Basic` credential (`Proxy-Authorization: Basic base64("user:password")`), or undefined
 * when the value is not a Basic credential with a user. The password is ignored.
 */
export function basicCredentialUser(value: string): string | undefined {
  const m = /^\s*basic\s+([A-Za-z0-9+/=_-]+)\s*$/i.exec(value)
  if (!m) return undefined
  const decoded = Buffer.from(m[1] as string, 'base64').toString('utf8')
  const colon = decoded.indexOf(':')
  const user = colon === -1 ? decoded : decoded.slice(0, colon)
  return user === '' ? undefined : user
}

/**
 * The session a request names, header first, then its own proxy credentials. The header is taken out of
 * `req.rawHeaders` here, once, so it is never recorded nor forwarded (Proxy-Authorization is a proxy
 * field that the hop-by-hop rule already drops).
 */
export function takeSessionChoice(req: Pick<IncomingMessage, 'rawHeaders'>): string | undefined {
  const raw = req.rawHeaders
  let fromHeader: string | undefined
  let fromCredentials: string | undefined
  for (let i = 0; i + 1 < raw.length; ) {
    const name = raw[i] as string
    if (name.length === SESSION_HEADER.length && name.toLowerCase() === SESSION_HEADER) {
      fromHeader ??= (raw[i + 1] as string).trim()
      raw.splice(i, 2)
      continue
    }
    if (name.length === 19 && name.toLowerCase() === 'proxy-authorization') fromCredentials ??= basicCredentialUser(raw[i + 1] as string)
    i += 2
  }
  // An empty header names no session (the default one, if any), rather than falling back to the credentials.
  return fromHeader !== undefined ? fromHeader || undefined : fromCredentials
}
