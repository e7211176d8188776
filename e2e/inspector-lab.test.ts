/**
 * The inspector's lab page in a real browser: a link with the settings in its URL reproduces
 * `tr-proxy demo --scenario lost_ack --policy all` (2 FAIL, 1 PASS, the same lines), shows the command that
 * does it from a terminal, and a policy's run downloads as a trace file that verifies.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { openStore, parseTraceFile } from 'tool-replay/store'
import { browserMissing, launchBrowser, visibleText } from './support/browser.ts'
import { type RunningInspector, startInspectCli } from './support/inspector-harness.ts'
import { tempDir } from './support/proxy-harness.ts'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const SHOTS = process.env.TOOL_REPLAY_SCREENSHOTS
const skip = browserMissing()
const work = tempDir('tr-inspector-lab-')
const store = join(work, 'store')
let inspector: RunningInspector
let browser: Awaited<ReturnType<typeof launchBrowser>>

before(async () => {
  if (skip) return
  await (await openStore(store)).close()
  inspector = await startInspectCli(store, work)
  browser = await launchBrowser()
})
after(async () => {
  await browser?.close()
  await inspector?.stop()
})

test('a lab link reproduces demo --scenario lost_ack --policy all, and a run exports as a trace file', { skip, timeout: 180_000 }, async () => {
  const cli = spawnSync(process.execPath, [join(ROOT, 'bin/tr-proxy.js'), 'demo', '--scenario', 'lost_ack', '--policy', 'all', '--json'], { encoding: 'utf8' })
  const expected = (JSON.parse(cli.stdout) as { scenarios: Array<{ policies: Array<{ verdict: string; summary: string }> }> }).scenarios[0]?.policies ?? []
  assert.deepEqual(
    expected.map((p) => p.verdict),
    ['FAIL', 'FAIL', 'PASS'],
  )

  const page = await browser.context.newPage()
  await page.goto(`${inspector.url}#/lab?scenario=lost_ack&policy=all`)
  const rows = page.getByTestId('lab-result')
  await rows.nth(2).waitFor({ timeout: 120_000 })
  assert.deepEqual(await rows.evaluateAll((els) => els.map((e) => e.getAttribute('data-verdict'))), ['FAIL', 'FAIL', 'PASS'])
  for (let i = 0; i < 3; i++) assert.match((await rows.nth(i).textContent()) ?? '', new RegExp(escapeRegExp(expected[i]?.summary ?? '')))
  assert.equal(await page.getByTestId('lab-command').textContent(), 'tr-proxy demo --scenario lost_ack --policy all')
  if (SHOTS) await page.screenshot({ path: join(SHOTS, 'inspector-lab.png') })

  const [download] = await Promise.all([page.waitForEvent('download'), rows.nth(2).getByTestId('lab-export').click()])
  const file = join(work, 'exported.trace.json')
  await download.saveAs(file)
  const trace = parseTraceFile(readFileSync(file, 'utf8'))
  assert.ok(
    trace.exchanges.some((x) => x.fault?.kind === 'response_lost'),
    'the idempotent run carries its fault',
  )

  // The form writes its settings into the URL: the link it makes runs the same lab.
  await page.getByTestId('lab-seed').fill('7')
  await page.getByTestId('lab-callBudget').fill('2')
  await page.getByTestId('lab-run').click()
  await page.waitForURL(/#\/lab\?scenario=lost_ack&policy=all&seed=7&callBudget=2$/)
  await page.getByTestId('lab-command').filter({ hasText: '--call-budget 2' }).waitFor({ timeout: 120_000 })
  assert.equal(await page.getByTestId('lab-command').textContent(), 'tr-proxy demo --scenario lost_ack --policy all --seed 7 --call-budget 2')

  // A run whose fault never fired tests nothing: UNTESTED, not FAIL; one shipment is "1 shipment".
  await page.goto(`${inspector.url}#/lab?scenario=lost_ack&policy=all&probability=0`)
  await page.getByTestId('lab-command').filter({ hasText: '--probability 0' }).waitFor({ timeout: 120_000 })
  assert.deepEqual(await rows.evaluateAll((els) => els.map((e) => e.getAttribute('data-verdict'))), ['UNTESTED', 'UNTESTED', 'UNTESTED'])
  const line = await visibleText(rows.nth(0))
  assert.match(line, /UNTESTED no retries 2 calls 1 shipment the fault never fired: this run does not test the policy/)
})

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}
