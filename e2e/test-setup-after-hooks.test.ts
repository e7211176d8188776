/**
 * A request made in a test file's own `after()` hook never goes out live under the node:test setups (issue 16,
 * item 6). node:test runs a file's `after()` hooks in the order they were registered, so the setup's (registered
 * first, by the preload) judges the strict replay before the file's own hooks run; it used to restore the
 * previous dispatcher, and the hook's fetch (or node:http request) reached the network with the run passing.
 * Now a refusing dispatcher stays installed: the request gets the refusal response, the upstream sees no
 * connection, and the run fails naming the request. Both setups: the interceptor's (tool-replay/node-test) and
 * the shared proxy's (tool-replay/proxy-node-test).
 */
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { tempDir } from './support/proxy-harness.ts'
import { type CountingUpstream, REPO_ROOT, type ServeProcess, startCountingUpstream, startServe } from './support/session-serve.ts'

/**
 * The app's test file: one request in its test, one more in its own after() hook, and with AFTER_HTTP=1 a
 * node:http one too (the interceptor captures node:http in-process; the shared-proxy setup routes fetch and children).
 */
const APP_TEST = `
import { after, test } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
test('talks to its API', async () => {
  const res = await fetch(process.env.APP_URL + '/in-test')
  assert.equal(res.status, 200)
  await res.text()
})
after(async () => {
  // Cleanup code that swallows failures, as cleanup often does.
  const res = await fetch(process.env.APP_URL + '/in-after-hook').catch((err) => err)
  console.log('after-hook fetch: ' + (res.status ?? res.message))
  if (process.env.AFTER_HTTP !== '1') return
  const status = await new Promise((resolve) => {
    http.get(process.env.APP_URL + '/in-after-hook-http', (r) => { r.resume(); resolve(r.statusCode) }).on('error', (err) => resolve(err.code))
  })
  console.log('after-hook node:http: ' + status)
})
`

let upstream: CountingUpstream
let serve: ServeProcess
const work = tempDir('tr-after-hooks-')
const storeDir = join(work, 'store')

before(async () => {
  upstream = await startCountingUpstream()
  serve = await startServe(['--sessions-only', '--store', storeDir, '--port', '0'])
})
after(async () => {
  await serve?.stop()
  await upstream?.close()
})

function runNode(args: string[], env: Record<string, string>): Promise<{ code: number; out: string }> {
  // This file itself runs under node --test: drop the marker that would make the child skip its files.
  const { NODE_TEST_CONTEXT: _, ...parentEnv } = process.env
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--conditions=tool-replay-source', ...args],
      { cwd: REPO_ROOT, env: { ...parentEnv, NO_COLOR: '1', ...env }, timeout: 120_000 },
      (err, stdout, stderr) => resolve({ code: err ? Number((err as { code?: unknown }).code ?? 1) : 0, out: `${stdout}${stderr}` }),
    )
  })
}

describe('node:test setups: a request in the file own after() hook', { timeout: 240_000 }, () => {
  for (const [setup, extra] of [
    ['tool-replay/node-test', { AFTER_HTTP: '1' }],
    ['tool-replay/proxy-node-test', { TOOL_REPLAY_PROXY: '' }],
  ] as const) {
    test(`${setup}: is refused in strict replay and fails the run; the upstream sees nothing`, async () => {
      const file = join(work, `${setup.replace(/\W/g, '-')}.test.mjs`)
      await writeFile(file, APP_TEST)
      const env: Record<string, string> = { APP_URL: `http://127.0.0.1:${upstream.httpPort}`, TOOL_REPLAY_STORE: storeDir, ...extra }
      if ('TOOL_REPLAY_PROXY' in env) env.TOOL_REPLAY_PROXY = serve.url
      const args = ['--test', '--import', setup, file]
      // While recording, the hook's requests come after the recording closed: they go live and are not recorded.
      const recorded = await runNode(args, { ...env, TOOL_REPLAY_MODE: 'record' })
      assert.equal(recorded.code, 0, recorded.out)
      const connections = upstream.connections
      const seen = upstream.seen.length

      const replayed = await runNode(args, { ...env, TOOL_REPLAY_MODE: 'replay' })
      assert.equal(upstream.connections, connections, `replay opened no connection:\n${replayed.out}`)
      assert.equal(upstream.seen.length, seen)
      assert.equal(replayed.code, 1, replayed.out)
      assert.match(replayed.out, /after-hook fetch: 403/)
      if ('AFTER_HTTP' in env) assert.match(replayed.out, /after-hook node:http: 403/)
      assert.match(replayed.out, /TR_REPLAY_MISS GET http:\/\/127\.0\.0\.1:\d+\/in-after-hook: refused, it came after trace "[^"]+" was judged/)
    })
  }
})
