/**
 * A fake CRM for the example: an HTTPS server answering `GET /customers/:id` with `{"active": ...}`,
 * plus an undici Agent that reaches it as https://crm.test (no DNS, no /etc/hosts edit): the Agent's
 * connector sends crm.test:443 to 127.0.0.1:<port> and trusts the example's self-signed certificate.
 * @note The key in fixtures/ is a throwaway for this example only; never trust it anywhere else.
 */
import { readFileSync } from 'node:fs'
import { createServer } from 'node:https'
import type { AddressInfo } from 'node:net'
import { Agent, buildConnector } from 'undici'

const fixture = (name: string) => readFileSync(new URL(`./fixtures/${name}`, import.meta.url))

/** The certificate the fake CRM presents for crm.test. */
export const CRM_CERT = fixture('crm.test-cert.pem')

/** A running fake CRM. */
export interface FakeCrm {
  port: number
  /** Requests it has answered, e.g. ["GET /customers/42"]. */
  readonly requests: string[]
  /** An undici Agent that reaches this server as https://crm.test. */
  agent(): Agent
  close(): Promise<void>
}

/** Starts the fake CRM on 127.0.0.1 (port 0 picks a free port). Every customer is active unless listed. */
export async function startFakeCrm(options: { inactive?: string[]; port?: number } = {}): Promise<FakeCrm> {
  const requests: string[] = []
  const server = createServer({ cert: CRM_CERT, key: fixture('crm.test-key.pem') }, (req, res) => {
    requests.push(`${req.method} ${req.url}`)
    const m = /^\/customers\/([^/?]+)$/.exec(req.url ?? '')
    if (req.method !== 'GET' || !m) {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not found"}')
      return
    }
    const id = decodeURIComponent(m[1] as string)
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ active: !(options.inactive ?? []).includes(id) }))
  })
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  const agents: Agent[] = []
  return {
    port,
    requests,
    agent() {
      const connect = buildConnector({ ca: CRM_CERT })
      const agent = new Agent({
        connect: (opts, callback) =>
          opts.hostname === 'crm.test'
            ? connect({ ...opts, hostname: '127.0.0.1', port: String(port), servername: 'crm.test' }, callback)
            : connect(opts, callback),
      })
      agents.push(agent)
      return agent
    },
    async close() {
      await Promise.all(agents.map((a) => a.close()))
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
