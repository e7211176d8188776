/**
 * Writing a big body to the store as it arrives: bytes are cut into pieces of PIECE_SIZE, each put under its
 * SHA-256 while the next fills, with a bounded number of puts in flight (back-pressure for the writer), and
 * the body's own SHA-256 computed in the same pass. Memory stays at a few pieces whatever the body's size.
 */
import { createHash } from 'node:crypto'
import { sha256 } from '../trace/index.ts'
import { type BodyManifest, PIECE_SIZE, type StoreOps } from './store-ops.ts'

/** Puts in flight before `backlogged` turns true. */
const MAX_PENDING = 4

/** Streams one body's bytes into the store; `finish()` returns its digest and manifest. */
export class BodyWriter {
  readonly #putPiece: StoreOps['putPiece']
  readonly #whole = createHash('sha256')
  readonly #manifest: BodyManifest = { size: 0, pieces: [] }
  readonly #pending = new Set<Promise<void>>()
  #buffer = Buffer.allocUnsafe(PIECE_SIZE)
  #filled = 0
  #error: unknown
  #drained: Array<() => void> = []

  constructor(putPiece: StoreOps['putPiece']) {
    this.#putPiece = putPiece
  }

  /** True while too many pieces are being written: the producer should pause until `whenDrained()`. */
  get backlogged(): boolean {
    return this.#pending.size >= MAX_PENDING
  }

  /** Resolves once fewer than the maximum puts are in flight. */
  whenDrained(): Promise<void> {
    if (!this.backlogged) return Promise.resolve()
    return new Promise((resolve) => this.#drained.push(resolve))
  }

  /** Adds bytes (copied; the caller may reuse its buffer). */
  write(chunk: Uint8Array): void {
    this.#whole.update(chunk)
    this.#manifest.size += chunk.byteLength
    let offset = 0
    while (offset < chunk.byteLength) {
      const n = Math.min(PIECE_SIZE - this.#filled, chunk.byteLength - offset)
      this.#buffer.set(chunk.subarray(offset, offset + n), this.#filled)
      this.#filled += n
      offset += n
      if (this.#filled === PIECE_SIZE) this.#flush()
    }
  }

  /** Writes what is left, waits for every put, and returns the body's digest and manifest. */
  async finish(): Promise<{ digest: string; manifest: BodyManifest }> {
    if (this.#filled > 0) this.#flush()
    while (this.#pending.size > 0) await Promise.all([...this.#pending])
    if (this.#error !== undefined) throw this.#error
    return { digest: this.#whole.digest('hex'), manifest: this.#manifest }
  }

  #flush(): void {
    const piece = this.#buffer.subarray(0, this.#filled)
    const sha = sha256(piece)
    this.#manifest.pieces.push({ sha256: sha, size: piece.byteLength })
    // The put owns this buffer now; the next piece gets a fresh one.
    this.#buffer = Buffer.allocUnsafe(PIECE_SIZE)
    this.#filled = 0
    const p: Promise<void> = this.#putPiece(sha, new Uint8Array(piece.buffer, piece.byteOffset, piece.byteLength)).then(
      () => this.#settle(p),
      (err: unknown) => {
        this.#error ??= err
        this.#settle(p)
      },
    )
    this.#pending.add(p)
  }

  #settle(p: Promise<void>): void {
    this.#pending.delete(p)
    if (this.backlogged) return
    const waiting = this.#drained
    this.#drained = []
    for (const resolve of waiting) resolve()
  }
}
