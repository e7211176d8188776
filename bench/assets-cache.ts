/**
 * What an assets restore downloads and keeps, with the real git against a bare repository (a `file://`
 * remote, partial clone allowed as GitHub and GitLab allow it):
 *   - push N traces (each a small JSON answer plus a 256 KiB binary body kept as a blob);
 *   - restore 1 of them into a fresh cache (sparse), then all N into another fresh cache;
 *   - restore all N again from the warm cache (no download);
 *   - re-record one trace, push a second tag, restore it into the warm cache: the cache grows by about that
 *     one trace, since git's content-addressed objects are shared across tags.
 * Sizes are the bytes under the cache's repository folder; times are wall-clock for the whole command.
 *
 *   npm run bench:assets            (BENCH_TRACES=20 by default)
 */
import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { runCli } from '../cli/index.ts'
import { openStore } from '../store/index.ts'
import { bodyFromBytes, type Exchange, TRACE_FORMAT_VERSION, type Trace } from '../trace/index.ts'

const N = Number(process.env.BENCH_TRACES ?? 20)
const BLOB = 256 * 1024
const quiet = { out: () => {}, err: (t: string) => process.stderr.write(`${t}\n`) }

function trace(name: string, seed: number): Trace {
  const bodies = new Map<string, Uint8Array>()
  const json = bodyFromBytes(new TextEncoder().encode(JSON.stringify({ name, seed, items: [1, 2, 3] })))
  const image = bodyFromBytes(randomBytes(BLOB))
  bodies.set(json.ref.digest, json.bytes)
  bodies.set(image.ref.digest, image.bytes)
  const x = (seq: number, path: string, type: string, ref: typeof json.ref): Exchange => ({
    seq,
    request: { method: 'GET', url: `https://api.test/${name}/${path}`, headers: [], body: null },
    outcome: { kind: 'response', response: { status: 200, statusText: 'OK', headers: [['content-type', type]], body: ref, trailers: [] } },
    timing: { startMs: seq, headersMs: 1 },
  })
  return {
    meta: { name, format: TRACE_FORMAT_VERSION },
    exchanges: [x(0, 'item', 'application/json', json.ref), x(1, 'image', 'image/png', image.ref)],
    bodies,
  }
}

async function du(dir: string): Promise<number> {
  let total = 0
  for (const e of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
    const p = join(dir, e.name)
    total += e.isDirectory() ? await du(p) : (await stat(p)).size
  }
  return total
}

async function timed(label: string, args: string[]): Promise<number> {
  const t0 = performance.now()
  const code = await runCli(args, quiet)
  const ms = performance.now() - t0
  if (code !== 0) throw new Error(`${label}: exit ${code}`)
  return ms
}

const work = await mkdtemp(join(tmpdir(), 'tr-bench-assets-'))
try {
  const bare = join(work, 'recordings.git')
  execFileSync('git', ['init', '--quiet', '--bare', bare])
  execFileSync('git', [`--git-dir=${bare}`, 'config', 'uploadpack.allowFilter', 'true'])
  execFileSync('git', [`--git-dir=${bare}`, 'config', 'uploadpack.allowAnySHA1InWant', 'true'])
  const remote = `file://${bare}`
  const storeA = join(work, 'a-store')
  const s = await openStore(storeA)
  const names = Array.from({ length: N }, (_, i) => `trace-${String(i).padStart(3, '0')}`)
  for (const [i, name] of names.entries()) await s.putTrace(trace(name, i))
  await s.close()
  const pointer = join(work, 'tool-replay.assets.json')
  const pushMs = await timed('push', [
    'assets',
    'push',
    ...names,
    '--remote',
    remote,
    '--store',
    storeA,
    '--pointer',
    pointer,
    '--cache',
    join(work, 'cache-a'),
  ])
  const pinned = JSON.parse(await readFile(pointer, 'utf8')) as { traces: Record<string, string> }

  const restore = async (cache: string, store: string, only?: string[]) => {
    const p = join(work, `pointer-${randomBytes(4).toString('hex')}.json`)
    const all = JSON.parse(await readFile(pointer, 'utf8'))
    if (only) all.traces = Object.fromEntries(only.map((n) => [n, pinned.traces[n]]))
    await writeFile(p, JSON.stringify(all))
    const ms = await timed('restore', ['assets', 'restore', '--store', store, '--pointer', p, '--cache', cache])
    return { ms, bytes: await du(join(cache, 'repos')) }
  }
  const one = await restore(join(work, 'cache-one'), join(work, 'store-one'), [names[0] as string])
  const full = await restore(join(work, 'cache-full'), join(work, 'store-full'))
  const warm = await restore(join(work, 'cache-full'), join(work, 'store-warm'))

  const s2 = await openStore(storeA)
  await s2.putTrace(trace(names[0] as string, 999), { overwrite: true })
  await s2.close()
  await timed('push 2', ['assets', 'push', '--store', storeA, '--pointer', pointer, '--cache', join(work, 'cache-a')])
  const second = await restore(join(work, 'cache-full'), join(work, 'store-second'))

  const mb = (n: number) => `${(n / 1024 / 1024).toFixed(2)} MB`
  const rows = [
    ['step', 'time', 'cache repository'],
    [`push ${N} traces (${N} x 256 KiB blobs)`, `${pushMs.toFixed(0)} ms`, ''],
    [`restore 1 of ${N} (fresh cache)`, `${one.ms.toFixed(0)} ms`, mb(one.bytes)],
    [`restore all ${N} (fresh cache)`, `${full.ms.toFixed(0)} ms`, mb(full.bytes)],
    [`restore all ${N} again (warm cache, no fetch)`, `${warm.ms.toFixed(0)} ms`, mb(warm.bytes)],
    ['restore a 2nd tag, 1 trace changed (warm cache)', `${second.ms.toFixed(0)} ms`, `${mb(second.bytes)} (+${mb(second.bytes - full.bytes)})`],
  ]
  for (const r of rows) console.log(`${(r[0] as string).padEnd(50)} ${(r[1] as string).padStart(9)}  ${r[2]}`)
} finally {
  await rm(work, { recursive: true, force: true })
}
