/**
 * A real browser for the inspector's tests: Debian's chromium driven by playwright-core (no browser download),
 * headless, with a fresh profile per launch. A machine without /usr/bin/chromium skips the browser tests with
 * the reason, except in CI (CI=true), where a missing browser fails them: .ci/run installs it.
 */
import { spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import { type BrowserContext, chromium, type Locator } from 'playwright-core'

/** Where Debian's chromium package puts the browser. */
export const CHROMIUM = process.env.TOOL_REPLAY_CHROMIUM ?? '/usr/bin/chromium'

/** Flags for a quiet headless run (no background traffic, no QUIC): the tests and bench/inspector.ts use them. */
export const CHROMIUM_FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
]

/** Why the browser tests cannot run here, or undefined when they can. Throws in CI: there it must be installed. */
export function browserMissing(): string | undefined {
  if (existsSync(CHROMIUM)) return undefined
  const why = `${CHROMIUM} is missing: install Debian's chromium package (apt-get install -y chromium), as .ci/run does`
  if (process.env.CI === 'true') throw new Error(`CI must run the browser tests, but ${why}.`)
  return why
}

/** A fresh headless browser context; close() also removes its profile directory. */
export async function launchBrowser(): Promise<{ context: BrowserContext; close: () => Promise<void> }> {
  const profile = mkdtempSync(join(tmpdir(), 'tr-chromium-'))
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_FLAGS,
    viewport: { width: 1400, height: 900 },
    acceptDownloads: true,
  })
  return {
    context,
    // Bounded: a context whose pages hang (seen after a test timed out under load) must not hold the file for
    // ever; its chromium processes, found by their profile directory, are killed after 15 s.
    close: async () => {
      const closed = await Promise.race([
        context.close().then(
          () => true,
          () => true,
        ),
        delay(15_000, false),
      ])
      if (!closed) spawnSync('pkill', ['-KILL', '-f', `--user-data-dir=${profile}`])
      rmSync(profile, { recursive: true, force: true })
    },
  }
}

/**
 * The text a user reads in an element: innerText (table cells and blocks kept apart, hidden elements left out),
 * whitespace folded to single spaces.
 */
export async function visibleText(locator: Locator): Promise<string> {
  // biome-ignore lint/performance/useDomNodeTextContent: the rendered text is the point (what the user sees)
  return (await locator.innerText()).replace(/\s+/g, ' ').trim()
}
