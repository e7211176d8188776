/**
 * The live view in a real browser: while `tr-proxy record` serves and records into the store, each exchange it
 * records appears on the page within a second (server-sent events over a poll of the store), the run shows as
 * recording now, and it turns complete when the proxy stops.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { createServer, request } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { openStore } from 'tool-replay/store'
import { browserMissing, launchBrowser } from './support/browser.ts'
import { type RunningInspector, startInspectCli } from './support/inspector-harness.ts'
import { tempDir } from './support/proxy-harness.ts'

const BIN = fileURLToPath(new URL('../bin/tr-proxy.js', import.meta.url))
const SHOTS = process.env.TOOL_REPLAY_SCREENSHOTS
const skip = browserMissing()
const work = tempDir('tr-inspector-live-')
const store = join(work, 'store')
/** The spec: a recorded exchange shows within a second. */
const LIVE_DEADLINE_MS = 1000
let inspector: RunningInspector
let browser: Awaited<ReturnType<typeof launchBrowser>>
const upstream = createServer((req, res) => {
  res.writeHead(200, { 'content-type': 'application/json' })
  res.end(JSON.stringify({ path: req.url }))
})

before(async () => {
  if (skip) return
  await (await openStore(store)).close()
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', () => r()))
  inspector = await startInspectCli(store, work)
  browser = await launchBrowser()
})
after(async () => {
  await browser?.close()
  await inspector?.stop()
  upstream.close()
})

/** A GET through the forward proxy (absolute-form, plain HTTP). */
function viaProxy(proxyPort: number, path: string): Promise<number> {
  const target = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}${path}`
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: proxyPort, method: 'GET', path: target, headers: { host: new URL(target).host } }, (res) => {
      res.resume()
      res.on('end', () => resolve(res.statusCode ?? 0))
    })
    req.on('error', reject)
    req.end()
  })
}

test('exchanges a running proxy records appear within a second; the run turns complete when it stops', { skip, timeout: 120_000 }, async () => {
  const recorder = spawn(process.execPath, [BIN, 'record', '--store', store, '--trace', 'live', '--port', '0'], { stdio: ['ignore', 'ignore', 'pipe'] })
  let log = ''
  const proxyPort = await new Promise<number>((resolve, reject) => {
    recorder.stderr.on('data', (c: Buffer) => {
      log += c
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(log)
      if (m) resolve(Number(m[1]))
    })
    recorder.once('exit', (code) => reject(new Error(`tr-proxy record exited ${code}: ${log}`)))
  })
  try {
    const streams: string[] = []
    browser.context.on('request', (r) => r.url().includes('/api/events?') && streams.push(r.url()))
    const page = await browser.context.newPage()
    await page.goto(inspector.url)
    const row = page.getByTestId('run-row').filter({ hasText: 'live' })
    await row.waitFor()
    assert.match((await row.textContent()) ?? '', /recording now/)
    await row.getByRole('link', { name: 'live' }).click()
    await page.getByTestId('run-status').filter({ hasText: 'recording now' }).waitFor()
    // Seven more tabs on the run: each loads it and follows it live, over the first tab's stream.
    const tabs = []
    for (let i = 0; i < 7; i++) {
      const tab = await browser.context.newPage()
      await tab.goto(`${inspector.url}#/run/live?partial=1`)
      await tab.getByTestId('run-status').filter({ hasText: 'recording now' }).waitFor({ timeout: 10_000 })
      tabs.push(tab)
    }
    const last = tabs.at(-1) as typeof page
    await last.getByTestId('live').filter({ hasText: '● live' }).waitFor({ timeout: 5_000 })

    for (const [seq, path] of [
      [0, '/first'],
      [1, '/second'],
    ] as const) {
      assert.equal(await viaProxy(proxyPort, path), 200)
      const answered = performance.now()
      await page.locator(`[data-testid="timeline-row"][data-seq="${seq}"]`).waitFor({ timeout: LIVE_DEADLINE_MS })
      const shownMs = performance.now() - answered
      assert.match((await page.locator(`[data-testid="timeline-row"][data-seq="${seq}"]`).textContent()) ?? '', new RegExp(`${path}`))
      process.stdout.write(`# exchange #${seq} shown ${shownMs.toFixed(0)} ms after the client had its answer\n`)
    }
    if (SHOTS) await page.screenshot({ path: join(SHOTS, 'inspector-live.png') })
    await last.locator('[data-testid="timeline-row"][data-seq="1"]').waitFor({ timeout: 5_000 })
    assert.equal(streams.length, 1, `one event stream for eight tabs: ${streams.length}`)

    // The tab holding the stream closes: another takes it over, and every tab still hears the run complete.
    await page.close()
    recorder.kill('SIGINT')
    await new Promise((r) => recorder.once('exit', r))
    for (const tab of tabs) await tab.getByTestId('run-status').filter({ hasText: 'complete' }).waitFor({ timeout: 10_000 })
    assert.equal(await last.getByTestId('run-count').textContent(), '2 exchanges')
    assert.equal(streams.length, 2, 'the stream reopened once, by one tab')
    await Promise.all(tabs.map((t) => t.close()))
  } finally {
    if (recorder.exitCode === null) recorder.kill('SIGKILL')
  }
})
