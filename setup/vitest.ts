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
import { finishTestSetup, startTestSetup } from './interceptor-setup.ts'
import { registerVitestFileHooks } from './test-hooks.ts'

await registerVitestFileHooks((testFile) => startTestSetup(testFile ? { testFile } : {}, 'vitest'), finishTestSetup, 30_000)
