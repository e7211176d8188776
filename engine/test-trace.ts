/**
 * Which trace and mode a test file records or replays, from TOOL_REPLAY_MODE and TOOL_REPLAY_TRACE: one rule
 * for every ready-made setup (the interceptor's node:test and vitest setups, and the shared-proxy ones).
 */
import { basename } from 'node:path'
import { ErrorCodes, ToolReplayError } from '../trace/index.ts'
import { MODES, type Mode } from './session.ts'

/** Trace name for a test file: `e2e/checkout.test.ts` → `checkout`. */
export function traceNameForTestFile(file: string): string {
  const name = basename(file)
    .replace(/\.(test|spec)\.[cm]?[jt]sx?$/, '')
    .replace(/\.[cm]?[jt]sx?$/, '')
    .replace(/[^A-Za-z0-9_.:-]/g, '-')
    .replace(/^\.+/, '')
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
