/**
 * One node:test setup per test file, for both ready-made setups (the interceptor's and a shared proxy's
 * session): started by the first call (or the preload), ended by an `after()` hook registered first, so it
 * judges the file before the file's own after() hooks run; then whatever must refuse requests made after it.
 */
import { after } from 'node:test'

/** What a setup does at its start and end, and what its callers get. */
export interface NodeTestFileSetup<O, T, R> {
  start(options: O): Promise<T>
  finish(setup: T): Promise<unknown>
  /** After `finish` (even when it threw): refuse what comes later (a strict replay's late requests). */
  afterwards(setup: T, options: O): unknown
  /** What the setup function resolves with. */
  result(setup: T): R
}

/**
 * Returns the file's setup function: the first call starts it and registers its end with `after()`; later
 * calls return the same result.
 * @example
 * export const setupToolReplay = nodeTestFileSetup({ start, finish, afterwards, result: (s) => s.interceptor })
 */
export function nodeTestFileSetup<O, T, R>(setup: NodeTestFileSetup<O, T, R>): (options?: O) => Promise<R> {
  let current: Promise<T> | undefined
  return async (options = {} as O) => {
    if (!current) {
      current = setup.start(options)
      const started = await current
      after(async () => {
        try {
          await setup.finish(started)
        } finally {
          await setup.afterwards(started, options)
        }
      })
    }
    return setup.result(await current)
  }
}
