/**
 * The ready-made node:test setup, run the way users run it: `node --test --import tool-replay/node-test`
 * in a child process, with TOOL_REPLAY_* variables; and `setupToolReplay()` called from a test file.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { openStore } from 'tool-replay/store'

const repoRoot = fileURLToPath(new URL('..', import.meta.url))

/** A test file as an app's suite would be: it only uses fetch. EXTRA=1 adds a request that was never recorded, and swallows its failure. */
const APP_TEST = `
import { test } from 'node:test'
import assert from 'node:assert/strict'
test('app talks to its API', async () => {
  const res = await fetch(process.env.APP_URL + '/hello')
  assert.equal(await res.text(), 'hello from the api')
  if (process.env.EXTRA === '1') await fetch(process.env.APP_URL + '/never-recorded').catch(() => {})
})
`

function run(args: string[], env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    // This file itself runs under node --test: drop the marker that would make the child skip its files.
    const { NODE_TEST_CONTEXT: _, ...parentEnv } = process.env
    const child = spawn(process.execPath, ['--conditions=tool-replay-source', ...args], {
      cwd: repoRoot,
      env: { ...parentEnv, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let out = ''
    child.stdout.on('data', (c: Buffer) => (out += c.toString()))
    child.stderr.on('data', (c: Buffer) => (out += c.toString()))
    child.on('close', (code) => resolve({ code, out }))
  })
}

test('node --test --import tool-replay/node-test: record, replay offline, and fail the run on a swallowed miss', async (t) => {
  let hits = 0
  const server = http.createServer((_req, res) => {
    hits++
    res.end('hello from the api')
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const appUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const dir = await mkdtemp(join(tmpdir(), 'tr-node-test-'))
  t.after(() => rm(dir, { recursive: true, force: true }))
  const testFile = join(dir, 'checkout-flow.test.mjs')
  await writeFile(testFile, APP_TEST)
  const storeDir = join(dir, 'store')
  const base = { APP_URL: appUrl, TOOL_REPLAY_STORE: storeDir }
  const args = ['--test', '--import', 'tool-replay/node-test', testFile]

  const recorded = await run(args, { ...base, TOOL_REPLAY_MODE: 'record' })
  assert.equal(recorded.code, 0, recorded.out)
  assert.equal(hits, 1)
  await new Promise<void>((resolve) => server.close(() => resolve()))

  const store = await openStore(storeDir)
  const names = (await store.listTraces()).map((s) => `${s.name}:${s.status}`)
  await store.close()
  assert.deepEqual(names, ['checkout-flow:complete'], 'one trace, named after the test file')

  const replayed = await run(args, base)
  assert.equal(replayed.code, 0, replayed.out)

  const swallowed = await run(args, { ...base, EXTRA: '1' })
  assert.equal(swallowed.code, 1, swallowed.out)
  assert.match(swallowed.out, /TR_REPLAY_MISS GET http:\/\/127\.0\.0\.1:\d+\/never-recorded/)
  assert.match(swallowed.out, /1 unmatched/)
  assert.equal(hits, 1, 'replays reached no server')
})

test('setupToolReplay() called from a test file, with an explicit trace name', async (t) => {
  const server = http.createServer((_req, res) => res.end('hello from the api'))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const appUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const dir = await mkdtemp(join(tmpdir(), 'tr-node-test-'))
  t.after(() => rm(dir, { recursive: true, force: true }))
  const setupUrl = pathToFileURL(join(repoRoot, 'setup', 'node-test.ts')).href
  const testFile = join(dir, 'direct.test.mjs')
  await writeFile(
    testFile,
    `import { setupToolReplay } from ${JSON.stringify(setupUrl)}\nconst tr = await setupToolReplay({ trace: 'explicit-name' })\nif (tr.trace !== 'explicit-name') throw new Error('wrong trace')\n${APP_TEST}`,
  )
  const base = { APP_URL: appUrl, TOOL_REPLAY_STORE: join(dir, 'store') }

  const recorded = await run(['--test', testFile], { ...base, TOOL_REPLAY_MODE: 'record' })
  assert.equal(recorded.code, 0, recorded.out)
  await new Promise<void>((resolve) => server.close(() => resolve()))
  const replayed = await run(['--test', testFile], base)
  assert.equal(replayed.code, 0, replayed.out)
  const missing = await run(['--test', testFile], { ...base, EXTRA: '1' })
  assert.equal(missing.code, 1, missing.out)
  assert.match(missing.out, /TR_REPLAY_MISS/)
})

test('several test files sharing TOOL_REPLAY_TRACE each keep their own segment: none replaces another', async (t) => {
  let hits = 0
  const server = http.createServer((req, res) => {
    hits++
    res.end(req.url === '/hello' ? 'hello from the api' : 'other')
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const appUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const dir = await mkdtemp(join(tmpdir(), 'tr-node-test-shared-'))
  t.after(() => rm(dir, { recursive: true, force: true }))
  const files = [join(dir, 'cart.test.mjs'), join(dir, 'payment.test.mjs')]
  await writeFile(files[0] as string, APP_TEST)
  await writeFile(files[1] as string, APP_TEST.replace("'/hello'", "'/other'").replace('hello from the api', 'other'))
  const base = { APP_URL: appUrl, TOOL_REPLAY_STORE: join(dir, 'store'), TOOL_REPLAY_TRACE: 'checkout' }
  const args = ['--test', '--import', 'tool-replay/node-test', ...files]

  const recorded = await run(args, { ...base, TOOL_REPLAY_MODE: 'record' })
  assert.equal(recorded.code, 0, recorded.out)
  assert.equal(hits, 2)
  await new Promise<void>((resolve) => server.close(() => resolve()))
  const store = await openStore(join(dir, 'store'))
  const names = (await store.listTraces()).map((s) => s.name).sort()
  await store.close()
  assert.deepEqual(names, ['checkout:cart', 'checkout:payment'])
  // Both files replay strictly: before, the last file to finish replaced the shared trace and the other
  // file's replay failed with TR_REPLAY_UNUSED / TR_REPLAY_MISS.
  const replayed = await run(args, base)
  assert.equal(replayed.code, 0, replayed.out)
  assert.equal(hits, 2)
})
