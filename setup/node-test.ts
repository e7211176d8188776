/**
 * Tool Replay for Node's test runner. Either preload it for every test file:
 *
 *   TOOL_REPLAY_MODE=record node --test --import tool-replay/node-test
 *
 * or call `setupToolReplay()` at the top of a test file. One trace per test file (named after it unless
 * TOOL_REPLAY_TRACE says otherwise), in the store at TOOL_REPLAY_STORE (default `.tool-replay/store`).
 * After the file's tests, a strict replay that saw any miss, overrun or unused recording fails the run, and any
 * request made after that judgement (the file's own after() hooks run after the setup's) is refused and fails
 * it too: nothing goes out live.
 */
import { type InterceptorSession, refuseLateRequests } from '../interceptor/index.ts'
import { finishTestSetup, startTestSetup, type TestSetup, type TestSetupOptions } from './interceptor-setup.ts'
import { nodeTestFileSetup } from './node-test-file.ts'
import { loadedAsTestPreload } from './test-trace.ts'

export type { TestSetupOptions } from './interceptor-setup.ts'

/**
 * Installs the interceptor for this test file now and registers the end-of-file check with `after()`.
 * Calling it again (or after the preload did) returns the same session.
 * @example
 * const tr = await setupToolReplay({ trace: 'checkout' })
 */
export const setupToolReplay: (options?: TestSetupOptions) => Promise<InterceptorSession> = nodeTestFileSetup({
  start: startTestSetup,
  finish: finishTestSetup,
  // Restoring the previous dispatcher would let the file's own after() hooks, run after this one, go live.
  afterwards: (setup: TestSetup, options: TestSetupOptions) => {
    if (setup.interceptor.mode === 'replay' && options.global !== false && !setup.standsAside) refuseLateRequests(setup.interceptor.trace)
  },
  result: (setup: TestSetup) => setup.interceptor,
})

if (loadedAsTestPreload(/(tool-replay\/node-test|setup\/node-test\.[cm]?[jt]s)$/)) await setupToolReplay()
