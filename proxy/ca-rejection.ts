/**
 * A client that does not trust the proxy CA only prints its own TLS error ("self-signed certificate in chain",
 * "unknown issuer"); the proxy is the one place that can say which host and how to fix it. This file tells a
 * rejection from other handshake failures and words the one line the proxy logs per host.
 */
import type { TLSSocket } from 'node:tls'

/** What the proxy saw of a client rejecting the certificate it was shown for `host`. */
export interface CaRejection {
  /** The host the leaf certificate was made for (the CONNECT target). */
  host: string
  /** The TLS alert the client sent (`unknown_ca`, `bad_certificate`, `certificate_unknown`), or how it left. */
  cause: string
}

/** OpenSSL error codes of the alerts a client sends when it does not trust the certificate chain. */
const REJECTION_ALERTS: ReadonlyArray<[RegExp, string]> = [
  [/ALERT_UNKNOWN_CA$/, 'unknown_ca'],
  [/ALERT_BAD_CERTIFICATE$/, 'bad_certificate'],
  [/ALERT_CERTIFICATE_UNKNOWN$/, 'certificate_unknown'],
]

/** The rejection alert named by a TLS error's code (`ERR_SSL_TLSV1_ALERT_UNKNOWN_CA`...), or undefined for any other error. */
export function rejectionAlert(err: { code?: string } | undefined): string | undefined {
  const code = err?.code ?? ''
  return REJECTION_ALERTS.find(([pattern]) => pattern.test(code))?.[1]
}

/** Hosts reported per proxy: enough for any real run, bounded so a client trying endless names cannot grow it. */
const MAX_REPORTED_HOSTS = 1024

/**
 * Watches an intercepted handshake and calls `report` when the client rejected the certificate: an alert
 * naming the CA (curl, Python, Go, OpenSSL clients), or the client ending the connection before the handshake
 * finished (Node checks the chain after the server's Finished and hangs up without an alert). A handshake cut by
 * the proxy itself (timeout, close) ends without the client's FIN and is not reported. Listeners only: nothing is
 * added to an exchange's path once the handshake is done.
 */
export function watchHandshake(tlsSocket: TLSSocket, host: string, report: (rejection: CaRejection) => void): void {
  let settled = false
  const settle = (cause: string | undefined) => {
    if (settled) return
    settled = true
    tlsSocket.off('end', onEnd)
    if (cause) report({ host, cause })
  }
  const onEnd = () => settle('the client closed the connection during the TLS handshake')
  tlsSocket.once('secure', () => settle(undefined))
  tlsSocket.once('end', onEnd)
  tlsSocket.once('error', (err: NodeJS.ErrnoException) => {
    const alert = rejectionAlert(err)
    settle(alert ? `TLS alert ${alert}` : undefined)
  })
}

/** Keeps the report to one line per host (per proxy). */
export function oncePerHost(report: (rejection: CaRejection) => void): (rejection: CaRejection) => void {
  const seen = new Set<string>()
  return (rejection) => {
    const host = rejection.host.toLowerCase()
    if (seen.has(host) || seen.size >= MAX_REPORTED_HOSTS) return
    seen.add(host)
    report(rejection)
  }
}

/**
 * The line the proxy logs: the host, what the client did, and the fix per client.
 * @example
 * caRejectionLine({ host: 'api.test', cause: 'TLS alert unknown_ca' }, '/s/ca/ca.pem', '/s/ca/bundle.pem')
 */
export function caRejectionLine(rejection: CaRejection, caPath: string, bundlePath: string): string {
  return (
    `WARNING: a client rejected the proxy's certificate for ${rejection.host} (${rejection.cause}): it does not trust the Tool Replay CA. ` +
    `Trust it per client: Node NODE_EXTRA_CA_CERTS=${caPath}; Python requests REQUESTS_CA_BUNDLE=${bundlePath}; ` +
    `OpenSSL, Go, Ruby SSL_CERT_FILE=${bundlePath}; curl --cacert ${bundlePath} (or CURL_CA_BUNDLE). ` +
    '`tr-proxy record|replay -- <command>` sets these for the command; a client that ignores them needs its own CA option.'
  )
}
