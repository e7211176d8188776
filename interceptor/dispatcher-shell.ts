/**
 * undici's `close` and `destroy`, with all their overloads (a promise, or a callback; destroy with or without
 * an error), written once for Tool Replay's dispatchers: each says what closing and destroying do, as
 * promises. The shell extends undici's Dispatcher (undici-loader.ts) and is registered once, so a dispatcher
 * built on it is `instanceof Dispatcher` of the app's undici and gains undici's API when it loads.
 */
import { extendsUndiciDispatcher, UndiciDispatcher } from './undici-loader.ts'

export abstract class DispatcherShell extends UndiciDispatcher {
  /** What `close()` does: let requests in flight finish, then free what the dispatcher holds. */
  protected abstract closing(): Promise<void>
  /** What `destroy()` does: end everything now, failing requests in flight with `err` where given. */
  protected abstract destroying(err: Error | null): Promise<void>

  override close(): Promise<void>
  override close(callback: () => void): void
  override close(callback?: () => void): Promise<void> | undefined {
    return settle(this.closing(), callback)
  }

  override destroy(): Promise<void>
  override destroy(err: Error | null): Promise<void>
  override destroy(callback: () => void): void
  override destroy(err: Error | null, callback: () => void): void
  override destroy(a?: Error | null | (() => void), b?: () => void): Promise<void> | undefined {
    const callback = typeof a === 'function' ? a : b
    return settle(this.destroying(typeof a === 'function' ? null : (a ?? null)), callback)
  }
}

extendsUndiciDispatcher(DispatcherShell)

/** The promise, or nothing with the callback called once it settles (undici's two styles). */
function settle(done: Promise<void>, callback: (() => void) | undefined): Promise<void> | undefined {
  if (!callback) return done
  done.then(callback, callback)
  return undefined
}
