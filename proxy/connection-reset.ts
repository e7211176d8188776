/**
 * How the proxy makes a client's connection fail the way a network failure does: a TCP reset (RST), so
 * the client reads ECONNRESET rather than a clean close. Through a MITM tunnel the TLS socket sits on the
 * tunnel's TCP socket; the tunnel registers it here so the reset reaches the wire.
 */
import type { Socket } from 'node:net'
import type { Duplex } from 'node:stream'

const tcpSocketOf = new WeakMap<Duplex, Duplex>()

/** Remembers the TCP socket under a TLS socket made for a tunnel. */
export function registerTunnelSocket(tlsSocket: Duplex, tcpSocket: Duplex): void {
  tcpSocketOf.set(tlsSocket, tcpSocket)
}

/** Resets the connection under `socket` (and destroys `socket`); a socket without a TCP handle is just destroyed. */
export function resetConnection(socket: Duplex | null | undefined): void {
  if (!socket) return
  const tcp = (tcpSocketOf.get(socket) ?? socket) as Socket
  try {
    if (typeof tcp.resetAndDestroy === 'function' && !tcp.destroyed) tcp.resetAndDestroy()
  } catch {
    // Not a TCP socket (a socket-less stream in tests): a plain close is the closest there is.
  }
  tcp.destroy()
  socket.destroy()
}
