/**
 * Newline-delimited framing of a byte stream, the one splitter of every NDJSON wire: MCP over stdio (mcp/), the
 * store's socket (store/store-rpc.ts) and the shared session's socket (engine/session-share.ts). Pure: bytes in,
 * lines out; the caller owns the stream.
 *
 * Linear in its input: each byte is scanned for the newline once (a new chunk only, never the pending line
 * again), and a line is joined and decoded once, when its newline comes. Bounded: memory holds at most one
 * unfinished line of `maxLineBytes`; a longer line is dropped as it streams by, and reported once it ends with
 * its size and its first and last bytes (a wire can often tell from those whose message it was).
 * @note LF ends a line and a CR before it is dropped (MCP's stdio transport writes LF, the SDK's `ReadBuffer`
 * strips a CR); blank lines are skipped. UTF-8 never puts byte 0x0A inside a multi-byte character, so lines are
 * found on bytes and decoded whole.
 */
import { type ErrorCode, ErrorCodes, ToolReplayError } from './errors.ts'

/** How many bytes of each end of a dropped line are kept for its report. */
export const LINE_EDGE_BYTES = 512

/**
 * The longest line a socket wire (the store's, the shared session's) takes: just under the longest string V8
 * holds (2^29 - 24 UTF-16 units), so any line that fits can still be decoded and parsed as one JSON text.
 */
export const MAX_SOCKET_LINE_BYTES = 512 * 1024 * 1024

/** A line that was over the limit: dropped, with what is known of it. */
export interface LongLine {
  /** Its size in bytes (without the newline); for a stream that ended inside it, the bytes it had. */
  bytes: number
  /** Its first and last bytes (up to LINE_EDGE_BYTES each), decoded. */
  head: string
  tail: string
}

/** Options for `LineReader`. */
export interface LineReaderOptions {
  /** The longest line kept, in bytes without the newline. */
  maxLineBytes: number
  /** A line over the limit went by (dropped): called once it ended. */
  onTooLong(line: LongLine): void
}

const decoder = new TextDecoder()

/**
 * Splits a byte stream into lines.
 * @example
 * const reader = new LineReader((line) => handle(JSON.parse(line)), { maxLineBytes: 64 << 20, onTooLong: (l) => report(l) })
 * socket.on('data', (chunk) => reader.push(chunk)); socket.on('end', () => reader.end())
 */
export class LineReader {
  readonly #onLine: (line: string) => void
  readonly #options: LineReaderOptions
  /** The unfinished line's pieces and their size. */
  #parts: Uint8Array[] = []
  #size = 0
  /** The line being dropped: its size so far, its first bytes, and its last bytes. */
  #dropping: { bytes: number; head: Uint8Array; tail: Uint8Array } | undefined

  constructor(onLine: (line: string) => void, options: LineReaderOptions) {
    this.#onLine = onLine
    this.#options = options
  }

  /** The size of the unfinished line held (bytes). */
  get pendingBytes(): number {
    return this.#size
  }

  /** Takes the next bytes; calls onLine for every line they complete. */
  push(chunk: Uint8Array): void {
    let start = 0
    while (start < chunk.length) {
      const nl = chunk.indexOf(0x0a, start)
      this.#take(chunk.subarray(start, nl < 0 ? chunk.length : nl))
      if (nl < 0) return
      this.#lineEnded()
      start = nl + 1
    }
  }

  /** The stream ended: a last line without newline still counts. */
  end(): void {
    this.#lineEnded()
  }

  #take(piece: Uint8Array): void {
    if (piece.length === 0) return
    const dropping = this.#dropping
    if (dropping) {
      dropping.bytes += piece.length
      if (dropping.head.length < LINE_EDGE_BYTES)
        dropping.head = joinParts([dropping.head, piece.subarray(0, LINE_EDGE_BYTES - dropping.head.length)], 0).slice()
      dropping.tail = lastBytes(dropping.tail, piece)
      return
    }
    if (this.#size + piece.length <= this.#options.maxLineBytes) {
      this.#parts.push(piece)
      this.#size += piece.length
      return
    }
    // Over the limit: from here the line only streams by; its ends are kept for the report.
    const held = joinParts([...this.#parts, piece], this.#size + piece.length)
    this.#dropping = { bytes: held.length, head: held.slice(0, LINE_EDGE_BYTES), tail: held.slice(-LINE_EDGE_BYTES) }
    this.#parts = []
    this.#size = 0
  }

  #lineEnded(): void {
    const dropping = this.#dropping
    if (dropping) {
      this.#dropping = undefined
      this.#options.onTooLong({ bytes: dropping.bytes, head: decoder.decode(dropping.head), tail: decoder.decode(dropping.tail) })
      return
    }
    if (this.#size === 0) return
    let bytes = joinParts(this.#parts, this.#size)
    this.#parts = []
    this.#size = 0
    if (bytes[bytes.length - 1] === 0x0d) bytes = bytes.subarray(0, -1)
    if (bytes.length > 0) this.#onLine(decoder.decode(bytes))
  }
}

/** The parts as one array (`size`: their total length; 0 to have it counted). */
function joinParts(parts: Uint8Array[], size: number): Uint8Array {
  if (parts.length === 1) return parts[0] as Uint8Array
  const out = new Uint8Array(size || parts.reduce((n, p) => n + p.length, 0))
  let at = 0
  for (const p of parts) {
    out.set(p, at)
    at += p.length
  }
  return out
}

/** The last LINE_EDGE_BYTES of `tail` followed by `piece`. */
function lastBytes(tail: Uint8Array, piece: Uint8Array): Uint8Array {
  if (piece.length >= LINE_EDGE_BYTES) return piece.slice(-LINE_EDGE_BYTES)
  const out = new Uint8Array(Math.min(LINE_EDGE_BYTES, tail.length + piece.length))
  const fromTail = out.length - piece.length
  out.set(tail.subarray(tail.length - fromTail), 0)
  out.set(piece, fromTail)
  return out
}

/** What `lineTooLong` says about the wire: its name, and how to raise its limit (or what to do instead). */
export interface LineWire {
  /** "the MCP server's stdout", "the store's socket", ... */
  name: string
  /** The sentence that says how to raise the limit, or what to do instead. */
  fix: string
}

/**
 * The typed error of a line over a wire's limit (TR_LINE_TOO_LONG): names the wire, the line's size, the limit
 * and how to raise it.
 */
export function lineTooLong(wire: LineWire, line: Pick<LongLine, 'bytes'>, maxLineBytes: number): ToolReplayError {
  const code: ErrorCode = ErrorCodes.LINE_TOO_LONG
  return new ToolReplayError(
    code,
    `A line of ${line.bytes} bytes on ${wire.name} is over the ${maxLineBytes}-byte line limit, so it was dropped (a message is one line, and one line is held whole to be read). ${wire.fix}`,
    { details: { bytes: line.bytes, maxLineBytes } },
  )
}
