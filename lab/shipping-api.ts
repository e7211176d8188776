/**
 * The lab's shipping API: a real HTTP server on loopback. It streams rates as server-sent events and
 * creates shipments, honouring an `idempotency-key` the way Stripe does (the same key and body returns the
 * shipment already created; the same key with another body is 422). It keeps its own ledger of what it
 * committed, so the lab can compare the trace's commit evidence against the ground truth.
 */
import type { ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { parseJson } from '../trace/index.ts'

const http = process.getBuiltinModule('node:http') // not `import`: see trace/patch.ts

/** A shipping rate. Prices are strings, as money in JSON should be. */
export interface Rate {
  id: string
  service: string
  price: string
}

/** A committed shipment. */
export interface Shipment {
  id: string
  orderId: string
  rateId: string
  status: 'created'
}

/** The rates every order is offered; the cheapest is the last one streamed. */
export const RATES: readonly Rate[] = [
  { id: 'r-ground', service: 'ground', price: '7.10' },
  { id: 'r-express', service: 'express', price: '19.80' },
  { id: 'r-economy', service: 'economy', price: '4.90' },
]

/** A running shipping API. */
export interface ShippingApi {
  /** e.g. http://127.0.0.1:PORT */
  url: string
  /** Shipments as committed, in order. */
  readonly shipments: readonly Shipment[]
  /** Requests that reached the server. */
  readonly requests: number
  close(): Promise<void>
}

const MAX_BODY = 64 * 1024

/** Starts the API on 127.0.0.1, on `port` (default 0: any free port). */
export async function startShippingApi(options: { port?: number } = {}): Promise<ShippingApi> {
  const shipments: Shipment[] = []
  const byKey = new Map<string, { body: string; shipment: Shipment }>()
  let requests = 0
  const server = http.createServer((req, res) => {
    requests++
    const chunks: Buffer[] = []
    let size = 0
    req.on('data', (c: Buffer) => {
      size += c.byteLength
      if (size > MAX_BODY) req.destroy()
      else chunks.push(c)
    })
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://localhost')
      if (req.method === 'GET' && url.pathname === '/rates') return streamRates(res)
      if (req.method === 'POST' && url.pathname === '/shipments')
        return createShipment(Buffer.concat(chunks).toString('utf8'), req.headers['idempotency-key'], res)
      send(res, 404, { error: { code: 'not_found', message: `No route for ${req.method} ${url.pathname}` } })
    })
  })

  function createShipment(text: string, key: string | string[] | undefined, res: ServerResponse): void {
    let input: { orderId?: unknown; rateId?: unknown }
    try {
      input = parseJson(text) as typeof input
    } catch {
      send(res, 400, { error: { code: 'invalid_json', message: 'The body is not JSON.' } })
      return
    }
    if (typeof input.orderId !== 'string' || !RATES.some((r) => r.id === input.rateId)) {
      send(res, 400, { error: { code: 'invalid_request', message: 'Give orderId and a rateId from GET /rates.' } })
      return
    }
    const idempotencyKey = Array.isArray(key) ? key[0] : key
    const seen = idempotencyKey === undefined ? undefined : byKey.get(idempotencyKey)
    if (seen) {
      if (seen.body !== text) send(res, 422, { error: { code: 'idempotency_key_reused', message: 'This key was used with another body.' } })
      else send(res, 200, { shipment: seen.shipment }, [['idempotent-replayed', 'true']])
      return
    }
    const shipment: Shipment = { id: `s-${shipments.length + 1}`, orderId: input.orderId, rateId: input.rateId as string, status: 'created' }
    shipments.push(shipment)
    if (idempotencyKey !== undefined) byKey.set(idempotencyKey, { body: text, shipment })
    send(res, 201, { shipment })
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve())
  })
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    shipments,
    get requests() {
      return requests
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

function streamRates(res: ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store' })
  // One write per event, so the stream arrives in event-sized chunks as a real one would.
  for (const rate of RATES) res.write(`event: rate\ndata: ${JSON.stringify(rate)}\n\n`)
  res.end(`event: done\ndata: {"count":${RATES.length}}\n\n`)
}

function send(res: ServerResponse, status: number, body: unknown, headers: Array<[string, string]> = []): void {
  const text = JSON.stringify(body)
  res.writeHead(status, [['content-type', 'application/json'], ['content-length', String(Buffer.byteLength(text))], ...headers].flat())
  res.end(text)
}
