/**
 * A session of its own on a shared `tr-proxy serve` for every vitest file: list it in `setupFiles` and
 * start the serve once (`tr-proxy serve --sessions-only --port 8080`), with TOOL_REPLAY_PROXY naming it.
 *
 *   // vitest.config.ts
 *   export default defineConfig({ test: { setupFiles: ['tool-replay/proxy-vitest'] } })
 *
 * Mode and trace come from TOOL_REPLAY_MODE / TOOL_REPLAY_TRACE as for the interceptor's setup; after a
 * file's tests its session closes, and a strict replay that saw any problem fails the file.
 */
import { finishSharedSessionSetup, startSharedSessionSetup } from './proxy-session-setup.ts'
import { registerVitestFileHooks } from './test-hooks.ts'

await registerVitestFileHooks((testFile) => startSharedSessionSetup(testFile ? { testFile } : {}), finishSharedSessionSetup, 60_000)
