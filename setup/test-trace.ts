/**
 * Which trace and mode a test file records or replays, from TOOL_REPLAY_MODE and TOOL_REPLAY_TRACE: one rule
 * for every ready-made setup (the interceptor's node:test and vitest setups, and the shared-proxy ones).
 */
import { existsSync, readFileSync } from 'node:fs'
import { basename, dirname, isAbsolute, join, relative, resolve } from 'node:path'
import { MODES, type Mode, PROXY_RUN_ENV } from '../engine/index.ts'
import { ErrorCodes, ToolReplayError } from '../trace/index.ts'

/** How many folders up a test file's project root (its nearest package.json) is looked for. */
const MAX_ROOT_DEPTH = 64

/** The nearest folder at or above `file`'s folder that holds a package.json: the project the test file belongs to. */
export function projectRootOf(file: string): string | undefined {
  let dir = dirname(resolve(file))
  for (let i = 0; i < MAX_ROOT_DEPTH; i++) {
    if (existsSync(join(dir, 'package.json'))) return dir
    const up = dirname(dir)
    if (up === dir) return undefined
    dir = up
  }
  return undefined
}

/**
 * Trace name for a test file: its path from the project root (its nearest package.json), folders joined by `:`,
 * without the `.test.ts` ending: `test/checkout.test.ts` → `test:checkout`, and `a/index.test.ts` and
 * `b/index.test.ts` get `a:index` and `b:index`, never one shared trace. A file outside any project is named
 * after itself (`checkout`).
 */
export function traceNameForTestFile(file: string, root: string | undefined = projectRootOf(file)): string {
  const rel = root === undefined ? '' : relative(root, resolve(file))
  const path = rel === '' || rel.startsWith('..') || isAbsolute(rel) ? basename(file) : rel
  const segments = path.split(/[\\/]/)
  const last = (segments.pop() as string).replace(/\.(test|spec)\.[cm]?[jt]sx?$/, '').replace(/\.[cm]?[jt]sx?$/, '')
  const name = [...segments, last]
    .map((s) => s.replace(/[^A-Za-z0-9_.-]/g, '-').replace(/^\.+/, ''))
    .filter((s) => s !== '')
    .join(':')
  return name || 'tests'
}

/**
 * The mode (option, else TOOL_REPLAY_MODE, else replay) and trace of a test file (option, else its own name;
 * with TOOL_REPLAY_TRACE set, that names a group and the file gets its segment `GROUP:file`, so files sharing
 * the variable never replace each other's recordings).
 */
export function resolveTestTrace(o: {
  mode?: Mode | undefined
  trace?: string | undefined
  testFile?: string | undefined
  env?: Record<string, string | undefined> | undefined
}): {
  mode: Mode
  trace: string
} {
  const env = o.env ?? process.env
  // The test file defaults to the script node runs: with `node --test`, each file's own process.
  const testFile = o.testFile ?? process.argv[1]
  const rawMode = o.mode ?? env.TOOL_REPLAY_MODE ?? 'replay'
  if (!MODES.includes(rawMode as Mode)) {
    throw new ToolReplayError(ErrorCodes.INVALID_OPTION, `TOOL_REPLAY_MODE="${rawMode}" is not a mode. Use one of: ${MODES.join(', ')}.`)
  }
  const own = testFile ? traceNameForTestFile(testFile) : 'tests'
  const trace = o.trace ?? (env.TOOL_REPLAY_TRACE ? `${env.TOOL_REPLAY_TRACE}:${own}` : own)
  return { mode: rawMode as Mode, trace }
}

/**
 * True when the module whose specifier matches `specifier` was loaded with `--import` into a process that
 * runs test files itself (not the `node --test` parent, which only spawns one child per file, each of which
 * preloads it again).
 */
export function loadedAsTestPreload(specifier: RegExp, execArgv: readonly string[] = process.execArgv, env = process.env): boolean {
  const preloaded = execArgv.some((a, i) => {
    const value = a.startsWith('--import=') ? a.slice('--import='.length) : a === '--import' ? execArgv[i + 1] : undefined
    return value !== undefined && specifier.test(value)
  })
  if (!preloaded) return false
  const isRunnerParent = execArgv.includes('--test') && !env.NODE_TEST_CONTEXT && !execArgv.some((a) => a.startsWith('--test-isolation=none'))
  return !isRunnerParent
}

/** The test runners whose setups keep a command to run a test file again. */
export type TestRunner = 'node:test' | 'vitest'

/**
 * The command that runs one test file again (kept with the recording as its `meta.app`, so the inspector can
 * rerun it against a fork) and the labels that say which runner, file and test name pattern it is. For
 * node:test, `execArgv` is the file process's own: on Node 22 the runner's flags are already gone from it and a
 * `--test-name-pattern` is still there; from Node 24 it lists every option of the runner as a flag, defaults
 * too (`--stack-trace-limit=10`, `--inspect-port=127.0.0.1:9229`), so the runner's own command line
 * (`runnerCommandLine`) is read instead where it can be.
 */
export function testRunCommand(o: {
  runner: TestRunner
  testFile: string
  cwd: string
  execArgv: readonly string[]
  env: Record<string, string | undefined>
  /** The `node --test` runner's argv (Linux: /proc/PPID/cmdline); undefined where it cannot be read. */
  runnerCommandLine?: () => readonly string[] | undefined
}): { command: string[]; labels: Record<string, string> } {
  const rel = relative(o.cwd, o.testFile)
  const file = rel === '' || rel.startsWith('..') || isAbsolute(rel) ? o.testFile : rel
  const labels: Record<string, string> = { testRunner: o.runner, testFile: file }
  if (o.runner === 'vitest') return { command: ['npx', 'vitest', 'run', file], labels }
  const flags = o.env.NODE_TEST_CONTEXT ? fileProcessFlags(o.execArgv, o.runnerCommandLine) : o.execArgv
  const pattern = flags.find((a) => a.startsWith('--test-name-pattern='))?.slice('--test-name-pattern='.length)
  if (pattern !== undefined) labels.testName = pattern
  const runner = o.env.NODE_TEST_CONTEXT ? ['--test'] : []
  return { command: ['node', ...flags, ...runner, file], labels }
}

/** Flags of the runner that take their value as the next argument (`--import x`), beside those written `--x=v`. */
const VALUED_FLAGS = new Set(['-r', '--require', '-C', '--conditions', '--import', '--loader', '--experimental-loader', '--env-file', '--input-type'])

/**
 * The flags that start a node:test file as its runner did. When the runner handed its options over as flags
 * (Node 24+: `--test-isolation=process` among them), they are the runner's own command line without its file
 * patterns and `--test`; where that cannot be read, the handed-over flags without the runner's `--test-*` ones.
 */
function fileProcessFlags(execArgv: readonly string[], runnerCommandLine?: () => readonly string[] | undefined): readonly string[] {
  if (!execArgv.some((a) => a.startsWith('--test-isolation='))) return execArgv
  const argv = runnerCommandLine?.()
  if (!argv) return execArgv.filter((a) => !a.startsWith('--test-') || a.startsWith('--test-name-pattern='))
  const valued = new Set([...VALUED_FLAGS, ...execArgv.filter((a) => a.includes('=')).map((a) => a.slice(0, a.indexOf('=')))])
  const flags: string[] = []
  for (let i = 1; i < argv.length; i++) {
    const a = argv[i] as string
    if (a === '--') break
    if (!a.startsWith('-') || a === '--test') continue // a file pattern, or the runner's switch (added back after the flags)
    flags.push(a)
    if (!a.includes('=') && valued.has(a) && i + 1 < argv.length) flags.push(argv[++i] as string)
  }
  return flags
}

/** The argv of this process's parent, from /proc (Linux); undefined elsewhere or when it cannot be read. */
export function parentCommandLine(): readonly string[] | undefined {
  try {
    const text = readFileSync(`/proc/${process.ppid}/cmdline`, 'utf8')
    const argv = text.split('\0')
    if (argv.at(-1) === '') argv.pop()
    return argv.length > 0 ? argv : undefined
  } catch {
    return undefined
  }
}

/**
 * True in a command tr-proxy runs behind its proxy (PROXY_RUN_ENV). There the proxy captures the test file's
 * requests and keeps the run's outcome, so the in-process setups stand aside instead of capturing them into a
 * trace of their own.
 */
export function insideProxyRun(env: Record<string, string | undefined>): boolean {
  return env[PROXY_RUN_ENV] === '1'
}
