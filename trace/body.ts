import { sha256 } from './digest.ts'
import { ErrorCodes, ToolReplayError } from './errors.ts'
import type { BodyChunk, BodyRef, Trace } from './exchange.ts'

/** A chunk's entry in a BodyRef, the one rule for every writer: its size, and its time in whole ms (never negative). */
export function bodyChunk(size: number, atMs: number): BodyChunk {
  return { size, atMs: Math.max(0, Math.round(atMs)) }
}

/** Builds a BodyRef from chunks as they arrived, and the full bytes for the body map (empty chunks leave no entry). */
export function bodyFromChunks(chunks: Array<{ bytes: Uint8Array; atMs: number }>): { ref: BodyRef; bytes: Uint8Array } {
  const acc = new BodyAccumulator(chunks.reduce((n, c) => n + c.bytes.byteLength, 0))
  for (const c of chunks) acc.append(c.bytes, c.atMs)
  return acc.finish()
}

/**
 * Collects a streamed body as it arrives, copying each chunk once into one growing buffer (callers may
 * reuse their chunk buffers), and builds the same BodyRef as `bodyFromChunks` without a second copy.
 * @example
 * const acc = new BodyAccumulator(contentLength)
 * acc.append(chunk, atMs)
 * const { ref, bytes } = acc.finish()
 */
export class BodyAccumulator {
  #buffer: Uint8Array
  #size = 0
  readonly #chunks: BodyChunk[] = []
  #lastAtMs = 0

  /** `sizeHint`: the expected total (a Content-Length), so the buffer is allocated once. */
  constructor(sizeHint?: number) {
    const hint = sizeHint !== undefined && Number.isSafeInteger(sizeHint) && sizeHint >= 0 ? Math.min(sizeHint, MAX_PREALLOCATE) : 0
    this.#buffer = new Uint8Array(hint)
  }

  /** Time of the last chunk (ms), 0 before any. */
  get lastAtMs(): number {
    return this.#lastAtMs
  }

  append(chunk: Uint8Array, atMs: number): void {
    this.#lastAtMs = atMs
    const n = chunk.byteLength
    if (n === 0) return
    if (this.#size + n > this.#buffer.byteLength) {
      // The first chunk gets exactly its size (a one-chunk body, the common JSON answer, keeps no slack: chunked
      // answers come without a length to size by); then the buffer doubles. Not zero-filled: every byte up to
      // #size is written before it is read, and finish() zeroes the rest. (A 16 KiB zeroed floor made recording 2,000 small chunked answers
      // spend 4% of its time here, in allocation and the GC of external memory.)
      const grown = new Uint8Array(Buffer.allocUnsafeSlow(this.#size === 0 ? n : Math.max(this.#size + n, this.#buffer.byteLength * 2)).buffer)
      grown.set(this.#buffer.subarray(0, this.#size))
      this.#buffer = grown
    }
    this.#buffer.set(chunk, this.#size)
    this.#size += n
    this.#chunks.push(bodyChunk(n, atMs))
  }

  /** The body so far: its ref and its bytes (a view of the accumulator's buffer; do not append afterwards). */
  finish(): { ref: BodyRef; bytes: Uint8Array } {
    // No stale memory behind the view, whoever reads its whole ArrayBuffer.
    if (this.#buffer.byteLength > this.#size) this.#buffer.fill(0, this.#size)
    const bytes = this.#buffer.byteLength === this.#size ? this.#buffer : this.#buffer.subarray(0, this.#size)
    return { ref: { digest: sha256(bytes), size: this.#size, chunks: [...this.#chunks] }, bytes }
  }
}

// A Content-Length is only a hint: a lying or huge one must not allocate more than this up front.
const MAX_PREALLOCATE = 8 * 1024 * 1024

/** A BodyRef of one chunk at time 0 for bytes that were not streamed (patches, imports). */
export function bodyFromBytes(bytes: Uint8Array): { ref: BodyRef; bytes: Uint8Array } {
  return bodyFromChunks([{ bytes, atMs: 0 }])
}

/** The full bytes of a body; fails closed when the trace lacks them. */
export function bodyBytes(trace: Pick<Trace, 'bodies' | 'meta'>, ref: BodyRef): Uint8Array {
  const bytes = trace.bodies.get(ref.digest)
  if (bytes === undefined) {
    throw new ToolReplayError(
      ErrorCodes.BODY_MISSING,
      `Trace "${trace.meta.name}" references body ${ref.digest} but does not contain it. Re-import or re-record the trace.`,
    )
  }
  return bytes
}

/** Splits full body bytes along the recorded chunk boundaries. Views, not copies. */
export function splitChunks(bytes: Uint8Array, ref: BodyRef): Array<{ bytes: Uint8Array; atMs: number }> {
  const out: Array<{ bytes: Uint8Array; atMs: number }> = []
  let offset = 0
  for (const c of ref.chunks) {
    out.push({ bytes: bytes.subarray(offset, offset + c.size), atMs: c.atMs })
    offset += c.size
  }
  // A ref whose chunk sizes do not add up is a damaged trace; keep every byte rather than drop some.
  if (offset < bytes.byteLength) out.push({ bytes: bytes.subarray(offset), atMs: ref.chunks.at(-1)?.atMs ?? 0 })
  return out
}

export function concatBytes(parts: Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0] as Uint8Array
  let size = 0
  for (const p of parts) size += p.byteLength
  const out = new Uint8Array(size)
  let offset = 0
  for (const p of parts) {
    out.set(p, offset)
    offset += p.byteLength
  }
  return out
}

const utf8 = new TextDecoder('utf-8', { fatal: true })

/** Decodes bytes as UTF-8 text, or returns undefined when they are not valid UTF-8. */
export function tryUtf8(bytes: Uint8Array): string | undefined {
  try {
    return utf8.decode(bytes)
  } catch {
    return undefined
  }
}
