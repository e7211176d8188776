/**
 * The client of the mixed proxy load (bench/lib/mixed.ts), run as a child process: the load's requests over 50
 * keep-alive connections with undici, straight to `base` or through the plain-HTTP proxy `proxy` (absolute-form),
 * every answer's status and bytes checked. Prints `{ ms, wrong, lost }`.
 */
import { Agent, ProxyAgent, request } from 'undici'
import { mixedLoad, payload, sha256 } from '../lib/mixed.ts'

const job = JSON.parse(process.argv[2] as string) as { base: string; requests: number; proxy?: string }
const calls = mixedLoad(job.requests)
const dispatcher = job.proxy ? new ProxyAgent({ uri: job.proxy, proxyTunnel: false, connections: 50 }) : new Agent({ connections: 50 })
const expected = new Map<string, string>()
for (const c of calls) if (!expected.has(c.path)) expected.set(c.path, sha256(payload(c.size, c.seed, c.type)))
let next = 0
let wrong = 0
let lost = 0
const t0 = performance.now()
const worker = async () => {
  for (let c = calls[next++]; c; c = calls[next++]) {
    try {
      const headers: Record<string, string> = { 'x-type': c.type, 'x-chunked': c.chunked ? '1' : '0' }
      if (c.body) headers['content-type'] = 'application/json'
      const res = await request(`${job.base}${c.path}`, { method: c.method, body: c.body, headers, dispatcher })
      const got = new Uint8Array(await res.body.arrayBuffer())
      if (res.statusCode !== 200 || sha256(got) !== expected.get(c.path)) wrong++
    } catch {
      lost++
    }
  }
}
await Promise.all(Array.from({ length: 50 }, worker))
const ms = performance.now() - t0
await dispatcher.close()
process.stdout.write(JSON.stringify({ ms, wrong, lost }))
