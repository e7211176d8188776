/**
 * The order in which a session sees requests, made to be the order the app issued them where that order is
 * observable: a capture path takes a ticket at the moment it first learns of a request (the interceptor
 * when fetch dispatches it; the proxy when the client's connection is accepted, before CONNECT and TLS
 * handshakes, which finish in any order), and hands the request to the engine only on its ticket's turn.
 * Recording and replay both go through it, so ten concurrent identical requests are numbered the same way
 * in both, and each caller gets its own response back.
 *
 * A ticket that makes no progress for `waitMs` (an idle pre-connected socket, a client that never sends)
 * stops holding the others up: later tickets go ahead, and it takes its turn whenever its request comes.
 */

/** One place in the order. */
export interface Ticket {
  /**
   * Runs `fn` once every earlier ticket has had its turn (or stopped holding the others up). When it already
   * is this ticket's turn, `fn` runs at once and its value is returned as is (no promise on the common path).
   */
  turn<T>(fn: () => T): T | Promise<T>
  /** Says the request is on its way (a CONNECT answered, a TLS handshake done): it may hold the others a while longer. */
  progress(): void
  /** Gives the place up (its request never came, the connection closed). Idempotent; a no-op once `turn` was asked for. */
  release(): void
}

/** Default time a ticket may hold up later ones without progress before it is skipped (ms). */
export const DEFAULT_ARRIVAL_WAIT_MS = 1000

/** Issues tickets in arrival order and runs their turns in that order. */
export class ArrivalOrder {
  readonly #waitMs: number
  #issued = 0
  /** Every ticket below this has had its turn, given up, or been skipped. */
  #next = 0
  /** Tickets at or above #next that are over (released or skipped). */
  readonly #over = new Set<number>()
  /** Tickets skipped while they held others up: their turn runs at once when it comes. */
  readonly #skipped = new Set<number>()
  readonly #waiting = new Map<number, () => void>()
  /** When each outstanding ticket last showed progress. */
  readonly #seen = new Map<number, number>()
  #timer: NodeJS.Timeout | undefined

  constructor(waitMs = DEFAULT_ARRIVAL_WAIT_MS) {
    this.#waitMs = waitMs
  }

  /** A ticket for the next arrival. */
  ticket(): Ticket {
    const n = this.#issued++
    this.#seen.set(n, performance.now())
    let released = false
    const release = () => {
      // A turn already asked for runs in its place whatever happens to the connection: the request came, and
      // whoever waits on the turn must get its answer (the capture lifecycle records a client that left).
      if (released || this.#waiting.has(n)) return
      released = true
      this.#seen.delete(n)
      this.#over.add(n)
      this.#advance()
    }
    const run = <T>(fn: () => T): T => {
      try {
        return fn()
      } finally {
        release()
      }
    }
    return {
      turn: <T>(fn: () => T): T | Promise<T> => {
        if (n <= this.#next || released || this.#skipped.delete(n)) return run(fn)
        return new Promise<T>((resolve, reject) => {
          this.#waiting.set(n, () => {
            this.#waiting.delete(n)
            try {
              resolve(run(fn))
            } catch (err) {
              reject(err)
            }
          })
          this.#arm()
        })
      },
      progress: () => {
        if (this.#seen.has(n)) this.#seen.set(n, performance.now())
      },
      release,
    }
  }

  /** Moves #next past every ticket that is over, and runs the waiting ticket whose turn it now is. */
  #advance(): void {
    while (this.#over.has(this.#next)) this.#over.delete(this.#next++)
    const run = this.#waiting.get(this.#next)
    if (run) run()
    if (this.#waiting.size === 0 && this.#timer) {
      clearTimeout(this.#timer)
      this.#timer = undefined
    }
  }

  /** While tickets wait, one that holds them up without progress for waitMs is skipped. */
  #arm(): void {
    if (this.#timer) return
    this.#timer = setTimeout(() => {
      this.#timer = undefined
      const now = performance.now()
      const first = Math.min(...this.#waiting.keys())
      for (let t = this.#next; t < first; t++) {
        if (this.#over.has(t) || now - (this.#seen.get(t) ?? 0) < this.#waitMs) continue
        this.#skipped.add(t)
        this.#seen.delete(t)
        this.#over.add(t)
      }
      this.#advance()
      if (this.#waiting.size > 0) this.#arm()
    }, this.#waitMs / 4)
    this.#timer.unref()
  }
}
