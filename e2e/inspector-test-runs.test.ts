/**
 * A run recorded by a test setup (`TOOL_REPLAY_MODE=record node --test --import tool-replay/node-test FILE`)
 * keeps the command that runs its test file again (runner, file, test name pattern), so the inspector reaches
 * fork → rerun → compare → promote with it, in a real browser: the rerun is `tr-proxy replay --strict --trace
 * BRANCH --record-as RUN -- node ... --test FILE`, where the setup stands aside and the proxy replays the
 * file's requests and keeps its outcome. The API is stopped after the recording: everything after is offline.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { writeFileSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { dirname, join } from 'node:path'
import { after, before, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { openStore } from 'tool-replay/store'
import { browserMissing, launchBrowser, visibleText } from './support/browser.ts'
import { type RunningInspector, startInspectCli } from './support/inspector-harness.ts'
import { tempDir } from './support/proxy-harness.ts'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const BIN = join(ROOT, 'bin/tr-proxy.js')
const skip = browserMissing()
const work = tempDir('tr-inspector-test-runs-')
const store = join(work, 'store')
const cases = join(work, 'cases')
const testFile = join(work, 'checkout-price.test.mjs')
const PATH = `${dirname(process.execPath)}:${process.env.PATH ?? ''}`
let api: ReturnType<typeof createServer>
let apiUrl = ''
let requests = 0
let inspector: RunningInspector
let browser: Awaited<ReturnType<typeof launchBrowser>>

/** An app's test: it reads a price from its API and refuses prices over 100. */
const APP_TEST = `
import { test } from 'node:test'
import assert from 'node:assert/strict'
test('the checkout accepts the price', async () => {
  const { price } = await (await fetch(process.env.APP_URL + '/price')).json()
  console.log('price', price)
  assert.ok(price < 100, 'price over the limit')
})
`

/** Runs a process in the repository root (where `--import tool-replay/node-test` resolves) with this Node first on PATH. */
async function run(cmd: string, args: string[], env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  // This file runs under node --test: drop the marker that would make a child runner skip its files.
  const { NODE_TEST_CONTEXT: _, ...parent } = process.env
  const child = spawn(cmd, args, { cwd: ROOT, env: { ...parent, PATH, APP_URL: apiUrl, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  child.stdout.on('data', (c: Buffer) => (out += c))
  child.stderr.on('data', (c: Buffer) => (out += c))
  const [code] = await once(child, 'exit')
  return { code: code as number | null, out }
}

before(async () => {
  if (skip) return
  api = createServer((_req, res) => {
    requests++
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end('{"price":10}')
  })
  await new Promise<void>((r) => api.listen(0, '127.0.0.1', () => r()))
  apiUrl = `http://127.0.0.1:${(api.address() as AddressInfo).port}`
  writeFileSync(testFile, APP_TEST)
  const rec = await run(process.execPath, ['--conditions=tool-replay-source', '--test', '--import', 'tool-replay/node-test', testFile], {
    TOOL_REPLAY_MODE: 'record',
    TOOL_REPLAY_STORE: store,
  })
  assert.equal(rec.code, 0, rec.out)
  assert.equal(requests, 1)
  await new Promise<void>((r) => api.close(() => r()))
  inspector = await startInspectCli(store, work, ['--cases', cases], { PATH, APP_URL: apiUrl })
  browser = await launchBrowser()
})
after(async () => {
  await browser?.close()
  await inspector?.stop()
  api?.close()
})

test('the recording keeps the test command: runner, file, and how to run it again', { skip }, async () => {
  const s = await openStore(store, { readOnly: true })
  try {
    const meta = (await s.openTrace('checkout-price')).info.meta
    assert.deepEqual(meta.app, {
      command: ['node', '--conditions=tool-replay-source', '--import', 'tool-replay/node-test', '--test', testFile],
      cwd: ROOT.replace(/\/$/, ''),
    })
    assert.equal(meta.labels?.testRunner, 'node:test')
    assert.equal(meta.labels?.testFile, testFile)
  } finally {
    await s.close()
  }
})

test('fork → rerun → compare → promote on a test-setup run, offline', { skip, timeout: 240_000 }, async () => {
  const page = await browser.context.newPage()
  const errors: string[] = []
  page.on('pageerror', (e) => errors.push(String(e)))
  await page.goto(`${inspector.url}#/run/checkout-price/x/0`)
  await page.getByTestId('open-rerun').waitFor()
  await page.getByTestId('tab-fork').click()
  await page.getByTestId('fork-path').fill('$.price')
  await page.getByTestId('fork-value').fill('1000')
  await page.getByTestId('fork-branch').fill('checkout-expensive')
  await page.getByTestId('fork-submit').click()
  await page.getByTestId('rerun-panel').waitFor()
  assert.match(
    await visibleText(page.getByTestId('rerun-command')),
    /tr-proxy replay --strict --trace checkout-expensive --record-as checkout-expensive-run -- node --conditions=tool-replay-source --import tool-replay\/node-test --test /,
  )
  await page.getByTestId('rerun-start').click()
  await page.getByTestId('rerun-verdict').waitFor({ timeout: 120_000 })
  assert.match(await visibleText(page.getByTestId('rerun-verdict')), /strict replay complete/)
  assert.match(await visibleText(page.getByTestId('rerun-app-exit')), /app exit 1/)
  assert.match(await visibleText(page.getByTestId('rerun-output')), /price over the limit/)
  assert.match(await visibleText(page.getByTestId('first-divergence')), /\$\.price: 10 → 1000/)
  await page.getByTestId('promote-name').fill('checkout-rejects-expensive')
  await page.getByTestId('promote-submit').click()
  await page.getByTestId('promote-result').waitFor({ timeout: 120_000 })
  const verify = await run(process.execPath, [BIN, 'verify', join(cases, 'checkout-rejects-expensive')], {})
  assert.equal(verify.code, 0, verify.out)
  assert.equal(requests, 1, 'nothing reached the API after the recording')
  assert.deepEqual(errors, [])
})
