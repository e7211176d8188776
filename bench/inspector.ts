/**
 * The inspector with a 10,000-exchange run (one model call in ten, each with a tool call; the rest JSON API
 * calls), in Debian's chromium driven by playwright-core:
 *   - first meaningful paint: from navigation to the run's page until its name and first timeline row show
 *   - open an exchange: from a click on a row until its model turn (or response) shows in the panel
 *   - jump: a link to exchange #5000 until that row and its panel show
 * and the API alone (a timeline page at the start and at the end, the run's head once its statistics are cached).
 * Medians of RUNS tries. Needs /usr/bin/chromium.
 *
 *   npm run bench:inspector          (EXCHANGES=2000 RUNS=3 for a quicker run)
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chromium } from 'playwright-core'
import { bigTrace, NEEDLE } from '../e2e/support/big-run.ts'
import { CHROMIUM, CHROMIUM_FLAGS } from '../e2e/support/browser.ts'
import { startInspector } from '../inspector/index.ts'
import { openStore } from '../store/index.ts'

const EXCHANGES = Number(process.env.EXCHANGES ?? 10_000)
const RUNS = Number(process.env.RUNS ?? 5)

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'tr-bench-inspector-'))
  const store = await openStore(join(dir, 'store'))
  const t0 = performance.now()
  await store.putTrace(bigTrace(EXCHANGES))
  console.log(`stored a ${EXCHANGES}-exchange run in ${((performance.now() - t0) / 1000).toFixed(1)} s`)
  const inspector = await startInspector({ store, storeDir: join(dir, 'store'), casesDir: join(dir, 'cases') })
  const headers = { 'x-tool-replay-token': inspector.token }
  const api = async (path: string) => {
    const t = performance.now()
    const r = await fetch(`${inspector.origin}${path}`, { headers })
    await r.json()
    return performance.now() - t
  }
  const firstStats = await api('/api/runs/big/stats')
  // The run's index (read once, then kept) answers search; the first search waits for it.
  const firstSearch = await api(`/api/runs/big/search?q=${NEEDLE}`)
  const searchTook: number[] = []
  for (let i = 0; i < RUNS; i++) {
    const r = (await (await fetch(`${inspector.origin}/api/runs/big/search?q=${NEEDLE}&filter=`, { headers })).json()) as { tookMs: number }
    searchTook.push(r.tookMs)
  }
  const searchApi: number[] = []
  for (let i = 0; i < RUNS; i++) searchApi.push(await api(`/api/runs/big/search?q=status:503&filter=errors`))
  const apiTimes = { head: [] as number[], first: [] as number[], last: [] as number[], exchange: [] as number[] }
  for (let i = 0; i < RUNS; i++) {
    apiTimes.head.push(await api('/api/runs/big'))
    apiTimes.first.push(await api('/api/runs/big/timeline?from=0&limit=200'))
    apiTimes.last.push(await api(`/api/runs/big/timeline?from=${EXCHANGES - 200}&limit=200`))
    apiTimes.exchange.push(await api(`/api/runs/big/exchanges/${EXCHANGES / 2}`))
  }
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_FLAGS })
  const paint: number[] = []
  const open: number[] = []
  const jump: number[] = []
  const find: number[] = []
  try {
    for (let i = 0; i < RUNS; i++) {
      const context = await browser.newContext({ viewport: { width: 1400, height: 900 } })
      const page = await context.newPage()
      // Measured in the page: from its navigation start until the run's name and first row are in the DOM.
      await page.goto(`${inspector.url}#/run/big`, { waitUntil: 'commit' })
      const painted = await page.waitForFunction(
        () => document.querySelector('[data-testid="timeline-row"][data-seq="0"]') && document.querySelector('[data-testid="run-name"]') && performance.now(),
        undefined,
        { polling: 'raf', timeout: 60_000 },
      )
      paint.push((await painted.jsonValue()) as number)
      let t = performance.now()
      const row = page.locator('[data-testid="timeline-row"][data-seq="10"]')
      t = performance.now()
      await row.click()
      await page.getByTestId('llm-view').waitFor()
      open.push(performance.now() - t)
      t = performance.now()
      await page.goto(`${inspector.url}#/run/big/x/${EXCHANGES / 2}`)
      await page.locator(`[data-testid="timeline-row"][data-seq="${EXCHANGES / 2}"]`).waitFor()
      await page.getByTestId('llm-view').waitFor()
      jump.push(performance.now() - t)
      // Search in the page: from typing the word until the one exchange that has it is listed.
      await page.goto(`${inspector.url}#/run/big`)
      await page.locator('[data-testid="timeline-row"][data-seq="0"]').waitFor()
      t = performance.now()
      await page.getByTestId('run-search').fill(NEEDLE)
      await page.locator('[data-testid="search-count"]', { hasText: '1 of' }).waitFor()
      await page.locator(`[data-testid="timeline-row"][data-seq="${4321}"]`).waitFor()
      find.push(performance.now() - t)
      await context.close()
    }
  } finally {
    await browser.close()
    await inspector.close()
    await store.close()
    await rm(dir, { recursive: true, force: true })
  }
  const f = (xs: number[]) => `${median(xs).toFixed(0)} ms (min ${Math.min(...xs).toFixed(0)}, max ${Math.max(...xs).toFixed(0)})`
  console.log(`inspector, ${EXCHANGES}-exchange run, median of ${RUNS}:`)
  console.log(`  first meaningful paint (navigation → run name + first row)  ${f(paint)}`)
  console.log(`  open an exchange (click → model turn in the panel)          ${f(open)}`)
  console.log(`  jump to #${EXCHANGES / 2} by link (row + panel)                   ${f(jump)}`)
  console.log(`  search in the page (typed → the one match listed)           ${f(find)}`)
  console.log(`  API: run statistics, first time (every exchange read)       ${firstStats.toFixed(0)} ms`)
  console.log(`  API: first search (builds the run's index)                  ${firstSearch.toFixed(0)} ms`)
  console.log(`  API: search, the index's own time                           ${f(searchTook)}`)
  console.log(`  API: search status:503 + errors filter, whole answer        ${f(searchApi)}`)
  console.log(`  API: run head                                               ${f(apiTimes.head)}`)
  console.log(`  API: timeline page of 200 at the start                      ${f(apiTimes.first)}`)
  console.log(`  API: timeline page of 200 at the end                        ${f(apiTimes.last)}`)
  console.log(`  API: one exchange in full                                   ${f(apiTimes.exchange)}`)
}

await main()
