/**
 * Where replay looks requests up: which recorded exchange answers the n-th request of an identity. Two
 * implementations behind one interface, chosen by trace size:
 * - MemoryReplayIndex: the trace in memory (bodies too), every identity known up front (read from the store's
 *   index with default identity options, else computed); synchronous, the fast path for the traces tests use.
 * - StoreReplayIndex: the store's identity index, asked per identity on first use; exchanges and bodies are
 *   read when a request needs them. Memory does not grow with the trace; a lookup costs a store round trip.
 * Occurrence is assigned when the request arrives, before any await, so concurrent identical requests get
 * recordings in the order the app issued them.
 */
import type { TraceReader } from '../store/index.ts'
import {
  bodyBytes,
  computeIdentity,
  describeIdentityDifferences,
  type Exchange,
  type HeaderPairs,
  type IdentityOptions,
  type IdentityParts,
  identityDistance,
  type RequestIdentity,
  type Trace,
} from '../trace/index.ts'
import type { CapturedRequest } from './decision.ts'

/** What the index gives for a request; a refusal names the request's identity key (retries of one request share it). */
export type Take =
  | { kind: 'match'; exchange: Exchange }
  | { kind: 'exhausted'; recorded: number; occurrence: number; identity: string }
  | { kind: 'miss'; parts: IdentityParts; identity: string }

/** One recorded request that was never asked for. */
export interface UnusedRecording {
  label: string
  occurrence: number
  seq: number
  exchange: Exchange
}

/** A near miss, for the explanation of a miss. */
export interface Candidate {
  request: string
  differences: string[]
}

export interface ReplayIndex {
  /** Takes the next recorded exchange for a (redacted) request; a promise only when the store must be asked. */
  take(request: CapturedRequest): Take | Promise<Take>
  /** Up to three recorded identities closest to `parts`. */
  candidates(parts: IdentityParts): Candidate[] | Promise<Candidate[]>
  /** Recordings never taken (so far), in seq order; a store-backed index lists at most `limit` (default 1000). */
  unused(limit?: number): UnusedRecording[] | Promise<UnusedRecording[]>
  /** How many recordings were never taken, without listing them. */
  readonly unusedCount: number
}

interface Queue {
  key: string
  /** The identity's parts, computed when first asked for (a miss's candidates) when the store gave the key. */
  parts: IdentityParts | undefined
  label: string
  exchanges: Exchange[]
  next: number
}

/** Bodies up to this size take part in exact keys; larger ones always go through computeIdentity. */
const EXACT_KEY_MAX_BODY = 16 * 1024

/** The whole trace in memory; identities computed once. */
export class MemoryReplayIndex implements ReplayIndex {
  readonly #identity: IdentityOptions
  readonly #queues = new Map<string, Queue>()
  /** Exact request key → queue, so a request byte-identical to a recorded one skips computeIdentity. */
  readonly #exact = new Map<string, Queue>()
  readonly #exactHeaders: Set<string>
  readonly #trace: Trace
  #remaining = 0

  /**
   * `keys`: each exchange's identity key by seq, as the store's index holds it (default identity options
   * only), so opening a trace does not compute again what recording computed; an exchange without one has
   * its identity computed here.
   */
  constructor(trace: Trace, identity: IdentityOptions, keys?: ReadonlyMap<number, string>) {
    this.#identity = identity
    this.#trace = trace
    this.#exactHeaders = new Set(['content-type', ...(identity.includeHeaders ?? [])].map((h) => h.toLowerCase()))
    for (const exchange of trace.exchanges) {
      const { method, url, headers } = exchange.request
      const body = exchange.request.body ? bodyBytes(trace, exchange.request.body) : null
      const stored = keys?.get(exchange.seq)
      const id = stored === undefined ? computeIdentity({ method, url, headers, body }, identity) : undefined
      const key = stored ?? (id as RequestIdentity).key
      let q = this.#queues.get(key)
      if (!q) {
        q = { key, parts: id?.parts, label: `${method} ${url}`, exchanges: [], next: 0 }
        this.#queues.set(key, q)
      }
      q.exchanges.push(exchange)
      this.#remaining++
      const exact = this.#exactKey(method, url, headers, body)
      if (exact !== undefined) this.#exact.set(exact, q)
    }
  }

  /**
   * A key that two requests share only when every input computeIdentity reads is identical, so they have
   * the same identity without computing it (hashing canonical JSON dominated replay's per-request cost).
   * Undefined, meaning "compute the identity", with a custom identity function or a large body.
   */
  #exactKey(method: string, url: string, headers: HeaderPairs, body: Uint8Array | null): string | undefined {
    if (this.#identity.custom || (body && body.byteLength > EXACT_KEY_MAX_BODY)) return undefined
    // NUL cannot occur in a method, URL or header value, so the fields cannot run into each other.
    let key = `${method.toUpperCase()}\0${url}`
    for (const [name, value] of headers) {
      const lower = name.toLowerCase()
      if (this.#exactHeaders.has(lower)) key += `\0${lower}:${value}`
    }
    key += '\0\0'
    if (body) key += Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('latin1')
    return key
  }

  get unusedCount(): number {
    return this.#remaining
  }

  take(request: CapturedRequest): Take {
    const exact = this.#exactKey(request.method, request.url, request.headers, request.body)
    const fast = exact === undefined ? undefined : this.#exact.get(exact)
    const id = fast ? undefined : computeIdentity(request, this.#identity)
    const q = fast ?? (id ? this.#queues.get(id.key) : undefined)
    if (!q) {
      const missed = id ?? computeIdentity(request, this.#identity)
      return { kind: 'miss', parts: missed.parts, identity: missed.key }
    }
    const occurrence = q.next++
    const exchange = q.exchanges[occurrence]
    if (!exchange) return { kind: 'exhausted', recorded: q.exchanges.length, occurrence, identity: q.key }
    this.#remaining--
    return { kind: 'match', exchange }
  }

  candidates(parts: IdentityParts): Candidate[] {
    return rank(
      parts,
      [...this.#queues.values()].map((q) => ({ label: q.label, parts: this.#partsOf(q) })),
    )
  }

  #partsOf(q: Queue): IdentityParts {
    if (q.parts) return q.parts
    const { method, url, headers, body } = (q.exchanges[0] as Exchange).request
    q.parts = computeIdentity({ method, url, headers, body: body ? bodyBytes(this.#trace, body) : null }, this.#identity).parts
    return q.parts
  }

  unused(): UnusedRecording[] {
    const out: UnusedRecording[] = []
    for (const q of this.#queues.values()) {
      for (let i = q.next; i < q.exchanges.length; i++) {
        const exchange = q.exchanges[i] as Exchange
        out.push({ label: q.label, occurrence: i, seq: exchange.seq, exchange })
      }
    }
    return out.sort((a, b) => a.seq - b.seq)
  }
}

/** How many unused recordings a store-backed index lists by name (the count is always exact). */
const UNUSED_LIST_LIMIT = 1000

/** How many identities a miss compares against in a store-backed index. */
const CANDIDATE_SCAN_LIMIT = 1000

/** The store's identity index (default identity options), asked per identity; nothing of the trace is loaded. */
export class StoreReplayIndex implements ReplayIndex {
  readonly #reader: TraceReader
  /** Identity → its recorded seqs, once asked; and how many requests of it came. */
  readonly #seqs = new Map<string, Promise<number[]>>()
  readonly #issued = new Map<string, number>()
  #taken = 0

  constructor(reader: TraceReader) {
    this.#reader = reader
  }

  get unusedCount(): number {
    return this.#reader.info.count - this.#taken
  }

  take(request: CapturedRequest): Promise<Take> {
    const id = computeIdentity(request)
    // Assigned now, before awaiting the store: the n-th request to arrive gets the n-th recording.
    const occurrence = this.#issued.get(id.key) ?? 0
    this.#issued.set(id.key, occurrence + 1)
    let seqs = this.#seqs.get(id.key)
    if (!seqs) {
      seqs = this.#reader.lookup(id.key)
      this.#seqs.set(id.key, seqs)
    }
    return seqs.then(async (list): Promise<Take> => {
      if (list.length === 0) return { kind: 'miss', parts: id.parts, identity: id.key }
      const seq = list[occurrence]
      if (seq === undefined) return { kind: 'exhausted', recorded: list.length, occurrence, identity: id.key }
      this.#taken++
      return { kind: 'match', exchange: await this.#reader.exchange(seq) }
    })
  }

  async candidates(parts: IdentityParts): Promise<Candidate[]> {
    const known: Array<{ label: string; parts: IdentityParts }> = []
    for await (const [, seqs] of this.#reader.identityKeys()) {
      const x = await this.#reader.exchange(seqs[0] as number)
      const body = x.request.body ? await this.#reader.bodyBytes(x.request.body, `exchange #${x.seq} request`) : null
      known.push({ label: `${x.request.method} ${x.request.url}`, parts: computeIdentity({ ...x.request, body }).parts })
      if (known.length >= CANDIDATE_SCAN_LIMIT) break
    }
    return rank(parts, known)
  }

  /** The first `limit` unused recordings (their total is `unusedCount`): a huge trace lists no more by default. */
  async unused(limit = UNUSED_LIST_LIMIT): Promise<UnusedRecording[]> {
    const out: UnusedRecording[] = []
    for await (const [key, seqs] of this.#reader.identityKeys()) {
      const used = Math.min(this.#issued.get(key) ?? 0, seqs.length)
      for (let i = used; i < seqs.length && out.length < limit; i++) {
        const x = await this.#reader.exchange(seqs[i] as number)
        out.push({ label: `${x.request.method} ${x.request.url}`, occurrence: i, seq: x.seq, exchange: x })
      }
      if (out.length >= limit) break
    }
    return out.sort((a, b) => a.seq - b.seq)
  }
}

function rank(parts: IdentityParts, known: Array<{ label: string; parts: IdentityParts }>): Candidate[] {
  return known
    .map((k) => ({ k, d: identityDistance(parts, k.parts) }))
    .sort((a, b) => a.d - b.d)
    .slice(0, 3)
    .map(({ k }) => ({ request: k.label, differences: describeIdentityDifferences(k.parts, parts) }))
}
