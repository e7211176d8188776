/**
 * The workload client of the proxy record benchmark, run as a child process: the 2,000 mixed calls
 * (bench/lib/workload.ts) in sequence with undici's `fetch`, straight to `base` or through the plain-HTTP
 * proxy `proxy` (absolute-form, as HTTP_PROXY clients send). Prints `{ ms }`.
 */
import { Agent, fetch, ProxyAgent } from 'undici'
import { drive, workload } from '../lib/workload.ts'

const job = JSON.parse(process.argv[2] as string) as { base: string; calls: number; proxy?: string }
const dispatcher = job.proxy ? new ProxyAgent({ uri: job.proxy, proxyTunnel: false }) : new Agent()
const ms = await drive(job.base, workload(job.calls), (url, init) => fetch(url, { ...init, dispatcher }))
await dispatcher.close()
process.stdout.write(JSON.stringify({ ms }))
