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
import { finishSharedSessionSetup, type SharedSessionSetup, startSharedSessionSetup } from './shared-session-setup.ts'

/** The parts of vitest used here, typed locally so this package builds without vitest installed. */
interface VitestApi {
  beforeAll(fn: () => unknown, timeout?: number): void
  afterAll(fn: () => unknown, timeout?: number): void
  expect: { getState(): { testPath?: string } }
}

// A non-literal specifier keeps tsc from resolving 'vitest' (an optional peer), while vitest resolves it at run time.
const vitestModule = 'vitest'
const { beforeAll, afterAll, expect } = (await import(vitestModule)) as VitestApi

let setup: SharedSessionSetup | undefined

beforeAll(async () => {
  const testFile = expect.getState().testPath
  setup = await startSharedSessionSetup(testFile ? { testFile } : {})
}, 60_000)

afterAll(async () => {
  const s = setup
  setup = undefined
  if (s) await finishSharedSessionSetup(s)
}, 60_000)
