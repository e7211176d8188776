/**
 * The order in which an MCP conversation (conversation.ts) handles what happens: the server's output and the
 * messages forwarded to it pass one at a time, in the order they happened, and wait while anything holds the
 * inbox (a tee holding the server back, an answer waiting for its commit). The first hold pauses the server's
 * output; the last release resumes it and drains what waited.
 */
export class ServerInbox {
  readonly #actions: Array<() => void> = []
  readonly #holds = new Set<object>()
  #draining = false
  readonly #server: () => { pause?(): void; resume?(): void } | undefined
  readonly #log: (line: string) => void

  /** `server` is the running server, if any (paused and resumed), `log` where an action's failure is told. */
  constructor(server: () => { pause?(): void; resume?(): void } | undefined, log: (line: string) => void) {
    this.#server = server
    this.#log = log
  }

  /** Runs `action` in its turn. */
  receive(action: () => void): void {
    this.#actions.push(action)
    this.#drain()
  }

  /** Holds the inbox until `key` is released (keys are counted once each). */
  hold(key: object): void {
    if (this.#holds.size === 0) this.#server()?.pause?.()
    this.#holds.add(key)
  }

  release(key: object): void {
    if (!this.#holds.delete(key) || this.#holds.size > 0) return
    this.#server()?.resume?.()
    this.#drain()
  }

  #drain(): void {
    if (this.#draining) return
    this.#draining = true
    try {
      while (this.#holds.size === 0 && this.#actions.length > 0) {
        const action = this.#actions.shift() as () => void
        try {
          action()
        } catch (err) {
          this.#log(`MCP conversation: ${(err as Error)?.message ?? String(err)}`)
        }
      }
    } finally {
      this.#draining = false
    }
  }
}

/** A promise with its resolver. */
export function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve = () => {}
  const promise = new Promise<void>((r) => {
    resolve = r
  })
  return { promise, resolve }
}

/**
 * Replay: the client's replies to the server's requests, by id key: a wait for one still to come resolves when
 * it arrives, at once for one already here, and every wait resolves when the client closes.
 */
export class ClientReplies {
  readonly #replies = new Map<string, { promise: Promise<void>; resolve: () => void }>()
  #closed = false

  arrived(key: string): void {
    const w = this.#replies.get(key)
    if (w) w.resolve()
    else {
      const d = deferred()
      d.resolve()
      this.#replies.set(key, d)
    }
  }

  wait(key: string): Promise<void> {
    if (this.#closed) return Promise.resolve()
    let w = this.#replies.get(key)
    if (!w) {
      w = deferred()
      this.#replies.set(key, w)
    }
    return w.promise
  }

  /** The client closed its end: nothing more will arrive. */
  close(): void {
    this.#closed = true
    for (const w of this.#replies.values()) w.resolve()
  }
}
