/**
 * HTTP/2 with prior knowledge (h2c, RFC 9113 3.3): a cleartext connection that opens with the HTTP/2
 * preface instead of an HTTP/1.1 request. Inside a CONNECT tunnel the first bytes say so (tunnels.ts); on the
 * proxy's own port Node's HTTP/1.1 parser meets the preface first and stops with HPE_PAUSED_H2_UPGRADE, and
 * the connection is taken from it here, with the bytes it read, for the HTTP/2 server (`--h2c`: reverse mode
 * for clients that speak HTTP/2 in cleartext, such as gRPC's insecure channels and the AWS SDK's HTTP/2
 * handler pointed at an http:// endpoint). A transparent listener calls `startsWithHttp2Preface` on a
 * connection's first bytes and hands it to the HTTP/2 server the same way.
 */
import type { Socket } from 'node:net'

/** The client connection preface of HTTP/2 (its first line is what an HTTP/1.1 parser reads as a request line). */
export const HTTP2_PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1')

/** True when `bytes` open with the HTTP/2 preface (or are a start of it: a short first read). */
export function startsWithHttp2Preface(bytes: Uint8Array): boolean {
  const n = Math.min(bytes.byteLength, HTTP2_PREFACE.byteLength)
  return n >= 4 && Buffer.from(bytes.buffer, bytes.byteOffset, n).equals(HTTP2_PREFACE.subarray(0, n))
}

/** Node's HTTP parser as it hangs on a server socket (`socket.parser`). */
interface SocketParser {
  unconsume?(): void
  remove?(): void
}

/**
 * Takes a connection from node:http's server after its parser stopped at the HTTP/2 preface (a
 * `clientError` with code HPE_PAUSED_H2_UPGRADE): the parser lets go of the socket and leaves the server's
 * connection list, the server's own socket listeners are removed (others, such as the proxy's accounting,
 * stay), and the bytes the parser read are put back for the HTTP/2 session to read first.
 * @note The same steps node:http takes for an Upgrade or a CONNECT (`_http_server.js` onParserExecuteCommon).
 */
export function takeFromHttp1(socket: Socket, readBytes: Uint8Array): void {
  const holder = socket as Socket & { parser?: SocketParser | null }
  const parser = holder.parser
  parser?.unconsume?.()
  parser?.remove?.()
  holder.parser = null
  for (const event of ['data', 'end', 'close', 'drain', 'error', 'timeout', 'resume', 'pause']) {
    for (const listener of socket.listeners(event)) {
      if (/^(?:bound )?(?:socketOn|onSocket)/.test((listener as { name?: string }).name ?? ''))
        socket.removeListener(event, listener as (...a: unknown[]) => void)
    }
  }
  socket.on('error', () => {})
  socket.setTimeout(0)
  // Paused: the bytes put back wait for the HTTP/2 session, which reads what is buffered first.
  socket.pause()
  if (readBytes.byteLength > 0) socket.unshift(Buffer.from(readBytes.buffer, readBytes.byteOffset, readBytes.byteLength))
}
