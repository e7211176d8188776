/**
 * The faulted-run path in a real browser (Debian chromium via playwright-core), on the faulted run of docs/faults.md
 * (examples/faults): `tr-proxy record --faults lost-ack.faults.yaml -- ship.sh` with the unchecked client (a
 * duplicate shipment: the no-duplicate-effects contract breaks) and the idempotent one (every contract holds).
 * The inspector, started with `--contracts` on the same faults file, shows on #/faults/RUN the coverage per
 * rule, the commit evidence and each contract's verdict with the exchanges it names; the runs list says which
 * run broke a contract; the run's faulted exchange shows what the upstream really did. Without --contracts
 * the page still shows the coverage and says how to check contracts.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import type { Page } from 'playwright-core'
import { startShippingApi } from '../lab/index.ts'
import { browserMissing, launchBrowser, visibleText } from './support/browser.ts'
import { type RunningInspector, startInspectCli } from './support/inspector-harness.ts'
import { tempDir } from './support/proxy-harness.ts'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const BIN = join(ROOT, 'bin/tr-proxy.js')
const FAULTS = join(ROOT, 'examples/faults/lost-ack.faults.yaml')
const SHOTS = process.env.TOOL_REPLAY_SCREENSHOTS
const skip = browserMissing()
const work = tempDir('tr-inspector-faults-')
const store = join(work, 'store')
let withContracts: RunningInspector
let without: RunningInspector
let browser: Awaited<ReturnType<typeof launchBrowser>>

before(async () => {
  if (skip) return
  const api = await startShippingApi()
  try {
    for (const [trace, extra, code] of [
      ['ship-unchecked', [], 75],
      ['ship-idempotent', ['idempotent'], 0],
    ] as const) {
      // Not spawnSync: the shipping API answers from this process.
      const child = spawn(
        process.execPath,
        [BIN, 'record', '--store', store, '--trace', trace, '--faults', FAULTS, '--', join(ROOT, 'examples/faults/ship.sh'), api.url, ...extra],
        { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] },
      )
      let stderr = ''
      child.stderr.on('data', (c: Buffer) => (stderr += c))
      const [status] = await once(child, 'exit')
      assert.equal(status, code, stderr)
    }
    assert.equal(api.shipments.length, 3, 'the unchecked client committed twice, the idempotent one once')
  } finally {
    await api.close()
  }
  withContracts = await startInspectCli(store, work, ['--contracts', FAULTS])
  without = await startInspectCli(store, work)
  browser = await launchBrowser()
})
after(async () => {
  await browser?.close()
  await withContracts?.stop()
  await without?.stop()
})

const text = (page: Page, testId: string) => visibleText(page.getByTestId(testId))

test('a broken contract: coverage, commit evidence and each verdict with its exchanges', { skip, timeout: 120_000 }, async () => {
  const page = await browser.context.newPage()
  const errors: string[] = []
  page.on('pageerror', (e) => errors.push(String(e)))
  await page.goto(`${withContracts.url}#/faults/ship-unchecked`)
  await page.getByTestId('faults').waitFor()
  assert.equal(await page.locator('.error').count(), 0, 'no error box')
  assert.match(await text(page, 'faults-verdict'), /1 of 3 contracts failed/)
  assert.match(await text(page, 'faults-seed'), /seed 42/)
  assert.match(await text(page, 'faults-coverage'), /lost-ack response_lost 2 – 1/)
  const effects = await text(page, 'faults-effects')
  assert.match(effects, /#0 POST \/shipments: shipment s-1 \(the app never got the answer: fault rule lost-ack\)/)
  assert.match(effects, /#1 .*shipment s-2/)
  const contracts = page.getByTestId('faults-contract')
  assert.deepEqual(await contracts.evaluateAll((els) => els.map((e) => e.getAttribute('data-verdict'))), ['FAIL', 'PASS', 'PASS'])
  assert.match((await contracts.nth(0).textContent()) ?? '', /FAIL no-duplicate-effects/)
  assert.match((await contracts.nth(0).textContent()) ?? '', /committed shipment s-1 and s-2 for one call/)
  if (SHOTS) await page.screenshot({ path: join(SHOTS, 'inspector-faults.png') })

  // The exchanges a violation names open the run at them; the fault tab says what the upstream really did.
  await contracts.nth(0).getByRole('link', { name: '#0' }).first().click()
  await page.getByTestId('exchange-panel').waitFor()
  await page.getByTestId('tab-fault').click()
  const fault = await text(page, 'fault')
  assert.match(fault, /fault response_lost \(rule lost-ack/)
  assert.match(fault, /What the upstream really did/)
  assert.match(fault, /201/)
  assert.deepEqual(errors, [])
})

test('every contract held: all PASS; the runs list tells the broken run from the one that held', { skip, timeout: 60_000 }, async () => {
  const page = await browser.context.newPage()
  await page.goto(`${withContracts.url}#/faults/ship-idempotent`)
  await page.getByTestId('faults').waitFor()
  assert.match(await text(page, 'faults-verdict'), /all 3 contracts held/)
  const contracts = page.getByTestId('faults-contract')
  assert.deepEqual(await contracts.evaluateAll((els) => els.map((e) => e.getAttribute('data-verdict'))), ['PASS', 'PASS', 'PASS'])
  assert.match(await text(page, 'faults-effects'), /shipment s-3.*shipment s-3/)

  await page.goto(withContracts.url)
  const row = (name: string) => page.getByTestId('run-row').filter({ has: page.getByRole('link', { name, exact: true }) })
  await row('ship-unchecked').getByText('contract broken').waitFor({ timeout: 30_000 })
  await row('ship-idempotent').getByText('contracts ok').waitFor({ timeout: 30_000 })
})

test('without --contracts: coverage from the recorded faults, and how to check contracts', { skip, timeout: 60_000 }, async () => {
  const page = await browser.context.newPage()
  await page.goto(`${without.url}#/faults/ship-unchecked`)
  await page.getByTestId('faults').waitFor()
  assert.equal(await page.locator('.error').count(), 0, 'no error box')
  assert.match(await text(page, 'faults-coverage'), /lost-ack response_lost – – 1/)
  assert.match(await text(page, 'faults'), /No contracts checked: start the inspector with --contracts FILE/)
})
