/**
 * Which trace and mode a test file records or replays, from TOOL_REPLAY_MODE and TOOL_REPLAY_TRACE: one rule
 * for every ready-made setup (the interceptor's node:test and vitest setups, and the shared-proxy ones).
 */
import { basename } from 'node:path'
import { ErrorCodes, ToolReplayError } from '../trace/index.ts'
import { formatSummary, type SessionSummary } from './ledger.ts'
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
export function resolveTestTrace(o: { mode?: Mode; trace?: string; testFile?: string; env: Record<string, string | undefined> }): {
  mode: Mode
  trace: string
} {
  const rawMode = o.mode ?? o.env.TOOL_REPLAY_MODE ?? 'replay'
  if (!MODES.includes(rawMode as Mode)) {
    throw new ToolReplayError(ErrorCodes.INVALID_OPTION, `TOOL_REPLAY_MODE="${rawMode}" is not a mode. Use one of: ${MODES.join(', ')}.`)
  }
  const own = o.testFile ? traceNameForTestFile(o.testFile) : 'tests'
  const trace = o.trace ?? (o.env.TOOL_REPLAY_TRACE ? `${o.env.TOOL_REPLAY_TRACE}:${own}` : own)
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

/**
 * A test setup's end-of-file judgement: a strict replay that saw a miss, an overrun or an unused recording
 * prints its summary, marks the process failed and throws TR_REPLAY_INCOMPLETE (even when the app swallowed
 * the errors). `advice` says how to fix it; `extra` (a seed line) goes after both.
 */
export function judgeTestReplay(summary: SessionSummary, advice: string, extra = ''): void {
  if (summary.mode !== 'replay' || summary.ok) return
  const text = formatSummary(summary)
  process.stderr.write(`${text}${extra}\n`)
  process.exitCode = 1
  throw new ToolReplayError(ErrorCodes.REPLAY_INCOMPLETE, `${text}\n${advice}${extra}`, { details: { summary } })
}

/** The parts of vitest the setups use, typed here so the package builds without vitest installed. */
interface VitestApi {
  beforeAll(fn: () => unknown, timeout?: number): void
  afterAll(fn: () => unknown, timeout?: number): void
  expect: { getState(): { testPath?: string } }
}

/**
 * Registers a vitest setup file's hooks: `start` before the file's tests (with the file's path), `finish` after
 * them. Hooks take no parameter: vitest 4 parses a hook's first parameter as a fixture pattern, while older
 * versions pass the suite there; expect's state names the running file in every version.
 */
export async function registerVitestFileHooks<T>(
  start: (testFile: string | undefined) => Promise<T>,
  finish: (setup: T) => Promise<unknown>,
  timeoutMs: number,
): Promise<void> {
  // A non-literal specifier keeps tsc from resolving 'vitest' (an optional peer), while vitest resolves it at run time.
  const vitestModule = 'vitest'
  const { beforeAll, afterAll, expect } = (await import(vitestModule)) as VitestApi
  let setup: T | undefined
  beforeAll(async () => {
    setup = await start(expect.getState().testPath)
  }, timeoutMs)
  afterAll(async () => {
    const s = setup
    setup = undefined
    if (s !== undefined) await finish(s)
  }, timeoutMs)
}
