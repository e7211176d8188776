/**
 * undici, loaded when it is needed rather than when the interceptor is imported: the package is 109 modules
 * and ~110 ms of a fresh process, and strict replay never uses its HTTP client.
 *
 * Our dispatchers extend undici's Dispatcher class itself, taken from its own file (three small modules). It
 * is the very class undici's index.js exports, whoever loads undici and whenever: index.js `require`s
 * `./lib/dispatcher/dispatcher` and gets the module cache entry this import made. So a dispatcher is
 * `instanceof Dispatcher` from the start, and gains the API index.js assigns onto `Dispatcher.prototype`
 * (`request`, `stream`, `pipeline`, `connect`, `upgrade`) as soon as undici is loaded.
 *
 * @note undici itself is loaded with `import('undici')`, the specifier an app uses, so both share one ESM
 * module record. Never with `require`: Node 22's ESM loader could then keep an empty record for an app's
 * later `import('undici')` (CJS cached under its real path, ESM under a symlinked one; seen in a checkout whose
 * node_modules is a symlink, `Agent is not a constructor`).
 */
import type { Dispatcher } from 'undici'
// @ts-expect-error undici publishes no types for its internal files; this one exports the Dispatcher class.
import dispatcherClass from 'undici/lib/dispatcher/dispatcher.js'
import { ErrorCodes, ToolReplayError } from '../trace/index.ts'

/** The undici package's exports. */
export type Undici = typeof import('undici')

/** undici's Dispatcher class, without loading the rest of undici. */
export const UndiciDispatcher: typeof Dispatcher = dispatcherClass

const subclasses: (abstract new (...args: never[]) => Dispatcher)[] = []
let loaded: Undici | undefined
let loading: Promise<Undici> | undefined

/**
 * Registers a class extending UndiciDispatcher, to be moved onto the Dispatcher of the undici that
 * loadUndici() imports should that ever be another instance of the class (a module loader that keyed undici's
 * file under two paths): `instanceof` must hold for the app's undici.
 */
export function extendsUndiciDispatcher(subclass: abstract new (...args: never[]) => Dispatcher): void {
  subclasses.push(subclass)
  bridgeApi(subclass.prototype)
}

/** undici's API, which its index.js assigns onto `Dispatcher.prototype` (`Object.assign(Dispatcher.prototype, api)`). */
const ASYNC_API = ['request', 'stream', 'connect', 'upgrade'] as const

/**
 * Gives a dispatcher made before undici was imported (the sync factory) undici's API at once: each method
 * calls undici's own (on the parent prototype, where index.js puts it) now, or once undici has loaded; a
 * callback gets a failure to load. `pipeline` returns its stream synchronously: before undici is loaded it
 * throws a TR_INVALID_OPTION saying to import undici (or await install()) first.
 */
function bridgeApi(proto: object): void {
  const parentMethod = (self: object, name: string) => Reflect.get(Object.getPrototypeOf(proto), name, self) as ((...a: unknown[]) => unknown) | undefined
  for (const name of ASYNC_API) {
    Object.defineProperty(proto, name, {
      configurable: true,
      writable: true,
      value(this: object, ...args: unknown[]) {
        const own = parentMethod(this, name)
        if (own) return Reflect.apply(own, this, args)
        const later = loadUndici().then(() => Reflect.apply(parentMethod(this, name) as (...a: unknown[]) => unknown, this, args))
        const callback = args.at(-1)
        if (typeof callback !== 'function') return later
        later.catch((err: unknown) => callback(err))
        return undefined
      },
    })
  }
  Object.defineProperty(proto, 'pipeline', {
    configurable: true,
    writable: true,
    value(this: object, ...args: unknown[]) {
      const own = parentMethod(this, 'pipeline')
      if (own) return Reflect.apply(own, this, args)
      throw new ToolReplayError(
        ErrorCodes.INVALID_OPTION,
        "dispatcher.pipeline() needs undici loaded, and this dispatcher was made before it was: import 'undici' (or await install()) before calling it.",
      )
    },
  })
}

/** Makes every registered class extend `undici.Dispatcher` (a no-op when it is UndiciDispatcher, as it should be). */
function adoptUndici(undici: Pick<Undici, 'Dispatcher'>): void {
  for (const subclass of subclasses) {
    if (Object.getPrototypeOf(subclass) === undici.Dispatcher) continue
    Object.setPrototypeOf(subclass, undici.Dispatcher)
    Object.setPrototypeOf(subclass.prototype, undici.Dispatcher.prototype)
  }
}

/** Imports undici (once); the Agent for live requests and the global dispatcher's defaults come from it. */
export function loadUndici(): Promise<Undici> {
  loading ??= import('undici').then((undici) => {
    adoptUndici(undici)
    loaded = undici
    return undici
  })
  return loading
}

/** undici once loadUndici() has resolved, else undefined. */
export function loadedUndici(): Undici | undefined {
  return loaded
}
