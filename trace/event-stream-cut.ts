/**
 * Finds where to cut a response body for `stream_cut` and `stream_error`: after N whole events of an event
 * stream (at an event boundary, so the client parses every event it gets), or after N bytes of any body.
 * Incremental, so a capture path can apply it to a body while it streams.
 * @note Event boundaries follow the WHATWG event-stream rules as trace/sse.ts reads them: lines end in CRLF,
 * LF or CR; a blank line dispatches an event when the block had a `data` field; comment-only blocks
 * (keep-alives) are not events.
 */

/** Where a stream fault acts: after N whole events (text/event-stream), or after N bytes of any body. */
export type StreamPoint = { events: number } | { bytes: number }

const CR = 0x0d
const LF = 0x0a
const DATA = [0x64, 0x61, 0x74, 0x61] // "data"

/**
 * Feeds a body chunk by chunk and says how much of each chunk the client gets.
 * @example
 * const cutter = new StreamCutter({ events: 2 })
 * for (const chunk of body) { const { keep, done } = cutter.push(chunk); send(keep); if (done) break }
 */
export class StreamCutter {
  readonly #after: StreamPoint
  #bytes = 0
  #events = 0
  #done = false
  // Line state of the event-stream scanner.
  #lineLength = 0
  #fieldMatch = 0
  #lineIsData = false
  #blockHasData = false
  #afterCR = false
  /** The cut falls after a CR: a following LF still belongs to the boundary. */
  #cutAfterCR = false

  constructor(after: StreamPoint) {
    this.#after = after
    if (('events' in after ? after.events : after.bytes) === 0) this.#done = true
  }

  /** Whole events passed on so far. */
  get events(): number {
    return this.#events
  }

  /** Bytes passed on so far. */
  get bytes(): number {
    return this.#bytes
  }

  /** True once the cut point is reached: nothing more goes to the client. */
  get done(): boolean {
    return this.#done
  }

  /** The part of `chunk` the client gets; `done` once the cut point is inside it (or was reached before). */
  push(chunk: Uint8Array): { keep: Uint8Array; done: boolean } {
    if (this.#done) {
      // A CRLF boundary split across chunks: its LF is still part of the last event.
      if (this.#cutAfterCR && chunk.byteLength > 0 && chunk[0] === LF) {
        this.#cutAfterCR = false
        this.#bytes += 1
        return { keep: chunk.subarray(0, 1), done: true }
      }
      this.#cutAfterCR = false
      return { keep: chunk.subarray(0, 0), done: true }
    }
    const end = 'bytes' in this.#after ? this.#scanBytes(chunk, this.#after.bytes) : this.#scanEvents(chunk, this.#after.events)
    this.#bytes += end
    return { keep: chunk.subarray(0, end), done: this.#done }
  }

  #scanBytes(chunk: Uint8Array, limit: number): number {
    const room = limit - this.#bytes
    if (chunk.byteLength >= room) this.#done = true
    return Math.min(room, chunk.byteLength)
  }

  /** Scans for event boundaries; returns how many bytes of the chunk to keep. */
  #scanEvents(chunk: Uint8Array, limit: number): number {
    for (let i = 0; i < chunk.byteLength; i++) {
      const b = chunk[i] as number
      if (this.#afterCR) {
        this.#afterCR = false
        if (b === LF) continue // the LF of a CRLF: the line already ended at the CR
      }
      if (b !== CR && b !== LF) {
        if (this.#lineLength < DATA.length && b === DATA[this.#lineLength]) this.#fieldMatch++
        this.#lineLength++
        if (this.#lineLength === DATA.length + 1) this.#lineIsData = this.#fieldMatch === DATA.length && b === 0x3a // "data:"
        continue
      }
      if (b === CR) this.#afterCR = true
      if (this.#lineLength === 0) {
        const dispatched = this.#blockHasData
        this.#blockHasData = false
        if (dispatched && ++this.#events === limit) {
          this.#done = true
          if (b === CR) {
            // CRLF: keep the LF too when it is in this chunk; otherwise push() keeps it from the next one.
            if (i + 1 < chunk.byteLength) return chunk[i + 1] === LF ? i + 2 : i + 1
            this.#cutAfterCR = true
          }
          return i + 1
        }
      } else if (this.#lineIsData || (this.#lineLength === DATA.length && this.#fieldMatch === DATA.length)) {
        this.#blockHasData = true // "data:..." or a bare "data" line
      }
      this.#lineLength = 0
      this.#fieldMatch = 0
      this.#lineIsData = false
    }
    return chunk.byteLength
  }
}

/**
 * Cuts a whole body: the bytes the client gets, whether the cut point was reached, whether anything was
 * taken away (a body exactly as long as the cut point loses nothing), and the whole events kept.
 */
export function cutBody(body: Uint8Array, after: StreamPoint): { body: Uint8Array; reached: boolean; cut: boolean; events: number } {
  const cutter = new StreamCutter(after)
  const { keep } = cutter.push(body)
  return { body: keep, reached: cutter.done, cut: cutter.done && keep.byteLength < body.byteLength, events: cutter.events }
}
