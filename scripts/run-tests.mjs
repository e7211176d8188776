#!/usr/bin/env node
// Runs the test suite with Node's built-in runner (type stripping, no build step).
//   node scripts/run-tests.mjs [unit|e2e|all] [extra node --test args]
//   node scripts/run-tests.mjs FILE.test.ts ... [extra node --test args]   (those files only, each in its own process)
// Unit tests live beside the code (*.test.ts); end-to-end tests in e2e/.
// `unit` is the edit loop: the beside-code files in one process (no start-up per file), leaving out the few that
// spawn processes or wait seconds on real time (SLOW_UNITS). `all` runs those same files the same way, in one
// process beside the packed package's build, then every other file (SLOW_UNITS, e2e) in its own process, two at a
// time; `e2e` and named files run each file in its own process, two at a time.
// First: on a Node too old for the sources it stops here, saying what to run instead.
import './require-node.mjs'
import { spawn } from 'node:child_process'
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
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
const isolated = files.filter((f) => !batched.includes(f))
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
const [built, inOne] = await Promise.all([buildPackedOnce(isolated, env), runFiles(batched, ['--experimental-test-isolation=none'])])
const apart = built ? await runFiles(isolated, ['--test-concurrency=2']) : 1
process.exit(inOne || apart)

/** Runs `selected` in one `node --test` (0 when there are none); its exit status, or 1 when the run limit stops it. */
function runFiles(selected, isolation) {
  if (selected.length === 0) return Promise.resolve(0)
  const args = ['--conditions=tool-replay-source', '--test', ...isolation, '--test-timeout=120000', ...extra, ...selected]
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { stdio: 'inherit', env })
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
