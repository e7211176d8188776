/**
 * `import('tool-replay/interceptor')` from the packed package (bench/lib/packed.ts: `npm pack`, installed into a
 * scratch project, compiled JS with its production dependencies as users get it), timed in a fresh Node
 * process each time (performance.now() around the dynamic import), against importing undici and touching
 * `SnapshotAgent` in a fresh process from the same project (undici installed there as our dependency),
 * interleaved in rounds. Target: <= 100 ms.
 *
 *   node --conditions=tool-replay-source bench/suites/import.ts
 */
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { interleave, median, PROFILE, pick, runSuite } from '../lib/harness.ts'
import { packedProject } from '../lib/packed.ts'
import { childProfiles, cpuProfArgs, summarizeProfile } from '../lib/profile.ts'

const SOURCES: Record<string, string> = {
  'tool-replay/interceptor':
    "const t0 = performance.now(); const m = await import('tool-replay/interceptor'); if (typeof m.install !== 'function') throw new Error('no install'); process.stdout.write(String(performance.now() - t0))",
  'undici SnapshotAgent':
    "const t0 = performance.now(); const { SnapshotAgent } = await import('undici'); if (typeof SnapshotAgent !== 'function') throw new Error('no SnapshotAgent'); process.stdout.write(String(performance.now() - t0))",
}

async function importMs(cwd: string, source: string, nodeArgs: string[] = []): Promise<number> {
  const child = spawn(process.execPath, [...nodeArgs, '--input-type=module', '-e', source], { cwd, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  child.stdout.on('data', (c: Buffer) => (out += c))
  child.stderr.on('data', (c: Buffer) => (err += c))
  const [code] = await once(child, 'exit')
  if (code !== 0) throw new Error(`bench: import failed (${code}): ${err}`)
  return Number(out)
}

/**
 * Which modules the import loads, counted by package (Node's module.registerHooks sees every ESM and CommonJS
 * load after it is registered): what to trim when the import is slow.
 */
async function modulesLoaded(cwd: string): Promise<string> {
  const source = `import { registerHooks } from 'node:module'
const seen = new Map()
registerHooks({ load(url, context, next) {
  const m = /node_modules[/]((?:@[^/]+[/])?[^/]+)[/](?:dist[/])?([^/]*)/.exec(url)
  const key = m ? (m[1] === 'tool-replay' ? 'tool-replay/' + m[2] : m[1]) : url.startsWith('node:') ? 'node: built-ins' : 'other'
  seen.set(key, (seen.get(key) ?? 0) + 1)
  return next(url, context)
} })
await import('tool-replay/interceptor')
const total = [...seen.values()].reduce((a, b) => a + b, 0)
process.stdout.write(total + ' in all: ' + [...seen].sort((a, b) => b[1] - a[1]).slice(0, 14).map(([k, n]) => k + ' ' + n).join(', '))`
  const child = spawn(process.execPath, ['--input-type=module', '-e', source], { cwd, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  child.stdout.on('data', (c: Buffer) => (out += c))
  child.stderr.on('data', (c: Buffer) => (err += c))
  const [code] = await once(child, 'exit')
  return code === 0 ? out : `(could not count: ${err.trim().split('\n')[0]})`
}

await runSuite('import', "import('tool-replay/interceptor') from the packed package", async (report) => {
  const packed = await packedProject()
  report.setup(`packed tool-replay installed in ${packed.dir}; a fresh node process per import`)
  const ms = await interleave(Object.fromEntries(Object.entries(SOURCES).map(([name, source]) => [name, () => importMs(packed.dir, source)])), pick(5, 11), 50)
  const ours = median(ms['tool-replay/interceptor'] as number[])
  const peer = median(ms['undici SnapshotAgent'] as number[])
  report.row({
    id: 'import.interceptor',
    metric: "import('tool-replay/interceptor'), packed, fresh process",
    ours,
    unit: 'ms',
    peer: { name: 'SnapshotAgent import', value: peer },
    ratio: ours / peer,
    ratioOf: 'ours/peer',
    ratioText: 'x SnapshotAgent time',
    target: { kind: 'max', value: 100, text: '<= 100 ms', on: 'ours' },
    rounds: { ours: ms['tool-replay/interceptor'] as number[], peer: ms['undici SnapshotAgent'] as number[] },
  })
  if (PROFILE) {
    report.setup(`modules import('tool-replay/interceptor') loads, by package: ${await modulesLoaded(packed.dir)}`)
    const prof = cpuProfArgs('import tool-replay-interceptor')
    await importMs(packed.dir, SOURCES['tool-replay/interceptor'] as string, prof.args)
    for (const file of childProfiles(prof.dir)) report.profile(summarizeProfile("import('tool-replay/interceptor') (whole process)", file))
  }
})
