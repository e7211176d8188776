/**
 * The parts of the `undici` package the capture paths use, each loaded from its own file when it is first
 * needed. `import('undici')` loads its whole HTTP client (109 modules, about half of
 * `import('tool-replay/interceptor')`), which only forwarding uses: importing the interceptor or starting a
 * replaying proxy loads the Dispatcher base class alone (4 modules); the Agent that forwards (record,
 * passthrough), its connector and the wrapper that restores a missing global slot load on first use.
 * @note Files, not `require('undici')`: the app may import undici itself, and where its import resolves the
 * package through a symlink (npm link, pnpm, a linked node_modules) Node's ESM loader and a CommonJS
 * `require` of the same index.js can end up as two module records, the ESM one with empty exports ("Agent is
 * not a constructor" in the app). Requiring only the inner files leaves index.js to the app's loader; those
 * files are the very modules index.js exports (one instance each, so `instanceof` holds). undici ships no
 * exports map, so they are reachable; capture/undici.test.ts fails if a release moves one, and a moved file
 * falls back to the package.
 */
import { createRequire } from 'node:module'
import type * as Undici from 'undici'

const require = createRequire(import.meta.url)

/** Where each part lives in undici 8, and its name in the package's exports. */
export const UNDICI_PARTS = {
  Dispatcher: 'undici/lib/dispatcher/dispatcher.js',
  Agent: 'undici/lib/dispatcher/agent.js',
  Dispatcher1Wrapper: 'undici/lib/dispatcher/dispatcher1-wrapper.js',
  ProxyAgent: 'undici/lib/dispatcher/proxy-agent.js',
  buildConnector: 'undici/lib/core/connect.js',
} as const

type Part = keyof typeof UNDICI_PARTS

/** One part of undici (loaded once, on first call). */
export function undiciPart<P extends Part>(name: P): (typeof Undici)[P] {
  try {
    return require(UNDICI_PARTS[name]) as (typeof Undici)[P]
  } catch {
    return (require('undici') as typeof Undici)[name]
  }
}

/** undici's Dispatcher base class, the one `require('undici').Dispatcher` is. */
export const DispatcherBase: typeof Undici.Dispatcher = undiciPart('Dispatcher')
