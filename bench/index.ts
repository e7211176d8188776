/**
 * `npm run bench`: every ratio of issue 16 item 3 from one run, against peers measured in the same run.
 * Each suite runs in a Node process of its own (peers such as msw and nock patch globals; a suite's garbage and
 * threads stay its own) and hands back its rows; this prints them as one table (metric, ours, peer/limit,
 * ratio, target, result), then the profile summaries when BENCH_PROFILE=1.
 *
 *   npm run bench                          full run (about 20-30 minutes on a loaded 2-core machine)
 *   BENCH_QUICK=1 npm run bench            fewer rounds, smaller amounts (a few minutes)
 *   npm run bench -- --json > after.json   the table as JSON on stdout (human output on stderr), to diff runs
 *   npm run bench -- --json=after.json     the same into a file
 *   BENCH_PROFILE=1 npm run bench          also CPU-profiles our rows (after the measured rounds) and prints
 *                                          the top self-time functions and areas; .cpuprofile files kept in
 *                                          $BENCH_PROFILE_DIR (default: <tmp>/tool-replay-bench-profiles)
 *   BENCH_ONLY=in-process,proxy-get npm run bench   some suites only
 *   BENCH_ROUNDS=N                         rounds per comparison (default 3 quick, 5 full)
 *
 * Suites (bench/suites/*.ts, each runnable alone with node --conditions=tool-replay-source):
 * in-process, in-process-no-als, sse-in-process, proxy-get, proxy-sse, proxy-sse-live, proxy-record, proxy-mixed, cold-start, import.
 */
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { formatTable, type Metric, QUICK, type SuiteResult } from './lib/harness.ts'
import { formatProfile } from './lib/profile.ts'
import { NODE_ARGS } from './lib/servers.ts'

const SUITES = [
  'in-process',
  'in-process-no-als',
  'sse-in-process',
  'proxy-get',
  'proxy-sse',
  'proxy-sse-live',
  'proxy-record',
  'proxy-mixed',
  'cold-start',
  'import',
]

const jsonArg = process.argv.slice(2).find((a) => a === '--json' || a.startsWith('--json='))
/** `--quick` is BENCH_QUICK=1 (what `npm run bench:quick` passes). */
const quick = QUICK || process.argv.includes('--quick')
const only = process.env.BENCH_ONLY?.split(',').map((s) => s.trim())
const unknown = only?.filter((s) => !SUITES.includes(s)) ?? []
if (unknown.length) {
  process.stderr.write(`bench: unknown suite(s) ${unknown.join(', ')} in BENCH_ONLY; the suites are ${SUITES.join(', ')}\n`)
  process.exit(64)
}
const chosen = SUITES.filter((s) => !only || only.includes(s))

async function runSuiteProcess(name: string, dir: string): Promise<SuiteResult | { suite: string; error: string }> {
  const out = join(dir, `${name}.json`)
  const script = fileURLToPath(new URL(`./suites/${name}.ts`, import.meta.url))
  const child = spawn(process.execPath, [...NODE_ARGS, '--disable-warning=ExperimentalWarning', script], {
    stdio: ['ignore', 'inherit', 'pipe'],
    env: { ...process.env, BENCH_RESULT: out, ...(quick ? { BENCH_QUICK: '1' } : {}) },
  })
  let tail = ''
  child.stderr.on('data', (c: Buffer) => {
    process.stderr.write(c)
    tail = (tail + c).slice(-4000)
  })
  const [code] = await once(child, 'exit')
  if (code !== 0) return { suite: name, error: `exited ${code}: ${tail.trim().split('\n').slice(-6).join('\n')}` }
  return JSON.parse(readFileSync(out, 'utf8')) as SuiteResult
}

const t0 = performance.now()
const dir = mkdtempSync(join(tmpdir(), 'tr-bench-run-'))
const results: Array<SuiteResult | { suite: string; error: string }> = []
for (const name of chosen) results.push(await runSuiteProcess(name, dir))
rmSync(dir, { recursive: true, force: true })

const ok = results.filter((r): r is SuiteResult => 'rows' in r)
const failed = results.filter((r): r is { suite: string; error: string } => 'error' in r)
const rows: Metric[] = ok.flatMap((r) => r.rows)
const lines = [
  '',
  `Tool Replay benchmarks (${quick ? 'BENCH_QUICK' : 'full'}), Node ${process.version}, ${new Date().toISOString()}, ${((performance.now() - t0) / 1000).toFixed(0)} s`,
  'ours, peer: medians over interleaved rounds, peers measured in the same run; ratio: median of the per-round ratios (which way is better: see its unit).',
  '',
  ...ok.flatMap((r) => [`${r.title}:`, ...r.setup.map((s) => `  ${s}`)]),
  '',
  formatTable(rows),
  ...rows.filter((m) => m.note).map((m) => `  ${m.metric}: ${m.note}`),
  '',
  `${rows.filter((m) => m.pass === true).length} targets met, ${rows.filter((m) => m.pass === false).length} missed${failed.length ? `; ${failed.length} suite(s) FAILED` : ''}`,
  ...failed.map((f) => `FAILED ${f.suite}: ${f.error}`),
]
const profiles = ok.flatMap((r) => r.profiles)
if (profiles.length) lines.push('', 'Where our time goes (BENCH_PROFILE=1; self time, idle excluded):', ...profiles.map(formatProfile))
const text = `${lines.join('\n')}\n`
const json = `${JSON.stringify({ node: process.version, quick, date: new Date().toISOString(), suites: results }, null, 2)}\n`
if (jsonArg === '--json') {
  process.stderr.write(text)
  process.stdout.write(json)
} else {
  process.stdout.write(text)
  if (jsonArg) writeFileSync(jsonArg.slice('--json='.length), json)
}
process.exitCode = failed.length ? 1 : 0
