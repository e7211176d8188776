/**
 * Forking the next model turn too, offline, in a real browser: the approval example's refund answer (#1) is
 * forked to 0 and a strict rerun stops at #2 (the model request now carries the new tool result). The run's
 * page offers the way on: answer #2 with the recorded model answer as a new branch; its strict rerun is
 * complete (the app sends the order to manual review), and that run promotes to a case `tr-proxy verify`
 * passes. The fork and the first rerun are done with the CLI, as a user could; everything after the recording
 * is offline (the fakes see no connection).
 */
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import type { FakeServices } from '../examples/approval-agent/fake-services.ts'
import { cli, NODE_PATH, ROOT, recordApproval } from './support/approval-recording.ts'
import { browserMissing, launchBrowser, visibleText } from './support/browser.ts'
import { type RunningInspector, startInspectCli } from './support/inspector-harness.ts'
import { tempDir } from './support/proxy-harness.ts'

const skip = browserMissing()
const work = tempDir('tr-inspector-next-')
const store = join(work, 'store')
const cases = join(work, 'cases')
let fakes: FakeServices
let inspector: RunningInspector
let browser: Awaited<ReturnType<typeof launchBrowser>>

before(async () => {
  if (skip) return
  fakes = await recordApproval(store)
  const fork = await cli(['fork', 'approval', '--store', store, '--to', 'approval-norefund', '--patch', '#1 $.refundable_cents=0'])
  assert.equal(fork.code, 0, fork.stderr)
  const rerun = await cli([
    'replay',
    '--strict',
    '--store',
    store,
    '--trace',
    'approval-norefund',
    '--record-as',
    'approval-norefund-run',
    '--',
    'node',
    'examples/approval-agent/decide.ts',
  ])
  assert.equal(rerun.code, 69, `strict replay stops at #2: ${rerun.stderr}`)
  inspector = await startInspectCli(store, ROOT, ['--cases', cases], { PATH: NODE_PATH })
  browser = await launchBrowser()
})
after(async () => {
  await browser?.close()
  await inspector?.stop()
  await fakes?.close()
})

test('answer the request the app sent at #2 offline, rerun: complete; promote; verify', { skip, timeout: 110_000 }, async () => {
  const seen = { model: fakes.model.connections, refunds: fakes.refunds.connections }
  const page = await browser.context.newPage()
  const errors: string[] = []
  page.on('pageerror', (e) => errors.push(String(e)))
  await page.goto(`${inspector.url}#/run/approval-norefund-run`)
  await page.getByTestId('run-verdict').waitFor({ timeout: 30_000 })
  assert.match(await visibleText(page.getByTestId('run-verdict')), /strict replay incomplete: 1 miss \(first #2\)/)
  assert.match(await visibleText(page.getByTestId('next-step')), /Strict replay stopped at #2.*Answer it offline.*Rerun with a live tail/)
  await page.getByTestId('answer-submit').click()
  await page.waitForURL(/#\/run\/approval-norefund-next\/x\/2$/)
  await page
    .locator('[data-testid="timeline-row"][data-seq="2"]')
    .getByText(/patched/)
    .waitFor()
  await page.getByTestId('open-rerun').click()
  await page.getByTestId('rerun-start').click()
  await page.getByTestId('rerun-verdict').waitFor({ timeout: 60_000 })
  assert.equal(await page.getByTestId('rerun-verdict').getAttribute('data-state'), 'complete')
  assert.match(await visibleText(page.getByTestId('rerun-verdict')), /strict replay complete/)
  assert.match(await visibleText(page.getByTestId('rerun-output')), /decision: manual_review \$89\.99 .*allows at most \$0\.00/)
  await page.getByTestId('promote-name').fill('refund-not-refundable')
  await page.getByTestId('promote-submit').click()
  await page.getByTestId('promote-result').waitFor({ timeout: 60_000 })
  const verify = await cli(['verify', join(cases, 'refund-not-refundable')])
  assert.equal(verify.code, 0, verify.stdout + verify.stderr)
  assert.deepEqual({ model: fakes.model.connections, refunds: fakes.refunds.connections }, seen)
  assert.deepEqual(errors, [])
})
