/**
 * Dark mode: the page follows the system's colour scheme (prefers-color-scheme), in a real browser: the same
 * run read in light and in dark has a light and a dark page, with text that stays readable (contrast of the
 * body text on its background at least 7:1, a timeline row's at least 4.5:1).
 */
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import type { Locator } from 'playwright-core'
import { openStore } from 'tool-replay/store'
import { bigTrace } from './support/big-run.ts'
import { browserMissing, launchBrowser } from './support/browser.ts'
import { type RunningInspector, startInspectCli } from './support/inspector-harness.ts'
import { tempDir } from './support/proxy-harness.ts'

const SHOTS = process.env.TOOL_REPLAY_SCREENSHOTS
const skip = browserMissing()
const work = tempDir('tr-inspector-dark-')
const store = join(work, 'store')
let inspector: RunningInspector
let browser: Awaited<ReturnType<typeof launchBrowser>>

before(async () => {
  if (skip) return
  const s = await openStore(store)
  await s.putTrace(bigTrace(60, 'agent'))
  await s.close()
  inspector = await startInspectCli(store, work)
  browser = await launchBrowser()
})
after(async () => {
  await browser?.close()
  await inspector?.stop()
})

/** Relative luminance of a CSS rgb() colour (WCAG). */
function luminance(rgb: string): number {
  const [r, g, b] = (rgb.match(/[\d.]+/g) ?? []).slice(0, 3).map((v) => {
    const c = Number(v) / 255
    return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4
  })
  return 0.2126 * (r ?? 0) + 0.7152 * (g ?? 0) + 0.0722 * (b ?? 0)
}
const contrast = (a: number, b: number) => (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05)

/** The colour of an element's text and the background it is drawn on (the nearest ancestor that paints one). */
async function colours(l: Locator): Promise<{ fg: string; bg: string }> {
  return l.evaluate((el) => {
    let bg = 'rgba(0, 0, 0, 0)'
    for (let e: Element | null = el; e && /rgba\(0, 0, 0, 0\)|transparent/.test(bg); e = e.parentElement) bg = getComputedStyle(e).backgroundColor
    return { fg: getComputedStyle(el).color, bg }
  })
}

test('the page follows prefers-color-scheme: light and dark, both readable', { skip, timeout: 60_000 }, async () => {
  const page = await browser.context.newPage()
  for (const scheme of ['light', 'dark'] as const) {
    await page.emulateMedia({ colorScheme: scheme })
    await page.goto(`${inspector.url}#/run/agent/x/0`)
    await page.getByTestId('llm-view').waitFor()
    const body = await colours(page.locator('main'))
    const bgL = luminance(body.bg)
    if (scheme === 'dark') assert.ok(bgL < 0.05, `dark page background ${body.bg}`)
    else assert.ok(bgL > 0.85, `light page background ${body.bg}`)
    assert.ok(contrast(luminance(body.fg), bgL) >= 7, `${scheme}: body text ${body.fg} on ${body.bg}`)
    const row = await colours(page.locator('[data-testid="timeline-row"][data-seq="1"] .url'))
    assert.ok(contrast(luminance(row.fg), luminance(row.bg)) >= 4.5, `${scheme}: row text ${row.fg} on ${row.bg}`)
    const panel = await colours(page.getByTestId('llm-output').or(page.getByTestId('llm-tool-call')).first())
    assert.ok(contrast(luminance(panel.fg), luminance(panel.bg)) >= 4.5, `${scheme}: panel text ${panel.fg} on ${panel.bg}`)
    if (SHOTS && scheme === 'dark') await page.screenshot({ path: join(SHOTS, 'inspector-dark.png') })
  }
})
