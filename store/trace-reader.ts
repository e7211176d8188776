/**
 * Reading a stored trace lazily and verified: exchanges page by page, bodies piece by piece, each checked
 * against its SHA-256 before anyone gets to use it. A body, a piece or an exchange that does not check out
 * is TR_STORE_CORRUPT naming the trace, the exchange and the body, and is never handed out.
 */
import { createHash } from 'node:crypto'
import { type BodyRef, ErrorCodes, type Exchange, sha256, ToolReplayError, type Trace, websocketBodyRefs } from '../trace/index.ts'
import type { StoredBody, StoreOps, TraceInfo } from './store-ops.ts'

const PAGE = 1000
/** Bodies readAll asks the store for at once. */
const BODY_READ_AHEAD = 64

/** Where a body is used, for messages: `exchange #3 response`. */
export type BodyUse = string

/** A stored trace opened for reading. Holds no body and no exchange in memory by itself. */
export class TraceReader {
  readonly info: TraceInfo
  readonly #ops: StoreOps

  constructor(ops: StoreOps, info: TraceInfo) {
    this.#ops = ops
    this.info = info
  }

  get name(): string {
    return this.info.name
  }

  /**
   * Every exchange in seq order (from `fromSeq`), a page at a time. Read from the start, a complete trace with
   * an exchange missing is TR_STORE_CORRUPT.
   */
  async *exchanges(fromSeq = 0): AsyncGenerator<Exchange> {
    let from = fromSeq
    let seen = 0
    for (;;) {
      const page = await this.#ops.exchanges(this.info.id, from, PAGE)
      for (const x of page) {
        seen++
        yield x
      }
      if (page.length < PAGE) break
      from = (page.at(-1) as Exchange).seq + 1
    }
    if (fromSeq === 0 && this.info.status === 'complete' && seen !== this.info.count) {
      throw this.#corrupt(`it was closed with ${this.info.count} exchange(s), but ${seen} can be read: ${Math.abs(this.info.count - seen)} went missing`)
    }
  }

  /** Up to `limit` exchanges from `fromSeq` on, in seq order: one read of the store. */
  page(fromSeq: number, limit: number): Promise<Exchange[]> {
    return this.#ops.exchanges(this.info.id, fromSeq, limit)
  }

  /** One exchange by seq. */
  async exchange(seq: number): Promise<Exchange> {
    const [x] = await this.#ops.exchanges(this.info.id, seq, 1)
    if (x === undefined || x.seq !== seq) throw this.#corrupt(`its index names exchange #${seq}, which is missing`)
    return x
  }

  /** Seqs of the exchanges whose request has this identity (default identity options). */
  lookup(key: string): Promise<number[]> {
    return this.#ops.lookup(this.info.id, key)
  }

  /** Every identity key with its seqs, a page at a time. */
  async *identityKeys(): AsyncGenerator<[string, number[]]> {
    let after = ''
    for (;;) {
      const page = await this.#ops.identityKeys(this.info.id, after, PAGE)
      for (const entry of page) yield entry
      if (page.length < PAGE) break
      after = (page.at(-1) as [string, number[]])[0]
    }
  }

  /** A body's bytes, whole and verified. Use for bodies the caller can hold (see `bodyPieces` for big ones). */
  async bodyBytes(ref: BodyRef, use: BodyUse): Promise<Uint8Array> {
    const stored = await this.#ops.body(ref.digest, ref.size)
    // A body stored whole (most are) is checked and handed out without a generator: an export reads one per body.
    if (stored?.kind === 'bytes') return this.#checked(ref, use, stored.bytes)
    const parts: Uint8Array[] = []
    for await (const piece of this.#pieces(ref, use, stored)) parts.push(piece)
    if (parts.length === 1) return parts[0] as Uint8Array
    // A view of the joined pieces: `new Uint8Array(buffer)` would copy the whole body once more.
    const whole = Buffer.concat(parts)
    return new Uint8Array(whole.buffer, whole.byteOffset, whole.byteLength)
  }

  /**
   * A body as verified pieces of at most PIECE_SIZE: each piece is checked before it is yielded, and the
   * whole body against its digest once the last piece arrived (a mismatch there is thrown at the end).
   */
  async *bodyPieces(ref: BodyRef, use: BodyUse): AsyncGenerator<Uint8Array> {
    yield* this.#pieces(ref, use, await this.#ops.body(ref.digest, ref.size))
  }

  #checked(ref: BodyRef, use: BodyUse, bytes: Uint8Array): Uint8Array {
    if (bytes.byteLength !== ref.size || sha256(bytes) !== ref.digest) throw this.#damagedBody(ref, use, bytes)
    return bytes
  }

  /** bodyPieces of what the store answered for `ref`. */
  async *#pieces(ref: BodyRef, use: BodyUse, stored: StoredBody | undefined): AsyncGenerator<Uint8Array> {
    if (stored === undefined) throw this.#corrupt(`${use} references body ${ref.digest}, which the store does not hold`, ref)
    if (stored.kind === 'bytes') {
      yield this.#checked(ref, use, stored.bytes)
      return
    }
    const { manifest } = stored
    if (manifest.size !== ref.size) throw this.#corrupt(`${use}: body ${ref.digest} is stored as ${manifest.size} bytes, not ${ref.size}`, ref)
    // A body of one piece is that piece: its check is the body's (hashing the bytes twice cost big replays a tenth).
    const whole = manifest.pieces.length === 1 && manifest.pieces[0]?.sha256 === ref.digest ? undefined : createHash('sha256')
    let next = this.#ops.piece((manifest.pieces[0] as { sha256: string }).sha256)
    for (let i = 0; i < manifest.pieces.length; i++) {
      const p = manifest.pieces[i] as { sha256: string; size: number }
      const bytes = await next
      // Fetch the next piece while this one is used: one piece of read-ahead, bounded.
      if (i + 1 < manifest.pieces.length) next = this.#ops.piece((manifest.pieces[i + 1] as { sha256: string }).sha256)
      if (bytes === undefined || bytes.byteLength !== p.size || sha256(bytes) !== p.sha256) {
        throw this.#corrupt(`${use}: piece ${i + 1} of ${manifest.pieces.length} of body ${ref.digest} is ${bytes === undefined ? 'missing' : 'damaged'}`, ref)
      }
      whole?.update(bytes)
      yield bytes
    }
    if (whole && whole.digest('hex') !== ref.digest) throw this.#corrupt(`${use}: body ${ref.digest} does not hash to its digest`, ref)
  }

  /**
   * The whole trace in memory, every body verified. For commands that need it all (export, show, diff, fork)
   * and for replay of a trace small enough to hold. Bodies are asked for BODY_READ_AHEAD at a time (one
   * store read each, or one round trip to the store's owner), so their latencies overlap instead of adding
   * up; a damaged one fails the read with the first damage in trace order, as reading one by one would.
   * With `keep`, only the bodies it accepts are read (the rest stay in the store, to be read when used).
   */
  async readAll(keep?: (ref: BodyRef, use: BodyUse, x: Exchange) => boolean): Promise<Trace> {
    const exchanges: Exchange[] = []
    const bodies = new Map<string, Uint8Array>()
    let wanted: Array<[BodyRef, BodyUse]> = []
    const asked = new Set<string>()
    const fetchWanted = async () => {
      const got = await Promise.allSettled(wanted.map(([ref, use]) => this.bodyBytes(ref, use)))
      for (let i = 0; i < got.length; i++) {
        const r = got[i] as PromiseSettledResult<Uint8Array>
        if (r.status === 'rejected') throw r.reason
        bodies.set((wanted[i] as [BodyRef, BodyUse])[0].digest, r.value)
      }
      wanted = []
    }
    for await (const x of this.exchanges()) {
      exchanges.push(x)
      for (const [ref, use] of bodyRefs(x)) {
        if (asked.has(ref.digest) || (keep && !keep(ref, use, x))) continue
        asked.add(ref.digest)
        wanted.push([ref, use])
      }
      if (wanted.length >= BODY_READ_AHEAD) await fetchWanted()
    }
    await fetchWanted()
    return { meta: this.info.meta, exchanges, bodies }
  }

  #damagedBody(ref: BodyRef, use: BodyUse, bytes: Uint8Array): ToolReplayError {
    return this.#corrupt(
      `${use}: body ${ref.digest} is damaged (it has ${bytes.byteLength} bytes hashing to ${sha256(bytes).slice(0, 12)}..., not ${ref.size} bytes hashing to its digest)`,
      ref,
    )
  }

  #corrupt(why: string, ref?: BodyRef): ToolReplayError {
    return new ToolReplayError(
      ErrorCodes.STORE_CORRUPT,
      `Trace "${this.info.name}" in the store at ${this.#ops.location} is damaged: ${why}. Nothing damaged was served. Run \`tr-proxy fsck --store ${this.#ops.location}\` to see what is intact, then re-record or re-import the trace.`,
      { details: { location: this.#ops.location, trace: this.info.name, id: this.info.id, ...(ref ? { digest: ref.digest } : {}) } },
    )
  }
}

/** The bodies an exchange references, with where each is used (for messages). */
export function bodyRefs(x: Exchange): Array<[BodyRef, BodyUse]> {
  const out: Array<[BodyRef, BodyUse]> = []
  if (x.request.body) out.push([x.request.body, `exchange #${x.seq} request`])
  if (x.outcome.kind === 'response') out.push([x.outcome.response.body, `exchange #${x.seq} response`])
  else if (x.outcome.error.partial) out.push([x.outcome.error.partial.body, `exchange #${x.seq} partial response`])
  // A faulted exchange also keeps what the upstream really sent (the app got something else).
  const upstream = x.fault?.upstream
  if (upstream?.kind === 'response') out.push([upstream.response.body, `exchange #${x.seq} upstream response`])
  else if (upstream?.kind === 'error' && upstream.error.partial) out.push([upstream.error.partial.body, `exchange #${x.seq} upstream partial response`])
  // A WebSocket session's messages each keep their payload as a body.
  if (x.websocket) out.push(...websocketBodyRefs(x))
  return out
}
