/**
 * Newline-delimited JSON-RPC framing, as MCP's stdio transport writes it (one message per line, UTF-8, a
 * trailing "\r" tolerated: the TypeScript SDK's `ReadBuffer` in shared/stdio.ts does the same).
 */

/** Longest line kept (bytes of UTF-8 text); the SDK's own reader stops at 10 MiB. */
export const MAX_LINE_BYTES = 64 * 1024 * 1024

/**
 * Splits a byte stream into lines. Memory holds at most one unfinished line; a line over `maxLineBytes` is
 * dropped and reported through `onOverflow` instead of growing without bound.
 */
export class LineReader {
  readonly #onLine: (line: string) => void
  readonly #onOverflow: (bytes: number) => void
  readonly #max: number
  readonly #decoder = new TextDecoder()
  #pending = ''
  #dropping = false

  constructor(onLine: (line: string) => void, options: { maxLineBytes?: number; onOverflow?: (bytes: number) => void } = {}) {
    this.#onLine = onLine
    this.#max = options.maxLineBytes ?? MAX_LINE_BYTES
    this.#onOverflow = options.onOverflow ?? (() => {})
  }

  /** Takes the next bytes; calls onLine for every line they complete. */
  push(chunk: Uint8Array): void {
    this.#pending += this.#decoder.decode(chunk, { stream: true })
    let nl = this.#pending.indexOf('\n')
    while (nl >= 0) {
      const line = this.#pending.slice(0, nl).replace(/\r$/, '')
      this.#pending = this.#pending.slice(nl + 1)
      if (this.#dropping) this.#dropping = false
      else if (line !== '') this.#onLine(line)
      nl = this.#pending.indexOf('\n')
    }
    if (this.#pending.length > this.#max) {
      this.#onOverflow(this.#pending.length)
      this.#pending = ''
      this.#dropping = true
    }
  }

  /** The stream ended: a last line without newline still counts. */
  end(): void {
    this.#pending += this.#decoder.decode()
    const line = this.#pending.replace(/\r$/, '')
    this.#pending = ''
    if (line !== '' && !this.#dropping) this.#onLine(line)
  }
}
