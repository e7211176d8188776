/**
 * Trace files at scale: writes an N-exchange trace file (small JSON bodies, every fourth response one of 50
 * repeated answers, so the file holds refs), then runs `tr-proxy import` and `tr-proxy export` on it, each in
 * a process of its own under `/usr/bin/time -v`, and prints wall time and peak RSS of each. The re-exported
 * file must be byte-identical to the generated one.
 *
 *   node --conditions=tool-replay-source bench/trace-files.ts [N=1000000] [CLI=bin/tr-proxy.js]
 *
 * CLI may name another checkout's bin/tr-proxy.js (to measure the code before a change on the same file).
 */
import { spawnSync } from 'node:child_process'
import { mkdtemp, rm, stat } from 'node:fs/promises'
import { loadavg, tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { writeTraceFileFrom } from '../store/index.ts'
import { type BodyRef, bodyFromBytes, type Exchange } from '../trace/index.ts'

const N = Number(process.argv[2] ?? 1_000_000)
const CLI = resolve(process.argv[3] ?? new URL('../bin/tr-proxy.js', import.meta.url).pathname)
const enc = new TextEncoder()
const JSON_TYPE: Array<[string, string]> = [['content-type', 'application/json']]

/** Exchange i and the bytes of its bodies; deterministic, so two runs write the same file. */
function exchangeAt(i: number, bytes: Map<string, Uint8Array>): Exchange {
  const keep = (text: string): BodyRef => {
    const b = bodyFromBytes(enc.encode(text))
    bytes.set(b.ref.digest, b.bytes)
    return b.ref
  }
  const post = i % 2 === 1
  const answer = i % 4 === 0 ? `{"ok":true,"page":${i % 50}}` : `{"id":${i},"name":"user-${i}","active":${i % 3 === 0},"tags":["a","b"]}`
  return {
    seq: i,
    request: {
      method: post ? 'POST' : 'GET',
      url: `https://api.test/v1/users/${i}?fields=name`,
      headers: post ? [...JSON_TYPE, ['accept', '*/*']] : [['accept', '*/*']],
      body: post ? keep(`{"id":${i},"update":{"name":"user-${i}"}}`) : null,
    },
    outcome: { kind: 'response', response: { status: 200, statusText: 'OK', headers: JSON_TYPE, trailers: [], body: keep(answer) } },
    timing: { startMs: i * 2, headersMs: 1 },
  }
}

async function generate(file: string): Promise<string> {
  // Bodies are asked for up to 256 exchanges after they were yielded (a window): two generations of 256 cover that.
  let [current, previous] = [new Map<string, Uint8Array>(), new Map<string, Uint8Array>()]
  const written = await writeTraceFileFrom(file, {
    meta: { name: 'big', format: 1 },
    exchanges: async function* () {
      for (let i = 0; i < N; i++) {
        if (i % 256 === 0) [current, previous] = [new Map(), current]
        yield exchangeAt(i, current)
      }
    },
    body: async (ref) => current.get(ref.digest) ?? previous.get(ref.digest),
  })
  return written.digest
}

/** Runs the CLI under /usr/bin/time -v: wall seconds and peak RSS in MB. */
function timed(label: string, args: string[]): { seconds: number; rssMb: number } {
  const r = spawnSync('/usr/bin/time', ['-v', process.execPath, CLI, ...args], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 })
  if (r.status !== 0) throw new Error(`${label} failed (${r.status}): ${r.stdout}\n${r.stderr.slice(-3000)}`)
  const wall = /Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)/.exec(r.stderr)
  const rss = /Maximum resident set size \(kbytes\): (\d+)/.exec(r.stderr)
  if (!wall || !rss) throw new Error(`no /usr/bin/time figures in: ${r.stderr.slice(-2000)}`)
  const seconds = Number(wall[1] ?? 0) * 3600 + Number(wall[2]) * 60 + Number(wall[3])
  return { seconds, rssMb: Math.round(Number(rss[1]) / 1024) }
}

const dir = await mkdtemp(join(tmpdir(), 'tr-bench-files-'))
try {
  const file = join(dir, 'big.trace.json')
  const store = join(dir, 'store')
  const t = performance.now()
  const digest = await generate(file)
  const size = (await stat(file)).size
  console.log(
    `N=${N}: generated ${(size / 1e6).toFixed(0)} MB in ${((performance.now() - t) / 1000).toFixed(1)} s (digest ${digest.slice(0, 12)}); load ${loadavg()[0]?.toFixed(2)}`,
  )
  console.log(`CLI: ${CLI} (node ${process.version})`)
  const imported = timed('import', ['import', file, '--store', store])
  console.log(`import: ${imported.seconds.toFixed(1)} s, peak RSS ${imported.rssMb} MB; load ${loadavg()[0]?.toFixed(2)}`)
  const again = join(dir, 'again.trace.json')
  const exported = timed('export', ['export', 'big', '--out', again, '--store', store])
  console.log(`export: ${exported.seconds.toFixed(1)} s, peak RSS ${exported.rssMb} MB; load ${loadavg()[0]?.toFixed(2)}`)
  const same = spawnSync('cmp', ['-s', file, again]).status === 0
  console.log(`re-export byte-identical: ${same}`)
  if (!same) process.exitCode = 1
} finally {
  await rm(dir, { recursive: true, force: true })
}
