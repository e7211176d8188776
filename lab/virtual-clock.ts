/**
 * The lab's clock. Virtual time moves only while someone sleeps on it, jumping straight to the next timer,
 * and I/O takes no virtual time: a scenario that waits 30 s for a timeout and 2 s for a Retry-After runs
 * in milliseconds, with every wait the same on every run.
 * @note Timers registered in the same tick are ordered by time before any fires (the jump waits for a
 * setImmediate). Meant for one sequential agent: concurrent sleepers are ordered, but a real request still
 * in flight while another caller sleeps does not hold virtual time back.
 */
import { setTimeout as sleepFor } from 'node:timers/promises'

/** What the agent and the fault executor need of a clock. */
export interface LabClock {
  /** ms since the run started. */
  now(): number
  /** Resolves after `ms` of clock time; rejects with the signal's reason when it aborts first. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>
  /** A signal that aborts with a TimeoutError after `ms` of clock time; `clear()` when no longer needed. */
  timeout(ms: number): { signal: AbortSignal; clear(): void }
}

interface Timer {
  at: number
  seq: number
  fire: () => void
}

/** A discrete-event clock for the lab. */
export class VirtualClock implements LabClock {
  #now = 0
  #seq = 0
  #timers: Timer[] = []
  #sleepers = 0
  #scheduled = false

  now(): number {
    return this.#now
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason)
        return
      }
      this.#sleepers++
      const done = () => {
        this.#sleepers--
        signal?.removeEventListener('abort', onAbort)
      }
      const timer = this.#add(ms, () => {
        done()
        resolve()
      })
      const onAbort = () => {
        this.#remove(timer)
        done()
        reject(signal?.reason)
      }
      signal?.addEventListener('abort', onAbort, { once: true })
      this.#schedule()
    })
  }

  timeout(ms: number): { signal: AbortSignal; clear(): void } {
    const controller = new AbortController()
    const timer = this.#add(ms, () => controller.abort(new DOMException(`The operation timed out after ${ms} ms.`, 'TimeoutError')))
    return { signal: controller.signal, clear: () => this.#remove(timer) }
  }

  #add(ms: number, fire: () => void): Timer {
    const timer = { at: this.#now + Math.max(0, ms), seq: this.#seq++, fire }
    const i = this.#timers.findIndex((t) => t.at > timer.at)
    this.#timers.splice(i === -1 ? this.#timers.length : i, 0, timer)
    return timer
  }

  #remove(timer: Timer): void {
    const i = this.#timers.indexOf(timer)
    if (i !== -1) this.#timers.splice(i, 1)
  }

  #schedule(): void {
    if (this.#scheduled) return
    this.#scheduled = true
    setImmediate(() => {
      this.#scheduled = false
      // One timer per turn, so whatever it wakes runs (and registers its own timers) before time moves on.
      const next = this.#sleepers > 0 ? this.#timers.shift() : undefined
      if (next) {
        this.#now = Math.max(this.#now, next.at)
        next.fire()
      }
      if (this.#sleepers > 0) this.#schedule()
    })
  }
}

/** The wall clock behind the same interface, for running the lab's executor against real SDKs that wait in real time. */
export class RealClock implements LabClock {
  readonly #t0 = performance.now()

  now(): number {
    return Math.round(performance.now() - this.#t0)
  }

  async sleep(ms: number, signal?: AbortSignal): Promise<void> {
    await sleepFor(ms, undefined, signal ? { signal } : {})
  }

  timeout(ms: number): { signal: AbortSignal; clear(): void } {
    const controller = new AbortController()
    const timer = setTimeout(() => controller.abort(new DOMException(`The operation timed out after ${ms} ms.`, 'TimeoutError')), ms)
    return { signal: controller.signal, clear: () => clearTimeout(timer) }
  }
}
