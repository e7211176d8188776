/**
 * TLS sockets that offer only `h2` by ALPN (@grpc/grpc-js connects its own, then hands it to
 * `http2.connect`), while the node:http capture holds the app's sockets.
 *
 * @mswjs/interceptors' socket interception holds every socket an app connects until a request on it is
 * decided, and completes the TLS handshake of a held socket as unverified (`authorized` false): there is no
 * peer yet. grpc-js refuses an unverified connection (its secure connector rejects with the socket's
 * `authorizationError`), so it would never reach `http2.connect`, where the HTTP/2 capture serves the session
 * in memory and never writes to this socket. Such a socket is reported verified instead: the verification
 * that counts happens on the capture's own live connection, made with this socket's TLS options and
 * `rejectUnauthorized` (interceptor/http2-capture.ts `connectLike`), and a replay contacts no server to verify.
 * Sockets that offer HTTP/1.1 are left as msw reports them.
 */
import type { TLSSocket } from 'node:tls'
import { Interceptor } from '@mswjs/interceptors'
import { SocketInterceptor } from '@mswjs/interceptors/net'

/** Starts reporting held h2-only TLS sockets as verified; returns the undo. */
export function trustHeldHttp2Sockets(): () => void {
  const sockets = Interceptor.singleton(SocketInterceptor)
  const owner = {}
  sockets.apply(owner)
  const onConnection = (event: { controller: unknown; connectionOptions: unknown }) => {
    if (!offersOnlyH2((event.connectionOptions as { ALPNProtocols?: unknown }).ALPNProtocols)) return
    const socket = (event.controller as { socket?: TLSSocket }).socket
    if (!socket || typeof socket.prependListener !== 'function') return
    // Before the app's own 'secureConnect' listener reads it (msw calls them in order).
    socket.prependListener('secureConnect', () => {
      Reflect.set(socket, 'authorized', true)
      Reflect.set(socket, 'authorizationError', null)
    })
  }
  sockets.on('connection', onConnection as never)
  return () => {
    sockets.removeListener('connection', onConnection as never)
    sockets.dispose(owner)
  }
}

function offersOnlyH2(protocols: unknown): boolean {
  if (!Array.isArray(protocols) || protocols.length === 0) return false
  return protocols.every((p) => (typeof p === 'string' ? p : Buffer.isBuffer(p) ? p.toString() : '') === 'h2')
}
