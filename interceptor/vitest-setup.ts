/**
 * Tool Replay for vitest: list it in `setupFiles` and every test file records or replays its own trace.
 *
 *   // vitest.config.ts
 *   export default defineConfig({ test: { setupFiles: ['tool-replay/vitest'] } })
 *
 * Mode, trace and store come from TOOL_REPLAY_MODE / TOOL_REPLAY_TRACE / TOOL_REPLAY_STORE (as for
 * node:test); the trace defaults to the test file's name. After a file's tests, a strict replay that saw
 * any miss, overrun or unused recording fails that file (afterAll throws TR_REPLAY_INCOMPLETE).
 */
import { finishTestSetup, startTestSetup, type TestSetup } from './test-setup-options.ts'

/** The parts of vitest used here, typed locally so this package builds without vitest installed. */
interface VitestApi {
  beforeAll(fn: () => unknown, timeout?: number): void
  afterAll(fn: () => unknown, timeout?: number): void
  expect: { getState(): { testPath?: string } }
}

// A non-literal specifier keeps tsc from resolving 'vitest' (an optional peer), while vitest resolves it at run time.
const vitestModule = 'vitest'
const { beforeAll, afterAll, expect } = (await import(vitestModule)) as VitestApi

let setup: TestSetup | undefined

// The hook takes no parameter: vitest 4 parses a hook's first parameter as a fixture pattern, while
// older versions pass the suite there; expect's state names the running file in every version.
beforeAll(async () => {
  const testFile = expect.getState().testPath
  setup = await startTestSetup(testFile ? { testFile } : {})
}, 30_000)

afterAll(async () => {
  const s = setup
  setup = undefined
  if (s) await finishTestSetup(s)
}, 30_000)
