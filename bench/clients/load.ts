/**
 * The load generator of the proxy benchmarks, run as a child process so the measured server has the bench
 * process to itself: `node load.ts '<json>'` prints `{ total, ms, rps, errors }`; `node load.ts --serve` takes
 * a job per line on stdin and answers each with a line, for the whole of a suite. `cpuMs` is the CPU (user and
 * system) this process spent on the run: near `ms`, the generator had a core to itself and no more, and set the pace.
 * - `{ kind: 'autocannon', url, path, host?, amount, connections }`: autocannon's programmatic API; `path` may be
 *   absolute-form (`http://bench.test/kb`, as HTTP_PROXY clients send it), kept verbatim in the request line.
 * - `{ kind: 'undici', url, ca?, proxy?, amount, connections }`: undici `request` in `connections` keep-alive
 *   loops, through a `ProxyAgent` (CONNECT, then TLS to the proxy's leaf) when `proxy` is given. autocannon
 *   cannot CONNECT, so HTTPS rows use this on every side.
 * - `{ kind: 'raw', url, path, host?, amount, connections, bodyBytes }`: raw-http.ts, keep-alive GETs on plain
 *   sockets with the least parsing that finds each answer's end (about half autocannon's CPU per request).
 */
import { createInterface } from 'node:readline'
import autocannon from 'autocannon'
import { Agent, ProxyAgent, request } from 'undici'
import { type RawJob, rawLoad } from './raw-http.ts'

interface CannonJob {
  kind: 'autocannon'
  url: string
  path: string
  host?: string
  amount: number
  connections: number
}
interface UndiciJob {
  kind: 'undici'
  url: string
  ca?: string
  proxy?: string
  amount: number
  connections: number
}

async function cannon(job: CannonJob) {
  // autocannon ends an `amount` run on its one-second tick, so its own start/finish make req/s whole-second
  // steps (30,000 requests: 14.7k, 9.9k or 7.4k req/s): time from the start to the last response instead.
  let last = 0
  const t0 = performance.now()
  const cpu0 = process.cpuUsage()
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      {
        url: job.url,
        connections: job.connections,
        amount: job.amount,
        // A loaded machine can stall a request for seconds; a timeout is an error, so leave room.
        timeout: 30,
        requests: [{ method: 'GET', path: job.path, ...(job.host ? { headers: { host: job.host } } : {}) }],
      },
      (err, r) => (err ? reject(err) : resolve(r)),
    )
    instance.on('response', () => {
      last = performance.now()
    })
  })
  const ms = (last || performance.now()) - t0
  const total = result['2xx']
  return { total, ms, rps: (total / ms) * 1000, errors: result.errors + result.non2xx + result.timeouts, cpuMs: cpuMsSince(cpu0) }
}

async function undiciLoops(job: UndiciJob) {
  const dispatcher = job.proxy
    ? new ProxyAgent({ uri: job.proxy, requestTls: job.ca ? { ca: job.ca } : {}, connections: job.connections })
    : new Agent({ connect: job.ca ? { ca: job.ca } : {}, connections: job.connections })
  let started = 0
  let done = 0
  let errors = 0
  const t0 = performance.now()
  const cpu0 = process.cpuUsage()
  await Promise.all(
    Array.from({ length: job.connections }, async () => {
      while (started < job.amount) {
        started++
        try {
          const r = await request(job.url, { dispatcher })
          await r.body.arrayBuffer()
          if (r.statusCode === 200) done++
          else errors++
        } catch {
          errors++
        }
      }
    }),
  )
  const ms = performance.now() - t0
  const cpuMs = cpuMsSince(cpu0)
  await dispatcher.close()
  return { total: done, ms, rps: (done / ms) * 1000, errors, cpuMs }
}

/** User and system CPU of this process since `start`, in ms. */
function cpuMsSince(start: NodeJS.CpuUsage): number {
  const { user, system } = process.cpuUsage(start)
  return (user + system) / 1000
}

async function raw(job: RawJob) {
  const cpu0 = process.cpuUsage()
  const { total, errors, ms } = await rawLoad(job)
  return { total, ms, rps: (total / ms) * 1000, errors, cpuMs: cpuMsSince(cpu0) }
}

type Job = CannonJob | UndiciJob | RawJob
const run = (job: Job) => (job.kind === 'autocannon' ? cannon(job) : job.kind === 'raw' ? raw(job) : undiciLoops(job))

if (process.argv[2] === '--serve') {
  // One process for a whole suite: a job per line on stdin, its result a line on stdout. The generator's code
  // stays compiled from run to run (a fresh process per run measured its own warm-up: a bare node:http server
  // at a third of what the same client shows it once warm).
  for await (const line of createInterface({ input: process.stdin })) {
    if (line.trim() !== '') process.stdout.write(`${JSON.stringify(await run(JSON.parse(line) as Job))}\n`)
  }
} else process.stdout.write(JSON.stringify(await run(JSON.parse(process.argv[2] as string) as Job)))
