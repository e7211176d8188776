/**
 * A session of its own on a shared `tr-proxy serve` for every node:test file. Start the serve once, then
 * preload this for the test files:
 *
 *   tr-proxy serve --sessions-only --port 8080 &
 *   TOOL_REPLAY_PROXY=http://127.0.0.1:8080 TOOL_REPLAY_MODE=record node --import tool-replay/proxy-node-test --test
 *
 * Each file opens a session named after it (trace from TOOL_REPLAY_TRACE / the file, as the interceptor's
 * setup names them), runs with its fetch and its children routed through that session, and closes it after
 * its tests; a strict replay that saw any miss, overrun or unused recording fails the run, and any request made
 * after that judgement (the file's own after() hooks run after the setup's) is refused and fails it too.
 */
import type { SharedProxySession } from '../proxy/index.ts'
import { nodeTestFileSetup } from './node-test-file.ts'
import { finishSharedSessionSetup, type SharedSessionSetup, type SharedSessionSetupOptions, startSharedSessionSetup } from './proxy-session-setup.ts'
import { loadedAsTestPreload } from './test-trace.ts'

export type { SharedSessionSetupOptions } from './proxy-session-setup.ts'

/**
 * Opens this test file's session on the shared proxy now and registers its end with `after()`. Calling it
 * again (or after the preload did) returns the same session.
 * @example
 * const session = await setupProxySession({ trace: 'checkout' })
 * spawn('node', ['app.js'], { env: { ...process.env, ...session.env } })
 */
export const setupProxySession: (options?: SharedSessionSetupOptions) => Promise<SharedProxySession> = nodeTestFileSetup({
  start: startSharedSessionSetup,
  finish: finishSharedSessionSetup,
  // Restoring the previous dispatcher would let the file's own after() hooks, run after this one, go live.
  afterwards: async (setup: SharedSessionSetup) => {
    if (setup.session.mode === 'replay') await setup.refuseLateRequests()
  },
  result: (setup: SharedSessionSetup) => setup.session,
})

if (loadedAsTestPreload(/(tool-replay\/proxy-node-test|setup\/proxy-node-test\.[cm]?[jt]s)$/)) await setupProxySession()
