/**
 * A `ws` WebSocketServer on an HTTP(S) server, listening on loopback and counting the connections it accepts
 * (the counting upstream that proves a strict replay opened none).
 */
import { once } from 'node:events'
import type { Server as HttpServer } from 'node:http'
import type { Server as HttpsServer } from 'node:https'
import type { AddressInfo } from 'node:net'
import type { WebSocketServer } from 'ws'

export interface CountingWebSocketServer {
  port: number
  readonly connections: number
  close(): Promise<void>
}

/** Listens `server` (with `wss` on it) on 127.0.0.1, counting every TCP connection (a failed TLS handshake too). */
export async function listenCounting(server: HttpServer | HttpsServer, wss: WebSocketServer): Promise<CountingWebSocketServer> {
  let connections = 0
  server.on('connection', () => connections++)
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  return {
    port: (server.address() as AddressInfo).port,
    get connections() {
      return connections
    },
    close: async () => {
      for (const c of wss.clients) c.terminate()
      wss.close()
      server.closeAllConnections()
      await new Promise<void>((r) => server.close(() => r()))
    },
  }
}
