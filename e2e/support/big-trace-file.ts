/** Big generated trace files for the streamed trace-file tests, and the CLI run as a process of its own. */
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { writeTraceFileFrom } from '../../store/index.ts'
import { type BodyRef, bodyFromBytes, type Exchange } from '../../trace/index.ts'

const TR_PROXY = fileURLToPath(new URL('../../bin/tr-proxy.js', import.meta.url))
const enc = new TextEncoder()
const JSON_TYPE: Array<[string, string]> = [['content-type', 'application/json']]

/** Exchange i of a generated trace: a JSON answer of its own, every fourth one of 50 repeated answers (refs). */
function exchangeAt(i: number, bytes: Map<string, Uint8Array>, tag: string): Exchange {
  const keep = (text: string): BodyRef => {
    const b = bodyFromBytes(enc.encode(text))
    bytes.set(b.ref.digest, b.bytes)
    return b.ref
  }
  const answer = i % 4 === 0 ? `{"ok":true,"page":${i % 50}}` : `{"id":${i},"name":"${tag}-${i}","active":${i % 3 === 0}}`
  return {
    seq: i,
    request: { method: i % 2 ? 'POST' : 'GET', url: `https://api.test/users/${i}`, headers: JSON_TYPE, body: i % 2 ? keep(`{"id":${i}}`) : null },
    outcome: { kind: 'response', response: { status: 200, statusText: 'OK', headers: JSON_TYPE, trailers: [], body: keep(answer) } },
    timing: { startMs: i, headersMs: 1 },
  }
}

/** Writes an n-exchange trace file without holding the trace. */
export async function generate(file: string, name: string, n: number, tag = 'user'): Promise<string> {
  // Bodies are asked for up to 64 exchanges after they were yielded: two generations of 256 cover that.
  let [current, previous] = [new Map<string, Uint8Array>(), new Map<string, Uint8Array>()]
  const written = await writeTraceFileFrom(file, {
    meta: { name, format: 1 },
    exchanges: async function* () {
      for (let i = 0; i < n; i++) {
        if (i % 256 === 0) [current, previous] = [new Map(), current]
        yield exchangeAt(i, current, tag)
      }
    },
    body: async (ref) => current.get(ref.digest) ?? previous.get(ref.digest),
  })
  return written.digest
}

/** Runs tr-proxy with `args` (and node flags `nodeArgs`); killed after 4 minutes. */
export function cli(args: string[], nodeArgs: string[] = []): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...nodeArgs, TR_PROXY, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    const timer = setTimeout(() => child.kill('SIGKILL'), 240_000)
    child.on('error', reject)
    child.on('close', (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr })
    })
  })
}

/** A Node flag that prints the process's peak RSS (MiB) on stderr as it exits: pass it in `cli`'s nodeArgs. */
export const PEAK_RSS = `--import=data:text/javascript,process.on('exit',()=>process.stderr.write('peak-rss-mb='+Math.round(process.resourceUsage().maxRSS/1024)+'\\n'))`

/** The peak RSS (MiB) a process run with PEAK_RSS printed; NaN when it printed none. */
export function peakRssMb(stderr: string): number {
  return Number(/peak-rss-mb=(\d+)/.exec(stderr)?.[1])
}
