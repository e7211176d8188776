/**
 * Verdicts first, in a real browser, on the approval-agent example recorded through the proxy: a fork before
 * the last model turn (the refund service's answer, #1, which the app sends on to the model at #2).
 *  - The fork tab says what a fork there needs (the next model turn, #2, will see the change) and offers the
 *    two ways on.
 *  - The strict rerun misses at #2: the run shows "strict replay incomplete: 1 miss (first #2)" beside the
 *    app's own exit, in the rerun panel, on the run and in the runs list, and promotion is not offered.
 *  (Answering #2 offline, the other way on, is e2e/inspector-next-turn.test.ts.)
 *  - A live tail: the rerun is marked LIVE ("live tail from #2") in the panel and the list.
 * Everything after the recording is offline: the fakes see no connection (the live tail cannot resolve the
 * example's .test hosts, and says so in its run).
 */
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import type { FakeServices } from '../examples/approval-agent/fake-services.ts'
import { NODE_PATH, ROOT, recordApproval } from './support/approval-recording.ts'
import { browserMissing, launchBrowser, visibleText } from './support/browser.ts'
import { type RunningInspector, startInspectCli } from './support/inspector-harness.ts'
import { tempDir } from './support/proxy-harness.ts'

const skip = browserMissing()
const work = tempDir('tr-inspector-verdicts-')
const store = join(work, 'store')
let fakes: FakeServices
let inspector: RunningInspector
let browser: Awaited<ReturnType<typeof launchBrowser>>

before(async () => {
  if (skip) return
  fakes = await recordApproval(store)
  inspector = await startInspectCli(store, ROOT, [], { PATH: NODE_PATH })
  browser = await launchBrowser()
})
after(async () => {
  await browser?.close()
  await inspector?.stop()
  await fakes?.close()
})

test('a fork before the last model turn: what it needs, the verdicts, a live tail', { skip, timeout: 110_000 }, async () => {
  const seen = { model: fakes.model.connections, refunds: fakes.refunds.connections }
  const page = await browser.context.newPage()
  const errors: string[] = []
  page.on('pageerror', (e) => errors.push(String(e)))
  const text = (id: string) => visibleText(page.getByTestId(id))

  // The fork tab of #1 (the refund service's answer) says a model turn comes after it.
  await page.goto(`${inspector.url}#/run/approval/x/1`)
  await page.getByTestId('tab-fork').click()
  const needs = page.getByTestId('fork-needs')
  await needs.waitFor()
  assert.equal(await needs.getAttribute('data-next'), '2')
  assert.match(await text('fork-needs'), /A fork here will need more than this patch.*#2.*Fork the next model turn too.*Rerun with a live tail/)
  await page.getByTestId('fork-path').fill('$.refundable_cents')
  await page.getByTestId('fork-value').fill('0')
  await page.getByTestId('fork-branch').fill('approval-norefund')
  await page.getByTestId('fork-submit').click()

  // The strict rerun stops at #2: the verdict says so beside the app's exit, and promotion is not offered.
  await page.getByTestId('rerun-start').click()
  await page.getByTestId('rerun-verdict').waitFor({ timeout: 120_000 })
  assert.equal(await page.getByTestId('rerun-verdict').getAttribute('data-state'), 'incomplete')
  assert.match(await text('rerun-verdict'), /strict replay incomplete: 1 miss \(first #2\)/)
  assert.match(await text('rerun-exit'), /tr-proxy exit 69 \(strict replay incomplete\)/)
  await page.getByTestId('promote-blocked').waitFor()
  assert.match(await text('promote-blocked'), /Not offered: approval-norefund-run's strict replay incomplete/)
  assert.equal(await page.getByTestId('promote-submit').count(), 0)

  // The runs list: the verdict next to the app's exit; the recording has none.
  await page.goto(inspector.url)
  const row = (name: string) => page.getByTestId('run-row').filter({ has: page.getByRole('link', { name, exact: true }) })
  await row('approval-norefund-run').getByTestId('run-verdict').waitFor({ timeout: 30_000 })
  assert.match(await visibleText(row('approval-norefund-run')), /app exit \d+ strict replay incomplete: 1 miss \(first #2\)/)
  assert.equal(await row('approval').getByTestId('run-verdict').count(), 0)

  // A live tail: marked LIVE in the panel and in the list.
  await page.goto(`${inspector.url}#/run/approval-norefund?rerun=1&tail=live`)
  assert.match(await text('rerun-live-warning'), /LIVE: from the first request no recording matches/)
  await page.getByTestId('rerun-start').click()
  await page.getByTestId('rerun-verdict').waitFor({ timeout: 120_000 })
  assert.equal(await page.getByTestId('rerun-verdict').getAttribute('data-state'), 'live')
  assert.match(await text('rerun-verdict'), /LIVE · live tail from #2/)
  await page.goto(inspector.url)
  await row('approval-norefund-live').getByTestId('run-verdict').waitFor({ timeout: 30_000 })
  assert.match(await visibleText(row('approval-norefund-live').getByTestId('run-verdict')), /LIVE · live tail from #2/)

  assert.deepEqual({ model: fakes.model.connections, refunds: fakes.refunds.connections }, seen)
  assert.deepEqual(errors, [])
})
