/**
 * The parts of the `undici` package the capture paths use, loaded when they are needed. `import('undici')` loads
 * its whole HTTP client (109 modules, about half of `import('tool-replay/interceptor')`), which only forwarding
 * uses. Importing the interceptor or starting a replaying proxy needs the Dispatcher base class alone (4
 * modules); the Agents that forward (record, passthrough) and the wrapper that restores a missing global slot
 * are loaded on first use.
 * @note undici ships no exports map, so its files are reachable by path. `Dispatcher` is the class
 * `require('undici').Dispatcher` returns (one module instance, so `instanceof` holds); capture/undici.test.ts
 * fails if an undici release moves it, and a missing file falls back to the whole package.
 */
import { createRequire } from 'node:module'
import type * as Undici from 'undici'

const require = createRequire(import.meta.url)

function loadDispatcherClass(): typeof Undici.Dispatcher {
  try {
    return require('undici/lib/dispatcher/dispatcher.js') as typeof Undici.Dispatcher
  } catch {
    return undiciPackage().Dispatcher
  }
}

/** The whole `undici` package (loaded once, on first call). */
export function undiciPackage(): typeof Undici {
  return require('undici') as typeof Undici
}

/** undici's Dispatcher base class, the one `require('undici').Dispatcher` is. */
export const DispatcherBase: typeof Undici.Dispatcher = loadDispatcherClass()
