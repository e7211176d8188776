/**
 * The order in which a session sees requests, made to be the order the app issued them where that order is
 * observable: a capture path takes a ticket at the moment it first learns of a request (the interceptor
 * when fetch dispatches it; the proxy when the client's connection is accepted, before CONNECT and TLS
 * handshakes, which finish in any order), and hands the request to the engine only on its ticket's turn.
 * Recording and replay both go through it, so ten concurrent identical requests are numbered the same way
 * in both, and each caller gets its own response back.
 *
 * A ticket whose request does not come within `waitMs` (an idle pre-connected socket, a client that never
 * sends) stops holding the others up: later tickets go ahead, and it takes its turn whenever it comes.
 */

/** One place in the order. */
export interface Ticket {
  /**
   * Runs `fn` once every earlier ticket has had its turn (or given up waiting). When it already is this
   * ticket's turn, `fn` runs at once and its value is returned as is (no promise on the common path).
   */
  turn<T>(fn: () => T): T | Promise<T>
  /** Gives the place up (its request never came, the connection closed). Idempotent. */
  release(): void
}

/** Default time a ticket may hold up later ones before it is skipped (ms). */
export const DEFAULT_ARRIVAL_WAIT_MS = 200

/** Issues tickets in arrival order and runs their turns in that order. */
export class ArrivalOrder {
  readonly #waitMs: number
  #issued = 0
  /** Every ticket below this has had its turn, given up, or been skipped. */
  #next = 0
  readonly #done = new Set<number>()
  readonly #waiting = new Map<number, () => void>()
  #timer: NodeJS.Timeout | undefined

  constructor(waitMs = DEFAULT_ARRIVAL_WAIT_MS) {
    this.#waitMs = waitMs
  }

  /** A ticket for the next arrival. */
  ticket(): Ticket {
    const n = this.#issued++
    let released = false
    const release = () => {
      if (released) return
      released = true
      // A place given up while waiting (the client went away): its turn never runs.
      this.#waiting.delete(n)
      this.#finish(n)
    }
    return {
      turn: <T>(fn: () => T): T | Promise<T> => {
        if (n <= this.#next || released) {
          try {
            return fn()
          } finally {
            release()
          }
        }
        return new Promise<T>((resolve, reject) => {
          this.#waiting.set(n, () => {
            this.#waiting.delete(n)
            try {
              resolve(fn())
            } catch (err) {
              reject(err)
            } finally {
              release()
            }
          })
          this.#arm()
        })
      },
      release,
    }
  }

  #finish(n: number): void {
    this.#done.add(n)
    while (this.#done.has(this.#next)) this.#done.delete(this.#next++)
    this.#wake()
  }

  /** Runs the waiting ticket whose turn it now is, if any. */
  #wake(): void {
    const run = this.#waiting.get(this.#next)
    if (run) {
      this.#waiting.delete(this.#next)
      run()
    }
    if (this.#waiting.size === 0 && this.#timer) {
      clearTimeout(this.#timer)
      this.#timer = undefined
    }
  }

  /** While tickets wait, the earliest missing one may hold them up for at most waitMs. */
  #arm(): void {
    if (this.#timer) return
    this.#timer = setTimeout(() => {
      this.#timer = undefined
      // Skip the ticket(s) holding up the earliest waiting one: they take their turn when they come.
      const first = Math.min(...this.#waiting.keys())
      while (this.#next < first) this.#next++
      for (const d of [...this.#done]) if (d < this.#next) this.#done.delete(d)
      this.#wake()
      if (this.#waiting.size > 0) this.#arm()
    }, this.#waitMs)
    this.#timer.unref()
  }
}
