/**
 * The SSE client of the proxy benchmarks, run as a child process: reads every URL with undici's `fetch`
 * (10 at a time), counting the reads of each body, and prints `{ ms, reads: [{ reads, bytes }] }`.
 * `node sse-reader.ts '<json>'` with `{ urls, proxy?, tunnel?, ca? }`: through a `ProxyAgent` when `proxy` is
 * given (`tunnel: false` sends plain-HTTP URLs in absolute form, as HTTP_PROXY clients do), else straight to
 * the URLs (a base-URL server: reverse mode, talkback).
 */
import { Agent, type Dispatcher, fetch, ProxyAgent } from 'undici'
import { inBatches, readCounted } from '../lib/sse.ts'

const job = JSON.parse(process.argv[2] as string) as { urls: string[]; proxy?: string; tunnel?: boolean; ca?: string }
const tls = job.ca ? { ca: job.ca } : {}
const dispatcher: Dispatcher = job.proxy ? new ProxyAgent({ uri: job.proxy, requestTls: tls, proxyTunnel: job.tunnel ?? false }) : new Agent({ connect: tls })
const t0 = performance.now()
const reads = await inBatches(job.urls.length, async (i) => {
  const res = await fetch(job.urls[i] as string, { dispatcher })
  if (res.status !== 200) throw new Error(`sse-reader: ${job.urls[i]} answered ${res.status}: ${await res.text()}`)
  return readCounted(res.body as AsyncIterable<Uint8Array> | null)
})
const ms = performance.now() - t0
await dispatcher.close()
process.stdout.write(JSON.stringify({ ms, reads }))
