/**
 * What the ready-made test setups do around a test file's tests: register vitest's hooks, and judge a strict
 * replay at the end (print the summary, mark the process failed, throw). Runner glue, kept apart from the
 * trace-naming rules in test-trace.ts; a request after the judgement is refused by capture's lateRequestRefusal.
 */

import { formatSummary, type SessionSummary } from '../engine/index.ts'
import { ErrorCodes, ToolReplayError } from '../trace/index.ts'

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
