/**
 * The ready-made vitest setup (`setupFiles: ['tool-replay/vitest']`) run by real vitest in a child process.
 * vitest is a devDependency, so this runs in CI; TOOL_REPLAY_VITEST_BIN can point at another vitest binary.
 * Without either (a production install), it is skipped and says why.
 */
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import http from 'node:http'
import { createRequire } from 'node:module'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'

const repoRoot = fileURLToPath(new URL('..', import.meta.url))

function vitestBin(): string | undefined {
  if (process.env.TOOL_REPLAY_VITEST_BIN) return process.env.TOOL_REPLAY_VITEST_BIN
  try {
    const pkg = createRequire(import.meta.url).resolve('vitest/package.json')
    return join(dirname(pkg), 'vitest.mjs')
  } catch {
    return undefined
  }
}

const bin = vitestBin()

const APP_TEST = `
import { test, expect } from 'vitest'
test('app talks to its API', async () => {
  const res = await fetch(process.env.APP_URL + '/hello')
  expect(await res.text()).toBe('hello from the api')
  if (process.env.EXTRA === '1') await fetch(process.env.APP_URL + '/never-recorded').catch(() => {})
})
`

test('vitest setupFiles: record, replay offline, fail the file on a swallowed miss', { skip: bin ? false : 'vitest is not installed' }, async (t) => {
  let hits = 0
  const server = http.createServer((_req, res) => {
    hits++
    res.end('hello from the api')
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const dir = await mkdtemp(join(tmpdir(), 'tr-vitest-'))
  t.after(() => rm(dir, { recursive: true, force: true }))
  await writeFile(join(dir, 'orders.test.mjs'), APP_TEST)
  await writeFile(
    join(dir, 'vitest.config.mjs'),
    `export default { test: { setupFiles: [${JSON.stringify(join(repoRoot, 'setup', 'vitest.ts'))}], include: ['*.test.mjs'] } }\n`,
  )
  const { NODE_TEST_CONTEXT: _, ...parentEnv } = process.env
  const env = { ...parentEnv, APP_URL: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, TOOL_REPLAY_STORE: join(dir, 'store'), NO_COLOR: '1' }
  const vitest = (extra: Record<string, string>) =>
    new Promise<{ code: number; out: string }>((resolve) => {
      execFile(process.execPath, [bin as string, 'run'], { cwd: dir, env: { ...env, ...extra } }, (err, stdout, stderr) =>
        resolve({ code: err ? Number((err as { code?: unknown }).code ?? 1) : 0, out: `${stdout}${stderr}` }),
      )
    })

  const recorded = await vitest({ TOOL_REPLAY_MODE: 'record' })
  assert.equal(recorded.code, 0, recorded.out)
  assert.equal(hits, 1)
  await new Promise<void>((resolve) => server.close(() => resolve()))
  const replayed = await vitest({})
  assert.equal(replayed.code, 0, replayed.out)
  const missed = await vitest({ EXTRA: '1' })
  assert.equal(missed.code, 1, missed.out)
  assert.match(missed.out, /TR_REPLAY_MISS GET http:\/\/127\.0\.0\.1:\d+\/never-recorded/)
  assert.match(missed.out, /Tool Replay replay of trace "orders": 1 replayed/)
  assert.equal(hits, 1, 'replays reached no server')
})
