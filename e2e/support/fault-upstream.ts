/**
 * The upstream the fault tests hit: a small shipping API on 127.0.0.1:0 (HTTPS when given a leaf) that
 * keeps its own ledger, so a test can tell what was really committed from what the client was told.
 * - POST /shipments: commits a shipment (201 {"shipment":{"id":"s-N"}}); a repeated `idempotency-key`
 *   returns the shipment already created (200), as payment and shipping APIs do;
 * - GET /quote: 200 {"quote":{"id":"q-1","price":"4.90"}};
 * - GET /events (and /events-anything): 5 server-sent events, 5 ms apart;
 * - anything else: 200 {"path": ...}.
 */
import { once } from 'node:events'
import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { createServer as createHttpsServer } from 'node:https'
import type { AddressInfo, Socket } from 'node:net'

export const QUOTE = JSON.stringify({ quote: { id: 'q-1', price: '4.90' } })
export const EVENTS = [0, 1, 2, 3, 4].map((n) => `data: {"n":${n}}\n\n`)

export interface FaultUpstream {
  port: number
  /** Base URL with the loopback address (the interceptor's tests use it directly). */
  url: string
  /** TCP connections accepted so far. */
  readonly connections: number
  /** Requests that reached the server, as "METHOD path". */
  readonly requests: string[]
  /** Shipments committed, in order. */
  readonly shipments: string[]
  close(): Promise<void>
}

/** Starts the upstream; `tls` makes it HTTPS. */
export async function startFaultUpstream(tls?: { cert: string; key: string }): Promise<FaultUpstream> {
  const state = { connections: 0, requests: [] as string[], shipments: [] as string[] }
  const byKey = new Map<string, string>()
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    req.resume()
    req.on('end', () => {
      state.requests.push(`${req.method} ${req.url}`)
      route(req, res)
    })
  }
  const route = (req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? '/').split('?')[0] ?? '/'
    if (req.method === 'POST' && path === '/shipments') {
      const key = req.headers['idempotency-key']
      const known = typeof key === 'string' ? byKey.get(key) : undefined
      if (known) {
        res.writeHead(200, { 'content-type': 'application/json' })
        res.end(JSON.stringify({ shipment: { id: known } }))
        return
      }
      const id = `s-${state.shipments.length + 1}`
      state.shipments.push(id)
      if (typeof key === 'string') byKey.set(key, id)
      res.writeHead(201, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ shipment: { id } }))
      return
    }
    if (path === '/quote') {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(QUOTE)
      return
    }
    if (path.startsWith('/events')) {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
      let i = 0
      const next = () => {
        res.write(EVENTS[i++])
        if (i < EVENTS.length) setTimeout(next, 5)
        else res.end()
      }
      next()
      return
    }
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end(JSON.stringify({ path }))
  }
  const server: Server = tls ? createHttpsServer({ cert: tls.cert, key: tls.key }, handler) : createHttpServer(handler)
  const sockets = new Set<Socket>()
  server.on(tls ? 'secureConnection' : 'connection', () => state.connections++)
  server.on('connection', (s: Socket) => {
    sockets.add(s)
    s.on('close', () => sockets.delete(s))
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const port = (server.address() as AddressInfo).port
  return {
    port,
    url: `${tls ? 'https' : 'http'}://127.0.0.1:${port}`,
    get connections() {
      return state.connections
    },
    requests: state.requests,
    shipments: state.shipments,
    close: async () => {
      for (const s of sockets) s.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
