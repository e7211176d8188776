/**
 * Installing a dispatcher for every fetch in the process. Two copies of undici read the global
 * dispatcher: Node's bundled one (fetch, under `undici.globalDispatcher.1`, legacy handlers) and the
 * `undici` package (v8, under `undici.globalDispatcher.2`, controller handlers). Our dispatcher speaks
 * both handler APIs, so it goes into both slots unwrapped.
 */
import type { Dispatcher } from 'undici'
import { loadedUndici, type Undici } from './undici-loader.ts'

const V1 = Symbol.for('undici.globalDispatcher.1')
const V2 = Symbol.for('undici.globalDispatcher.2')

type Slots = Record<symbol, Dispatcher | undefined>

function setSlot(key: symbol, value: Dispatcher | undefined): void {
  // undici defines these non-configurable but writable; assigning keeps those attributes.
  if (Object.hasOwn(globalThis, key)) (globalThis as unknown as Slots)[key] = value
  else Object.defineProperty(globalThis, key, { value, writable: true, enumerable: false, configurable: false })
}

/** The dispatchers currently in both global slots. */
export function currentGlobalDispatchers(): { v1: Dispatcher | undefined; v2: Dispatcher | undefined } {
  const g = globalThis as unknown as Slots
  return { v1: g[V1], v2: g[V2] }
}

/**
 * True when the global `fetch` here reads the dispatcher slots this module writes. False in a vm context
 * whose fetch was copied in from the outer realm (jest's test environments, vitest's vm pools): that fetch
 * reads the outer realm's slots, so installing here would capture nothing. A realm's functions are
 * `instanceof` its own `Function`; one from another realm is not.
 */
export function globalFetchIsCapturable(): boolean {
  const f = (globalThis as { fetch?: unknown }).fetch
  return typeof f === 'function' && f instanceof Function
}

/**
 * Makes `dispatcher` the global dispatcher for Node's fetch and for the undici package, and returns a
 * function that puts back what was there before (idempotent). install() calls it once undici is loaded
 * (loadUndici), as loading undici fills both slots when they are empty.
 */
export function installGlobalDispatcher(dispatcher: Dispatcher): () => void {
  const previous = currentGlobalDispatchers()
  setSlot(V1, dispatcher)
  setSlot(V2, dispatcher)
  let restored = false
  return () => {
    if (restored) return
    restored = true
    // A missing slot is left as a working default rather than undefined, which would crash fetch. Without
    // undici loaded there is none to make; undici fills a slot that is undefined when it loads.
    const undici = loadedUndici()
    const v2 = previous.v2 ?? (undici ? new undici.Agent() : undefined)
    setSlot(V1, previous.v1 ?? (undici && v2 ? new undici.Dispatcher1Wrapper(v2) : undefined))
    setSlot(V2, v2)
  }
}

/**
 * Makes one of undici's own dispatchers (an Agent, an EnvHttpProxyAgent) the global dispatcher of Node's fetch
 * (through undici's wrapper for the legacy handler API) and of the undici package.
 */
export function installUndiciGlobal(undici: Undici, dispatcher: Dispatcher): void {
  setSlot(V1, new undici.Dispatcher1Wrapper(dispatcher))
  setSlot(V2, dispatcher)
}
