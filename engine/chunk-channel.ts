/**
 * A one-producer, one-reader queue of playback chunks: a response body that is still arriving, handed to
 * the playback driver as an async iterable. The producer is told to wait while more than a bound of bytes
 * sits unread, so a slow client holds back the source instead of growing memory.
 */
import type { PlaybackChunk } from './decision.ts'

/** Bytes that may wait unread before `push` asks the producer to hold on. */
const HIGH_WATER_BYTES = 1024 * 1024

/**
 * @example
 * const channel = new ChunkChannel()
 * const playback = { kind: 'response', head, headersMs: 0, chunks: channel, trailers: [] }
 * await channel.push({ bytes, atMs }) // then channel.end() or channel.fail(err)
 */
export class ChunkChannel implements AsyncIterable<PlaybackChunk> {
  readonly #queue: Array<PlaybackChunk | undefined> = []
  /** The next chunk to read in #queue (a shift per chunk moves a long queue whole: quadratic in its length). */
  #head = 0
  #queued = 0
  #ended = false
  #error: Error | undefined
  /** The reader stopped (the client went away): pushes are dropped, nobody waits. */
  #closed = false
  #wakeReader: (() => void) | undefined
  #wakeWriters: Array<() => void> = []

  /** True once the reader stopped reading (the client is gone). */
  get closed(): boolean {
    return this.#closed
  }

  /** Queues a chunk; returns a promise while too much waits unread (settles once the reader caught up). */
  push(chunk: PlaybackChunk): undefined | Promise<void> {
    if (this.#closed || this.#ended || this.#error) return undefined
    this.#queue.push(chunk)
    this.#queued += chunk.bytes.byteLength
    this.#wake()
    if (this.#queued <= HIGH_WATER_BYTES) return undefined
    return new Promise((resolve) => this.#wakeWriters.push(resolve))
  }

  /** No more chunks: the reader ends after the queued ones. */
  end(): void {
    this.#ended = true
    this.#wake()
  }

  /** The reader throws `error` after the queued chunks (a body that breaks off). */
  fail(error: Error): void {
    if (this.#ended) return
    this.#error ??= error
    this.#wake()
  }

  #wake(): void {
    const wake = this.#wakeReader
    this.#wakeReader = undefined
    wake?.()
  }

  #release(): void {
    if (this.#queued > HIGH_WATER_BYTES && !this.#closed) return
    const writers = this.#wakeWriters
    this.#wakeWriters = []
    for (const w of writers) w()
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<PlaybackChunk> {
    try {
      while (true) {
        const next = this.#queue[this.#head]
        if (next) {
          this.#queue[this.#head++] = undefined
          if (this.#head >= 1024 && this.#head * 2 >= this.#queue.length) {
            this.#queue.splice(0, this.#head)
            this.#head = 0
          }
          this.#queued -= next.bytes.byteLength
          this.#release()
          yield next
          continue
        }
        if (this.#error) throw this.#error
        if (this.#ended) return
        await new Promise<void>((resolve) => (this.#wakeReader = resolve))
      }
    } finally {
      // Reached on the end, on a failure and when the reader stops early: a waiting producer must not hang.
      this.#closed = true
      this.#queue.length = 0
      this.#head = 0
      this.#queued = 0
      this.#release()
    }
  }
}
