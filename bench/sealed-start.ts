/**
 * What `--sealed` adds to a wrapped command's start, as a user sees it: `tr-proxy record --mode passthrough --
 * <command>` whose command writes the clock as its first act, unsealed and sealed, interleaved, N times each.
 * Reported: the median and 90th percentile of the time from spawning the CLI to the command's first act, and to
 * the CLI's exit, and the difference of the medians. With `--dist DIR` the CLI runs from a build (what an installed
 * package runs: the helper as compiled JS), else from the sources (type stripping, slower to start).
 * Not a test: the figure depends on the machine and its load (printed with it).
 *   node scripts/build.mjs --out /tmp/tr-dist && node bench/sealed-start.ts --dist /tmp/tr-dist [N]
 */
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const args = process.argv.slice(2)
const distAt = args.indexOf('--dist')
const dist = distAt >= 0 ? resolve(args[distAt + 1] ?? '') : undefined
const N = Number(args.filter((_arg, i) => distAt < 0 || (i !== distAt && i !== distAt + 1))[0] ?? 10)
const dir = mkdtempSync(join(tmpdir(), 'tr-sealed-start-'))
const stamp = join(dir, 'started')
const entry = dist ? join(dir, 'cli.mjs') : fileURLToPath(new URL('../bin/tr-proxy.js', import.meta.url))
// The build's modules import the package's dependencies: from a build outside the checkout, through a link.
if (dist && !existsSync(join(dist, 'node_modules'))) symlinkSync(fileURLToPath(new URL('../node_modules', import.meta.url)), join(dist, 'node_modules'))
if (dist)
  writeFileSync(entry, `import { runCli } from ${JSON.stringify(join(dist, 'cli', 'main.js'))}\nprocess.exitCode = await runCli(process.argv.slice(2))\n`)

/** One CLI run: ms from spawning it to the command's first act, and to its exit. */
async function run(sealed: boolean, i: number): Promise<{ startMs: number; totalMs: number }> {
  const argv = [entry, 'record', '--mode', 'passthrough', '--store', join(dir, 'store'), '-t', `t${i}`, ...(sealed ? ['--sealed'] : [])]
  const t0 = Date.now()
  const child = spawn(process.execPath, [...argv, '--', 'sh', '-c', `date +%s%3N > ${stamp}`], { stdio: ['ignore', 'ignore', 'pipe'] })
  let stderr = ''
  child.stderr.on('data', (d: Buffer) => (stderr += d))
  const [code] = await once(child, 'exit')
  if (code !== 0) throw new Error(`exit ${code}: ${stderr}`)
  return { startMs: Number(readFileSync(stamp, 'utf8').trim()) - t0, totalMs: Date.now() - t0 }
}

const stats = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b)
  const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))] as number
  return { median: at(0.5), p90: at(0.9) }
}

/** ms to start and end `node -e 0`: the machine's speed now, to read the other figures against. */
async function nodeStart(): Promise<number> {
  const t0 = Date.now()
  await once(spawn(process.execPath, ['-e', '0'], { stdio: 'ignore' }), 'exit')
  return Date.now() - t0
}

const runs = { unsealed: [] as Array<{ startMs: number; totalMs: number }>, sealed: [] as Array<{ startMs: number; totalMs: number }> }
// One of each first (the CA, the compile cache), not counted.
await run(false, -1)
await run(true, -2)
const nodeStarts: number[] = []
for (let i = 0; i < N; i++) {
  runs.unsealed.push(await run(false, 2 * i))
  runs.sealed.push(await run(true, 2 * i + 1))
  nodeStarts.push(await nodeStart())
}
console.log(
  `tr-proxy from ${dist ? `a build (${dist})` : 'the sources'}; N=${N}; load average ${loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')}`,
)
for (const key of ['startMs', 'totalMs'] as const) {
  const u = stats(runs.unsealed.map((r) => r[key]))
  const s = stats(runs.sealed.map((r) => r[key]))
  const label = key === 'startMs' ? 'to the command`s first act' : 'to the CLI`s exit'
  console.log(`${label.padEnd(28)} unsealed median ${u.median} ms (p90 ${u.p90}); sealed median ${s.median} ms (p90 ${s.p90}); added ${s.median - u.median} ms`)
}
const node = stats(nodeStarts).median
const added = stats(runs.sealed.map((r) => r.startMs)).median - stats(runs.unsealed.map((r) => r.startMs)).median
console.log(`\`node -e 0\` median ${node} ms now: the sealed start adds ${(added / node).toFixed(1)} such starts`)
rmSync(dir, { recursive: true, force: true })
