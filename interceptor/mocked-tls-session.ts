/**
 * msw completes every TLS connection it answers with an emulated handshake that reports a made-up TLS
 * session (the bytes "mocked session", `src/interceptors/net/socket-controller.ts`). Node's https.Agent
 * caches it and offers it on its next new connection to that origin, where OpenSSL cannot parse it and the
 * app's request fails (ERR_SSL_TOO_LONG, or "socket hang up"). Agents are asked for their cached session
 * through `_getSession()`; that answer is filtered so the fake one is dropped instead.
 *
 * @note The filter stays for the life of the process once installed: agents keep the fake session after
 * the capture is uninstalled, and the filter passes every real session through unchanged.
 */
import https from 'node:https'

const MOCKED_SESSION = Buffer.from('mocked session')

interface SessionCache {
  _getSession(key: string): Buffer | undefined
  _evictSession(key: string): void
}

let installed = false

/** Makes every https.Agent ignore (and forget) the fake TLS session msw's answered connections report. */
export function ignoreMockedTlsSessions(): void {
  if (installed) return
  installed = true
  const proto = https.Agent.prototype as unknown as SessionCache
  const getSession = proto._getSession
  proto._getSession = function getRealSession(this: SessionCache, key: string): Buffer | undefined {
    const session = getSession.call(this, key)
    // Node may wrap a session in its own header ("\0nodejs:tls:session:1..." and the server name): the fake
    // one ends with msw's bytes, which no DER-encoded session does.
    if (!session || session.length < MOCKED_SESSION.length || !MOCKED_SESSION.equals(session.subarray(session.length - MOCKED_SESSION.length))) return session
    this._evictSession(key)
    return undefined
  }
}
