#!/usr/bin/env node
// Runs the test suite with Node's built-in runner (type stripping, no build step).
//   node scripts/run-tests.mjs [unit|e2e|all] [extra node --test args]
//   node scripts/run-tests.mjs FILE.test.ts ... [extra node --test args]   (those files only, each in its own process)
// Unit tests live beside the code (*.test.ts); end-to-end tests in e2e/.
// `unit` is the edit loop: the beside-code files in a few processes (no start-up per file), leaving out the
// few that spawn processes or wait seconds on real time (SLOW_UNITS). `all` runs those same files the same way,
// beside the packed package's build, then every other file (SLOW_UNITS, e2e) in its own process, one more at a
// time than there are cores, the longest first; `e2e` and named files run each file in its own process the same way.
// First: on a Node too old for the sources it stops here, saying what to run instead.
import './require-node.mjs'
import { spawn } from 'node:child_process'
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { availableParallelism, tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { CHECKED_OUTSIDE, PACKAGE_FOLDERS } from './folders.mjs'

const named = process.argv.slice(2).filter((a) => /\.test\.[cm]?ts$/.test(a) && !a.startsWith('-'))
const rest = process.argv.slice(2).filter((a) => !named.includes(a))
const which = named.length > 0 ? 'files' : rest[0] && !rest[0].startsWith('-') ? rest[0] : 'all'
if (!['unit', 'e2e', 'all', 'files'].includes(which)) {
  console.error(`Unknown test selection "${which}": name unit, e2e, all, or test files (FILE.test.ts).`)
  process.exit(64)
}
// A selection word beside named files (`unit FILE.test.ts`) is dropped: the names say what runs.
const extra = which === rest[0] || (which === 'files' && ['unit', 'e2e', 'all'].includes(rest[0])) ? rest.slice(1) : rest
const unitDirs = [...PACKAGE_FOLDERS, ...CHECKED_OUTSIDE.filter((f) => f !== 'e2e')]
const SLOW_UNITS = new Set([
  'store/level-store.test.ts', // LevelDB on disk at scale, reopened many times (~37 s)
  'store/level-store-processes.test.ts', // recording processes spawned and killed (~27 s)
  'engine/arrival-order.test.ts', // waits out turn timeouts on the real clock (~14 s)
  'assets/cache-lock.test.ts', // lock holders in child processes
  'scripts/check-layers.test.ts', // copies the checkout to break it
  'store/trace-file-thread.test.ts', // worker threads and a process of their own (~3 s)
  'store/body-thread.test.ts', // a worker thread on a LevelDB store, two exports of 700 exchanges (~1.3 s)
  'scripts/check-sizes.test.ts', // parses every source of the checkout with TypeScript, and runs the script (~2 s)
])
const dirs = which === 'unit' ? unitDirs : which === 'e2e' ? ['e2e'] : [...unitDirs, 'e2e']

const files = []
const walk = (dir) => {
  let entries
  try {
    entries = readdirSync(dir)
  } catch {
    return
  }
  for (const name of entries.sort()) {
    const p = join(dir, name)
    if (name === 'node_modules' || name.startsWith('.')) continue
    if (statSync(p).isDirectory()) walk(p)
    else if (name.endsWith('.test.ts') && !(which === 'unit' && SLOW_UNITS.has(p))) files.push(p)
  }
}
if (which === 'files') files.push(...named)
else for (const d of dirs) walk(d)
if (files.length === 0) {
  console.error('No test files found.')
  process.exit(1)
}
// `all`: the files `unit` runs, in one process as `unit` runs them (one start-up instead of ~130), beside the build.
const batched = which === 'all' ? files.filter((f) => !f.startsWith('e2e') && !SLOW_UNITS.has(f)) : which === 'unit' ? files : []
// The longest files (15-58 s each on a 2-core machine, Node 24, 2026-12-07; docker-image.test.ts runs only where
// its image can be built), started first: last in line, one of them ran alone at the end of the run while the
// other cores had nothing left to do.
const LONG_FILES = [
  'e2e/assets-push-memory.test.ts',
  'e2e/assets-restore-memory.test.ts',
  'e2e/trace-files-memory.test.ts',
  'e2e/ci-recipes.test.ts',
  'e2e/docker-image.test.ts',
  'e2e/llm-record-twice.test.ts',
  'e2e/first-hour-traps.test.ts',
  'e2e/proxy-slow-clients.test.ts',
  'e2e/proxy-session-setups.test.ts',
  'e2e/trace-fuzz.test.ts',
  'e2e/faults-test-setups.test.ts',
  'store/level-store.test.ts',
  'e2e/approval-agent.test.ts',
  'e2e/first-hour.test.ts',
  'e2e/store-damage.test.ts',
  'e2e/promoted-tests.test.ts',
  'e2e/mcp-agent-example.test.ts',
]
// The unit files that take longest in the batched run, in ms (their tests' time in one process, 2-core machine,
// 2026-12-07); any other file counts UNIT_MS_OTHER (its tests and its share of the imports).
const UNIT_MS = {
  'cli/cli.test.ts': 2100,
  'engine/replay-source.test.ts': 1200,
  'faults/fault-planner.test.ts': 700,
  'store/leveldb-view.test.ts': 1000,
  'interceptor/internal-connection.test.ts': 800,
  'examples/quickstart/quickstart.test.ts': 750,
  'store/memory-store.test.ts': 700,
  'scripts/reference.test.ts': 650,
  'store/trace-file.test.ts': 600,
  'cli/show-pages.test.ts': 600,
  'trace/llm/llm-view.test.ts': 500,
  'engine/chunk-channel.test.ts': 450,
  'store/digest-index.test.ts': 450,
  'proxy/response-target.test.ts': 350,
  'engine/body-redaction.test.ts': 300,
  'scripts/strip-cache.test.ts': 300,
}
const UNIT_MS_OTHER = 60
const rank = (f) => (LONG_FILES.includes(f) ? LONG_FILES.indexOf(f) : LONG_FILES.length)
const isolated = files.filter((f) => !batched.includes(f)).sort((a, b) => rank(a) - rank(b))
// Every process the run starts (each test file, each CLI and SDK process a test spawns) shares Node's compile
// cache, so a module compiled once is not compiled again by the next process: most of the suite's CPU is such
// starts. Node 22 caches JavaScript; Node 24 and later also the type-stripped sources. Unless the caller chose.
const env = { ...process.env }
if (env.NODE_COMPILE_CACHE === undefined && env.NODE_DISABLE_COMPILE_CACHE === undefined) {
  env.NODE_COMPILE_CACHE = join(tmpdir(), 'tool-replay-test-compile-cache')
}
// On Node 22 every process also keeps the type-stripped sources on disk (scripts/strip-cache.mjs: Node 24 and
// later do that in the compile cache). Through NODE_OPTIONS, so the CLI and app processes tests start get it too.
if (process.versions.node.startsWith('22.')) {
  const stripCache = new URL('./strip-cache.mjs', import.meta.url).href
  env.NODE_OPTIONS = [env.NODE_OPTIONS, `--import="${stripCache}"`].filter(Boolean).join(' ')
}
// Bounded: a file that never ends (a hook waiting on a process that will not exit) must fail the run in time
// for CI's limit, not hold it. Each test has its own 120 s; the whole run gets RUN_LIMIT_MIN minutes.
const RUN_LIMIT_MIN = Number(process.env.TOOL_REPLAY_TEST_RUN_LIMIT_MIN ?? 25)
const deadline = Date.now() + RUN_LIMIT_MIN * 60_000
// The batched files dealt to one process more than there are cores (their tests run one after another in a
// process, and a fifth of a process's time is spent waiting on a child process, a timer or the disk: `npm run
// test:unit` took 23 s in one process, 13 s in two, 11-12 s in three on 2 cores), each report printed whole,
// the first as it runs.
const unitGroups = deal(batched, Math.min(availableParallelism() + 1, 5))
const held = unitGroups.map(() => [])
const [built, ...inOne] = await Promise.all([
  buildPackedOnce(isolated, env),
  ...unitGroups.map((group, i) => runFiles(group, ['--experimental-test-isolation=none'], i > 0 ? held[i] : undefined)),
])
for (const [out, chunk] of held.flat()) (out ? process.stdout : process.stderr).write(chunk)
// One file more than there are cores: a file spends part of its time waiting on the processes it starts (the
// suite used 1.47 of 2 cores two at a time; three at a time, 651 s became 602 s, every test green).
const apart = built ? await runFiles(isolated, [`--test-concurrency=${availableParallelism() + 1}`]) : 1
process.exit(inOne.find((status) => status !== 0) ?? apart)

/**
 * `list` dealt into `n` groups of about equal time: the heaviest file first, each to the group with the least so
 * far (UNIT_MS; each group keeps the list's order). Dealt round-robin, one group took 12.3 s and the other 8.5.
 */
function deal(list, n) {
  const groups = Array.from({ length: Math.max(1, n) }, () => ({ files: [], ms: 0 }))
  const weight = (f) => UNIT_MS[f] ?? UNIT_MS_OTHER
  for (const f of [...list].sort((a, b) => weight(b) - weight(a))) {
    const lightest = groups.reduce((a, b) => (b.ms < a.ms ? b : a))
    lightest.files.push(f)
    lightest.ms += weight(f)
  }
  return groups.map((g) => list.filter((f) => g.files.includes(f))).filter((g) => g.length > 0)
}

/**
 * Runs `selected` in one `node --test` (0 when there are none); its exit status, or 1 when the run limit stops
 * it. With `kept`, its output goes there ([is stdout, chunk]) to be written later, so two reports never interleave.
 */
function runFiles(selected, isolation, kept) {
  if (selected.length === 0) return Promise.resolve(0)
  const args = ['--conditions=tool-replay-source', '--test', ...isolation, '--test-timeout=120000', ...extra, ...selected]
  return new Promise((resolve) => {
    // A held report is piped, so it would come as TAP; on a terminal it is asked for in the first one's form.
    const form = kept && process.stdout.isTTY && !extra.some((a) => a.startsWith('--test-reporter')) ? ['--test-reporter=spec'] : []
    const child = spawn(process.execPath, [...form, ...args], { stdio: kept ? ['ignore', 'pipe', 'pipe'] : 'inherit', env })
    if (kept) for (const stream of [child.stdout, child.stderr]) stream.on('data', (chunk) => kept.push([stream === child.stdout, chunk]))
    let stopped = false
    const timer = setTimeout(
      () => {
        stopped = true
        child.kill('SIGTERM')
      },
      Math.max(0, deadline - Date.now()),
    )
    child.on('close', (status) => {
      clearTimeout(timer)
      if (stopped) {
        console.error(
          `The test run passed its limit of ${RUN_LIMIT_MIN} minutes and was stopped: a file above did not end (set TOOL_REPLAY_TEST_RUN_LIMIT_MIN to allow more).`,
        )
      }
      resolve(stopped ? 1 : (status ?? 1))
    })
  })
}

/**
 * The files that install the packed package (e2e/support/packed-package.ts, through promoted-project.ts too)
 * share one tarball, cached in the temp dir by a hash of the sources. It is built here, once, before any file
 * starts: otherwise the first two such files (two run at once) both build it from cold, inside their own test
 * timeout, beside the rest of the suite (a timeout at load 13-16).
 */
async function buildPackedOnce(selected, childEnv) {
  const users = selected.filter((f) => f.startsWith('e2e') && /support\/(packed-package|promoted-project)\.ts/.test(readFileSync(f, 'utf8')))
  if (users.length === 0) return true
  const packed = pathToFileURL(join(import.meta.dirname, '..', 'e2e', 'support', 'packed-package.ts')).href
  const t0 = performance.now()
  const status = await new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      ['--conditions=tool-replay-source', '--input-type=module', '-e', `await (await import(${JSON.stringify(packed)})).packedTarball()`],
      { stdio: 'inherit', env: childEnv },
    )
    child.on('close', (code) => resolve(code))
  })
  if (status !== 0) {
    console.error(`Failed to build the packed package that ${users.join(', ')} install: see the output above, or run npm run build.`)
    return false
  }
  const s = (performance.now() - t0) / 1000
  if (s >= 1) console.error(`Built the packed package once for ${users.length} test files (${s.toFixed(1)} s), before the tests.`)
  return true
}
