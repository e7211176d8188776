/**
 * The inspector's walk-through in a real browser (Debian chromium via playwright-core), on the approval-agent
 * example recorded with `tr-proxy record -- node examples/approval-agent/decide.ts`: open the run → read the
 * model turn and its tool call → open the exchange → fork the tool call's arguments → rerun the app (strict
 * replay, offline: the fakes see no request after the recording) → the comparison shows the first divergence
 * and the changed outcome → promote to a test, and `tr-proxy verify` on the case passes.
 * With TOOL_REPLAY_SCREENSHOTS=DIR the steps are saved as PNGs there (scripts/inspector-screenshots.sh).
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { after, before, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import type { Page } from 'playwright-core'
import { type FakeServices, startFakeServices } from '../examples/approval-agent/fake-services.ts'
import { browserMissing, launchBrowser } from './support/browser.ts'
import { type RunningInspector, startInspectCli } from './support/inspector-harness.ts'
import { tempDir } from './support/proxy-harness.ts'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const BIN = join(ROOT, 'bin/tr-proxy.js')
const SHOTS = process.env.TOOL_REPLAY_SCREENSHOTS
const skip = browserMissing()

let fakes: FakeServices
let inspector: RunningInspector
let browser: Awaited<ReturnType<typeof launchBrowser>>
const work = tempDir('tr-inspector-walk-')
const store = join(work, 'store')
const cases = join(work, 'cases')

/** Runs tr-proxy in the repository root with Node's directory first on PATH (the recorded command says `node`). */
async function cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [BIN, ...args], {
    cwd: ROOT,
    env: { ...process.env, PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ''}`, OPENAI_API_KEY: 'sk-proj-dummy-inspector-walkthrough-1234' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (c: Buffer) => (stdout += c))
  child.stderr.on('data', (c: Buffer) => (stderr += c))
  const [code] = await once(child, 'exit')
  return { code: code as number | null, stdout, stderr }
}

async function shot(page: Page, name: string): Promise<void> {
  if (!SHOTS) return
  mkdirSync(SHOTS, { recursive: true })
  await page.screenshot({ path: join(SHOTS, `${name}.png`) })
}

before(async () => {
  if (skip) return
  fakes = await startFakeServices()
  const rec = await cli([
    'record',
    '--store',
    store,
    '--trace',
    'approval',
    '--resolve',
    `api.openai.test=127.0.0.1:${fakes.ports.model}`,
    '--resolve',
    `refunds.test=127.0.0.1:${fakes.ports.refunds}`,
    '--upstream-ca',
    join(ROOT, 'examples/approval-agent/fixtures/fakes-cert.pem'),
    '--',
    'node',
    'examples/approval-agent/decide.ts',
  ])
  assert.equal(rec.code, 0, rec.stderr)
  assert.match(rec.stdout, /decision: approved \$89\.99 for order A-1042/)
  inspector = await startInspectCli(store, ROOT, ['--cases', cases], { PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ''}` })
  browser = await launchBrowser()
})
after(async () => {
  await browser?.close()
  await inspector?.stop()
  await fakes?.close()
})

test('open the run, read the model turn, fork its tool call, rerun the app, compare, promote, verify', { skip, timeout: 240_000 }, async () => {
  const seen = { model: fakes.model.connections, refunds: fakes.refunds.connections }
  const page = await browser.context.newPage()
  const errors: string[] = []
  page.on('pageerror', (e) => errors.push(String(e)))

  // The runs list, then the run as model turns: #0 asks check_refund, #1 is the tool's HTTP call nested under it, #2 decides.
  await page.goto(inspector.url)
  await page.getByTestId('run-row').filter({ hasText: 'approval' }).waitFor()
  await shot(page, 'inspector-runs')
  await page.getByTestId('run-row').filter({ hasText: 'approval' }).getByRole('link', { name: 'approval' }).click()
  const rows = page.getByTestId('timeline-row')
  await rows.nth(2).waitFor()
  assert.equal(await rows.count(), 3)
  assert.equal(await rows.nth(0).getAttribute('data-kind'), 'model')
  assert.match((await rows.nth(0).getByTestId('tool-call').textContent()) ?? '', /tool_call check_refund \{"order_id":"A-1042"\}/)
  // The nesting comes with the run's summary, which may arrive after the rows.
  await rows.nth(1).getByText('↳ check_refund of #0').waitFor({ timeout: 30_000 })
  assert.match((await rows.nth(1).getAttribute('class')) ?? '', /nested/, 'the refund service call sits under the model turn that asked for it')
  assert.match((await rows.nth(2).getByTestId('tool-call').textContent()) ?? '', /decide_refund .*"amount_usd":89\.99/)
  assert.match((await page.getByTestId('outcome').textContent()) ?? '', /exit 0[\s\S]*decision: approved \$89\.99/)

  // The exchange: the model turn beside the raw HTTP.
  await rows.nth(2).click()
  await page.getByTestId('llm-view').waitFor()
  assert.match((await page.getByTestId('llm-tool-call').textContent()) ?? '', /decide_refund/)
  await shot(page, 'inspector-run')
  await page.getByTestId('tab-response').click()
  await page.getByTestId('json-tree').waitFor()

  // Fork the tool call's arguments: the model now approves $899.90.
  await page.getByTestId('tab-fork').click()
  const args = page.getByTestId('fork-args-0')
  const original = await args.inputValue()
  await args.fill(original.replace('89.99', '899.9'))
  await page.getByTestId('fork-branch').fill('approval-overpay')
  assert.match((await page.getByTestId('fork-specs').textContent()) ?? '', /#2 llm\.tool_call\[0\]\.arguments=.*899\.9/)
  await page.getByTestId('fork-submit').click()

  // Rerun the recorded command in strict replay against the branch, its output streamed.
  await page.getByTestId('rerun-panel').waitFor()
  assert.match(
    (await page.getByTestId('rerun-command').textContent()) ?? '',
    /tr-proxy replay --strict --trace approval-overpay .*-- node examples\/approval-agent\/decide\.ts/,
  )
  await page.getByTestId('rerun-start').click()
  await page.getByTestId('rerun-exit').waitFor({ timeout: 120_000 })
  assert.match((await page.getByTestId('rerun-exit').textContent()) ?? '', /exit 0/)
  assert.match((await page.getByTestId('rerun-output').textContent()) ?? '', /decision: manual_review \$899\.90/)
  await shot(page, 'inspector-rerun')

  // The comparison: the first divergence is the patched tool call, attributed to the patch; the outcomes differ.
  await page.getByTestId('open-compare').click()
  await page.getByTestId('first-divergence').waitFor()
  const first = (await page.getByTestId('first-divergence').textContent()) ?? ''
  assert.match(first, /#2 model tool_call\[0\]\.arguments \$\.amount_usd: 89\.99 → 899\.9/)
  assert.match(first, /caused by patch [0-9a-f]{12}/)
  assert.ok(await page.getByTestId('first-pair').isVisible())
  assert.match((await page.getByTestId('outcome-a-stdout').textContent()) ?? '', /decision: approved \$89\.99/)
  assert.match((await page.getByTestId('outcome-b-stdout').textContent()) ?? '', /decision: manual_review \$899\.90/)
  await shot(page, 'inspector-compare')

  // Promote to a test; the case verifies from the command line too.
  await page.getByTestId('promote-name').fill('refund-over-limit')
  await page.getByTestId('promote-submit').click()
  await page.getByTestId('promote-result').waitFor({ timeout: 120_000 })
  const dir = (await page.getByTestId('promote-dir').textContent()) ?? ''
  assert.equal(dir, join(cases, 'refund-over-limit'))
  const verify = await cli(['verify', dir])
  assert.equal(verify.code, 0, verify.stdout + verify.stderr)
  assert.match(verify.stdout, /Case "refund-over-limit" passed/)

  // Everything after the recording was offline: the fakes saw no request.
  assert.deepEqual({ model: fakes.model.connections, refunds: fakes.refunds.connections }, seen)
  assert.deepEqual(errors, [])
})
