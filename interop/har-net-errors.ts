import type { ErrorPhase } from '../trace/index.ts'

/**
 * Browser network-error names (Chrome's `net::ERR_*`, as DevTools writes `_error` and Playwright writes
 * `_failureText`) mapped to the codes Node and undici give the same failure, so an imported failure replays
 * the way a Node client would have seen it: `fetch` rejects with `cause.code` set to this code.
 */
const BROWSER_ERRORS: Readonly<Record<string, { code: string; phase: ErrorPhase }>> = {
  'net::ERR_CONNECTION_REFUSED': { code: 'ECONNREFUSED', phase: 'connect' },
  'net::ERR_NAME_NOT_RESOLVED': { code: 'ENOTFOUND', phase: 'connect' },
  'net::ERR_NAME_RESOLUTION_FAILED': { code: 'EAI_AGAIN', phase: 'connect' },
  'net::ERR_ADDRESS_UNREACHABLE': { code: 'EHOSTUNREACH', phase: 'connect' },
  'net::ERR_INTERNET_DISCONNECTED': { code: 'ENETUNREACH', phase: 'connect' },
  'net::ERR_CONNECTION_TIMED_OUT': { code: 'ETIMEDOUT', phase: 'connect' },
  'net::ERR_TIMED_OUT': { code: 'ETIMEDOUT', phase: 'response-headers' },
  'net::ERR_CONNECTION_RESET': { code: 'ECONNRESET', phase: 'response-headers' },
  'net::ERR_CONNECTION_ABORTED': { code: 'ECONNABORTED', phase: 'response-headers' },
  // The server closed the connection without a response: undici calls that "other side closed".
  'net::ERR_CONNECTION_CLOSED': { code: 'UND_ERR_SOCKET', phase: 'response-headers' },
  'net::ERR_EMPTY_RESPONSE': { code: 'UND_ERR_SOCKET', phase: 'response-headers' },
  // The page (or the browser) cancelled the request.
  'net::ERR_ABORTED': { code: 'ABORT_ERR', phase: 'request' },
}

/** Node codes that mean no connection was made (a HAR written by Tool Replay carries Node codes). */
const CONNECT_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH'])

/**
 * A code-like token for an unknown error text, as trace/validate.ts requires (Firefox and WebKit write
 * sentences such as "Could not connect to the server."): other characters become `_`; the text itself is
 * kept in the recorded message.
 */
function asCode(text: string): string {
  const token = text
    .replace(/[^A-Za-z0-9_.:-]/g, '_')
    .replace(/^[^A-Za-z0-9]+/, '')
    .slice(0, 128)
  return token === '' ? 'ERR_HAR_FAILURE' : token
}

/**
 * The recorded failure for a HAR error text. `afterHead`: the response head had arrived (the entry has a
 * status), so the failure cut the body short. Unknown texts are kept verbatim as the code.
 */
export function errorFromBrowserText(text: string, afterHead: boolean): { code: string; phase: ErrorPhase } {
  const known = BROWSER_ERRORS[text]
  const code = known?.code ?? asCode(text)
  if (afterHead) return { code, phase: 'response-body' }
  if (known) return known
  return { code, phase: CONNECT_CODES.has(code) ? 'connect' : 'response-headers' }
}
