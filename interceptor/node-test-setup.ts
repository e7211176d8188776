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
import { after } from 'node:test'
import { loadedAsTestPreload } from '../engine/index.ts'
import type { InterceptorSession } from './install.ts'
import { refuseLateRequests } from './late-requests.ts'
import { finishTestSetup, startTestSetup, type TestSetup, type TestSetupOptions } from './test-setup-options.ts'

export type { TestSetupOptions } from './test-setup-options.ts'

let current: Promise<TestSetup> | undefined

/**
 * Installs the interceptor for this test file now and registers the end-of-file check with `after()`.
 * Calling it again (or after the preload did) returns the same session.
 * @example
 * const tr = await setupToolReplay({ trace: 'checkout' })
 */
export async function setupToolReplay(options: TestSetupOptions = {}): Promise<InterceptorSession> {
  if (!current) {
    current = startTestSetup(options)
    const setup = await current
    after(async () => {
      try {
        await finishTestSetup(setup)
      } finally {
        // Restoring the previous dispatcher would let the file's own after() hooks, run after this one, go live.
        if (setup.interceptor.mode === 'replay' && options.global !== false && !setup.standsAside) refuseLateRequests(setup.interceptor.trace)
      }
    })
  }
  return (await current).interceptor
}

if (loadedAsTestPreload(/(tool-replay\/node-test|node-test-setup\.[cm]?[jt]s)$/)) await setupToolReplay()
