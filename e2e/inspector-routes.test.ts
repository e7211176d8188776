/**
 * Every route the inspector's docs name, opened directly by its URL in a real browser (Debian chromium via
 * playwright-core), each checked by the text a user reads: the runs list (#/), a run (#/run/NAME), an exchange
 * (#/run/NAME/x/SEQ), the summary and the waterfall (?view=), the rerun panel (?rerun=1), the comparison
 * (#/compare?a=A&b=B) and the lab link docs/inspector.md gives (#/lab?scenario=lost_ack&policy=all&seed=42&...). The
 * faults page (#/faults/RUN) is e2e/inspector-faults.test.ts, the live view e2e/inspector-live.test.ts.
 * On the approval example recorded through the proxy, a fork of its last model turn made with the CLI, and
 * that fork rerun from the page: after the rerun the fork says how its run ended, on the run and in the list
 * (it said "not run against it yet"). Offline after the recording: the fakes see no connection.
 */
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import type { Page } from 'playwright-core'
import type { FakeServices } from '../examples/approval-agent/fake-services.ts'
import { cli, NODE_PATH, ROOT, recordApproval } from './support/approval-recording.ts'
import { browserMissing, launchBrowser, visibleText } from './support/browser.ts'
import { type RunningInspector, startInspectCli } from './support/inspector-harness.ts'
import { tempDir } from './support/proxy-harness.ts'

const skip = browserMissing()
const work = tempDir('tr-inspector-routes-')
const store = join(work, 'store')
const PATCH = '#2 llm.tool_call[0].arguments={"decision":"approve","amount_usd":899.9,"reason":"Arrived damaged (cracked jar); within the 30-day policy."}'
let fakes: FakeServices
let inspector: RunningInspector
let browser: Awaited<ReturnType<typeof launchBrowser>>

before(async () => {
  if (skip) return
  fakes = await recordApproval(store)
  const fork = await cli(['fork', 'approval', '--store', store, '--to', 'approval-overpay', '--patch', PATCH])
  assert.equal(fork.code, 0, fork.stderr)
  inspector = await startInspectCli(store, ROOT, [], { PATH: NODE_PATH })
  browser = await launchBrowser()
})
after(async () => {
  await browser?.close()
  await inspector?.stop()
  await fakes?.close()
})

const opened: Page[] = []

/**
 * Opens `hash` on a fresh page (a link followed from elsewhere), collecting the page's errors. The page before
 * the last is closed: each page holds its live-events stream open, and a browser opens at most six
 * connections to one origin.
 */
async function open(hash: string, errors: string[]): Promise<Page> {
  await opened.splice(0, Math.max(0, opened.length - 1)).reduce((p, old) => p.then(() => old.close()), Promise.resolve())
  const page = await browser.context.newPage()
  opened.push(page)
  page.on('pageerror', (e) => errors.push(`${hash}: ${e}`))
  await page.goto(`${inspector.url}${hash}`)
  return page
}

const runRow = (page: Page, name: string) => page.getByTestId('run-row').filter({ has: page.getByRole('link', { name, exact: true }) })

test('a fork rerun from #/run/NAME?rerun=1 says how its run ended, on the run and in the runs list', { skip, timeout: 150_000 }, async () => {
  const seen = { model: fakes.model.connections, refunds: fakes.refunds.connections }
  const errors: string[] = []
  const page = await open('#/run/approval-overpay?rerun=1', errors)
  assert.match(
    await visibleText(page.getByTestId('rerun-command')),
    /^tr-proxy replay --strict --trace approval-overpay --record-as approval-overpay-run -- node examples\/approval-agent\/decide\.ts$/,
  )
  assert.match(await visibleText(page.getByTestId('outcome')), /Not run against this trace yet/)
  await page.getByTestId('rerun-start').click()
  await page.getByTestId('rerun-verdict').waitFor({ timeout: 120_000 })
  assert.match(await visibleText(page.getByTestId('rerun-verdict')), /strict replay complete/)
  // The comparison is in the panel, not behind a button.
  assert.match(await visibleText(page.getByTestId('first-divergence')), /#2 model tool_call\[0\]\.arguments \$\.amount_usd: 89\.99 → 899\.9/)
  // The fork's own head and outcome now name the run, without a reload.
  await page.getByTestId('run-app-exit-against').waitFor({ timeout: 30_000 })
  assert.equal(await visibleText(page.getByTestId('run-app-exit-against')), 'rerun: app exit 0 in approval-overpay-run')
  assert.match(await visibleText(page.getByTestId('runs-against')), /runs of the app against it: approval-overpay-run \(app exit 0\) compare/)
  const outcome = await visibleText(page.getByTestId('outcome'))
  assert.doesNotMatch(outcome, /Not run against this trace yet/)
  assert.match(outcome, /the app ran against it in approval-overpay-run \(app exit 0\)\./)

  const list = await open('#/', errors)
  await runRow(list, 'approval-overpay-run').getByTestId('run-verdict').waitFor({ timeout: 30_000 })
  assert.match(
    await visibleText(runRow(list, 'approval-overpay')),
    /^approval-overpay complete 3 .* fork of approval \(1 patch\) rerun: app exit 0 in approval-overpay-run$/,
  )
  assert.match(await visibleText(runRow(list, 'approval-overpay-run')), /run against approval-overpay app exit 0 strict replay complete$/)
  // A row's model turns and hosts come with its stats, after the list itself (under load, seconds later).
  await runRow(list, 'approval').locator('td.hosts').filter({ hasNotText: '…' }).waitFor({ timeout: 30_000 })
  assert.match(await visibleText(runRow(list, 'approval')), /^approval complete 3 2 api\.openai\.test, refunds\.test .* app exit 0$/)
  assert.deepEqual({ model: fakes.model.connections, refunds: fakes.refunds.connections }, seen)
  assert.deepEqual(errors, [])
})

test('each route opened by its URL shows what it is for', { skip, timeout: 150_000 }, async () => {
  const errors: string[] = []
  // A run: its head, its model turns with the tool call nested, and the app's outcome.
  const run = await open('#/run/approval', errors)
  await run.locator('[data-testid="timeline-row"][data-seq="2"]').waitFor()
  assert.match(await visibleText(run.getByTestId('run-name')), /^approval complete$/)
  assert.match(await visibleText(run.locator('.runhead .facts')), /^3 exchanges 2 model turns api\.openai\.test, refunds\.test .* app exit 0$/)
  assert.match(await visibleText(run.locator('[data-testid="timeline-row"][data-seq="0"]')), /→ tool_call check_refund \{"order_id":"A-1042"\}/)
  // The nesting comes with the run's summary, which may arrive after the rows.
  await run.locator('[data-testid="timeline-row"][data-seq="1"]').getByText('↳ check_refund of #0').waitFor({ timeout: 30_000 })
  assert.match(
    await visibleText(run.locator('[data-testid="timeline-row"][data-seq="1"]')),
    /^#1 ↳ check_refund of #0 GET refunds\.test\/v1\/orders\/A-1042\/refund-check 200/,
  )
  assert.match(await visibleText(run.getByTestId('outcome')), /exit 0 .*decision: approved \$89\.99 for order A-1042/)

  // An exchange: the model turn beside the raw HTTP.
  const x = await open('#/run/approval/x/2', errors)
  await x.getByTestId('llm-view').waitFor()
  assert.match(await visibleText(x.getByTestId('exchange-panel')), /^#2 POST https:\/\/api\.openai\.test\/v1\/chat\/completions close started/)
  assert.match(await visibleText(x.getByTestId('llm-view')), /Input .*tool .*Answer tool_call\[0\] decide_refund/)

  // The summary and the waterfall, each by its link.
  const summary = await open('#/run/approval?view=summary', errors)
  await summary.getByTestId('run-summary').waitFor({ timeout: 30_000 })
  assert.match(await visibleText(summary.getByTestId('summary-models')), /gpt-4\.1-mini-2025-04-14 2 /)
  assert.match(await visibleText(summary.getByTestId('summary-tools')), /check_refund 1 1/)
  const waterfall = await open('#/run/approval?view=waterfall', errors)
  await waterfall.getByTestId('waterfall').waitFor({ timeout: 30_000 })
  assert.match(await visibleText(waterfall.getByTestId('waterfall-caption')), /^3 exchanges over \d[\d.]* m?s · at most 1 at once/)

  // The comparison by its link: the fork against its source, the patch as the first divergence.
  const compare = await open('#/compare?a=approval&b=approval-overpay', errors)
  await compare.getByTestId('first-divergence').waitFor({ timeout: 30_000 })
  assert.match(
    await visibleText(compare.getByTestId('first-divergence')),
    /^First divergence: #2 model tool_call\[0\]\.arguments \$\.amount_usd: 89\.99 → 899\.9 caused by patch [0-9a-f]{12}/,
  )

  // The lab link of docs/inspector.md: its settings are the form's and the command's.
  const lab = await open('#/lab?scenario=lost_ack&policy=all&seed=42&probability=0.5&callBudget=4', errors)
  await lab.getByTestId('lab-result').nth(2).waitFor({ timeout: 120_000 })
  assert.equal(await visibleText(lab.getByTestId('lab-command')), 'tr-proxy demo --scenario lost_ack --policy all --seed 42 --probability 0.5 --call-budget 4')
  assert.equal(await lab.getByTestId('lab-seed').inputValue(), '42')
  const verdicts = await lab.getByTestId('lab-result').evaluateAll((els) => els.map((e) => e.getAttribute('data-verdict')))
  assert.equal(verdicts.length, 3)
  for (const v of verdicts) assert.ok(['PASS', 'FAIL', 'UNTESTED'].includes(v ?? ''), String(v))
  assert.deepEqual(errors, [])
})
