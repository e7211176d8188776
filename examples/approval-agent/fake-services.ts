/**
 * The approval agent's world, run locally so the example needs no network and no API key:
 * - a fake model provider for https://api.openai.test (`POST /v1/chat/completions`, answered by fake-model.ts
 *   with the headers api.openai.com sends and gzip when the client accepts it, as the real API does);
 * - a fake refund service for https://refunds.test (`GET /v1/orders/:id/refund-check`).
 * Both are HTTPS servers on 127.0.0.1 (port 0), counting every connection and request. `agent()` is an undici
 * Agent that reaches them by those names (no DNS, no /etc/hosts edit) and trusts their certificate.
 * @note fixtures/fakes-key.pem is a throwaway for this example only; never trust its certificate anywhere else.
 */
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http'
import { createServer, type Server } from 'node:https'
import type { AddressInfo, Socket } from 'node:net'
import { gzipSync } from 'node:zlib'
import { Agent, buildConnector } from 'undici'
import { answerChatCompletion, apiError, type ModelAnswer } from './fake-model.ts'

const fixture = (name: string) => readFileSync(new URL(`./fixtures/${name}`, import.meta.url))

/** The certificate both fakes present (SAN api.openai.test and refunds.test). */
export const FAKES_CERT = fixture('fakes-cert.pem')

/** The orders the refund service knows. */
const ORDERS: Record<string, Record<string, unknown>> = {
  'A-1042': {
    order_id: 'A-1042',
    item: 'Blender BX-200',
    paid_cents: 8999,
    refunded_cents: 0,
    refundable_cents: 8999,
    currency: 'usd',
    delivered_days_ago: 1,
    policy: 'Damaged on arrival: full refund within 30 days of delivery.',
  },
}

/** One request a fake answered. */
export interface SeenRequest {
  /** e.g. "POST /v1/chat/completions" */
  line: string
  authorization?: string
}

/** One fake service: what it has seen so far. */
export interface ServiceCounters {
  /** TCP connections accepted. */
  readonly connections: number
  /** Requests answered, in order. */
  readonly requests: readonly SeenRequest[]
}

/** The running fakes. */
export interface FakeServices {
  model: ServiceCounters
  refunds: ServiceCounters
  /** Their ports, for `APPROVAL_AGENT_FAKES`. */
  ports: { model: number; refunds: number }
  /** An undici Agent that reaches the fakes as https://api.openai.test and https://refunds.test. */
  agent(): Agent
  close(): Promise<void>
}

/** The ports of running fakes, as `APPROVAL_AGENT_FAKES` gives them: "MODEL_PORT,REFUNDS_PORT". */
export function parseFakesPorts(text: string): { model: number; refunds: number } {
  const [model, refunds] = text.split(',').map(Number)
  if (!Number.isInteger(model) || !Number.isInteger(refunds)) throw new Error(`APPROVAL_AGENT_FAKES must be "MODEL_PORT,REFUNDS_PORT", not "${text}"`)
  return { model: model as number, refunds: refunds as number }
}

/** An undici Agent that reaches fakes on these loopback ports as https://api.openai.test and https://refunds.test. */
export function agentForFakes(ports: { model: number; refunds: number }): Agent {
  const byHost: Record<string, number> = { 'api.openai.test': ports.model, 'refunds.test': ports.refunds }
  const connect = buildConnector({ ca: FAKES_CERT })
  return new Agent({
    connect: (opts, callback) => {
      const port = byHost[opts.hostname]
      // Anything else is refused rather than sent to the internet: this example is offline by design.
      if (port === undefined) return callback(new Error(`the approval agent example only reaches its fakes, not ${opts.hostname}`), null)
      return connect({ ...opts, hostname: '127.0.0.1', port: String(port), servername: opts.hostname }, callback)
    },
  })
}

type Handler = (req: IncomingMessage, body: string, res: ServerResponse) => void

/** Starts both fakes on 127.0.0.1 (free ports). */
export async function startFakeServices(): Promise<FakeServices> {
  const model = await serve(modelProvider)
  const refunds = await serve(refundService)
  const agents: Agent[] = []
  return {
    model: model.counters,
    refunds: refunds.counters,
    ports: { model: model.port, refunds: refunds.port },
    agent() {
      const agent = agentForFakes({ model: model.port, refunds: refunds.port })
      agents.push(agent)
      return agent
    },
    async close() {
      await Promise.all(agents.map((a) => a.close()))
      await Promise.all([model.close(), refunds.close()])
    },
  }
}

/** Chat Completions, with the response headers api.openai.com sends (see e2e/fixtures/openai). */
const modelProvider: Handler = (req, body, res) => {
  let answer: ModelAnswer
  // Like the API: no key, no answer (any key will do here).
  if (!/^Bearer \S+$/.test(req.headers.authorization ?? '')) answer = apiError(401, "You didn't provide an API key.", 'invalid_request_error', null)
  else if (req.method !== 'POST' || req.url !== '/v1/chat/completions')
    answer = apiError(404, `Invalid URL (${req.method} ${req.url})`, 'invalid_request_error', null)
  else {
    try {
      answer = answerChatCompletion(JSON.parse(body))
    } catch {
      answer = apiError(400, 'We could not parse the JSON body of your request.', 'invalid_request_error', null)
    }
  }
  const headers: OutgoingHttpHeaders = {
    'content-type': 'application/json',
    'access-control-expose-headers': 'X-Request-ID',
    'openai-organization': 'user-example',
    'openai-processing-ms': String(300 + (randomBytes(1)[0] ?? 0)),
    'openai-project': 'proj_example',
    'openai-version': '2020-10-01',
    'strict-transport-security': 'max-age=31536000; includeSubDomains; preload',
    'x-content-type-options': 'nosniff',
    'x-ratelimit-limit-requests': '30000',
    'x-ratelimit-limit-tokens': '150000000',
    'x-ratelimit-remaining-requests': '29999',
    'x-ratelimit-remaining-tokens': '149999500',
    'x-ratelimit-reset-requests': '2ms',
    'x-ratelimit-reset-tokens': '0s',
    'x-request-id': `req_${randomBytes(16).toString('hex')}`,
  }
  const gzip = /\bgzip\b/.test(String(req.headers['accept-encoding'] ?? ''))
  const bytes = gzip ? gzipSync(answer.body) : Buffer.from(answer.body)
  res.writeHead(answer.status, { ...headers, ...(gzip ? { 'content-encoding': 'gzip' } : {}), 'content-length': bytes.byteLength }).end(bytes)
}

const refundService: Handler = (req, _body, res) => {
  const m = /^\/v1\/orders\/([^/?]+)\/refund-check$/.exec(req.url ?? '')
  const order = m && req.method === 'GET' ? ORDERS[decodeURIComponent(m[1] as string)] : undefined
  if (!order) {
    res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'order_not_found' }))
    return
  }
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(order))
}

async function serve(handler: Handler): Promise<{ port: number; counters: ServiceCounters; close(): Promise<void> }> {
  const requests: SeenRequest[] = []
  const sockets = new Set<Socket>()
  let connections = 0
  const server: Server = createServer({ cert: FAKES_CERT, key: fixture('fakes-key.pem') }, (req, res) => {
    const parts: Buffer[] = []
    req.on('data', (c: Buffer) => parts.push(c))
    req.on('end', () => {
      const { authorization } = req.headers
      requests.push({ line: `${req.method} ${req.url}`, ...(authorization ? { authorization } : {}) })
      handler(req, Buffer.concat(parts).toString('utf8'), res)
    })
  })
  server.on('connection', (socket: Socket) => {
    connections++
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    port: (server.address() as AddressInfo).port,
    counters: {
      get connections() {
        return connections
      },
      requests,
    },
    async close() {
      for (const s of sockets) s.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
