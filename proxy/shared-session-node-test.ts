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
import { after } from 'node:test'
import { loadedAsTestPreload } from '../engine/index.ts'
import type { SharedProxySession } from './shared-session.ts'
import { finishSharedSessionSetup, type SharedSessionSetup, type SharedSessionSetupOptions, startSharedSessionSetup } from './shared-session-setup.ts'

export type { SharedSessionSetupOptions } from './shared-session-setup.ts'

let current: Promise<SharedSessionSetup> | undefined

/**
 * Opens this test file's session on the shared proxy now and registers its end with `after()`. Calling it
 * again (or after the preload did) returns the same session.
 * @example
 * const session = await setupProxySession({ trace: 'checkout' })
 * spawn('node', ['app.js'], { env: { ...process.env, ...session.env } })
 */
export async function setupProxySession(options: SharedSessionSetupOptions = {}): Promise<SharedProxySession> {
  if (!current) {
    current = startSharedSessionSetup(options)
    const setup = await current
    after(async () => {
      try {
        await finishSharedSessionSetup(setup)
      } finally {
        // Restoring the previous dispatcher would let the file's own after() hooks, run after this one, go live.
        if (setup.session.mode === 'replay') await setup.refuseLateRequests()
      }
    })
  }
  return (await current).session
}

if (loadedAsTestPreload(/(tool-replay\/proxy-node-test|shared-session-node-test\.[cm]?[jt]s)$/)) await setupProxySession()
