/**
 * An in-process store with the same contract as the LevelDB one; nothing persists. It implements the same
 * StoreOps, so readers, recordings and verification are the very code the LevelDB store runs.
 */
import { type AppRun, computeIdentity, ErrorCodes, type Exchange, IDENTITY_RULES, ToolReplayError, type Trace, type TraceMeta } from '../trace/index.ts'
import { traceExists } from './store-errors.ts'
import {
  type BeginOptions,
  type BodyManifest,
  type GcReport,
  INLINE_BODY_MAX,
  ownerAlive,
  type RecordingOwner,
  refsOf,
  type StoredBody,
  type StoreOps,
  splitIntoPieces,
  type TraceInfo,
  type TraceSummary,
} from './store-ops.ts'
import type { TraceStore } from './trace-store.ts'
import { createTraceStore } from './trace-store-impl.ts'

interface Entry {
  info: TraceInfo
  owner?: RecordingOwner
  /**
   * Exchanges as JSON text, by seq: the same form the LevelDB store keeps, so what one backend returns the
   * other does too, and a caller editing an exchange cannot change the store.
   */
  exchanges: Map<number, string>
  identity: Map<string, number[]>
  /**
   * Seqs whose identity is not in `identity` yet: it is computed on the first lookup, not as the exchange is
   * stored, so recording does not pay for an index only replay reads (LevelDB must write its index with the
   * exchange; this store holds nothing a crash could leave half-indexed).
   */
  unindexed: Set<number>
  /** The exchanges' seqs in order, made on first read after a change. */
  sortedSeqs?: number[] | undefined
  /** The identity keys in order, made on first read after a new key. */
  sortedKeys?: string[] | undefined
}

/** Index of the first element of sorted `xs` for which `atOrAfter` holds (it must hold for every later one). */
function firstIndex<T>(xs: readonly T[], atOrAfter: (x: T) => boolean): number {
  let lo = 0
  let hi = xs.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (atOrAfter(xs[mid] as T)) hi = mid
    else lo = mid + 1
  }
  return lo
}

/** Adds `x` to sorted `xs` unless present; appending in order (as recordings do) costs O(1). */
function insertSorted(xs: number[], x: number): void {
  const last = xs[xs.length - 1]
  if (last === undefined || x > last) {
    xs.push(x)
    return
  }
  const at = firstIndex(xs, (y) => y >= x)
  if (xs[at] !== x) xs.splice(at, 0, x)
}

/** A recording's entry, empty: `recorded` when a recording of this store writes it, not a put. */
function newEntry(id: string, meta: TraceMeta, createdAt: string, recorded: boolean): Entry {
  const info: TraceInfo = {
    id,
    name: meta.name,
    meta: structuredClone(meta),
    status: 'recording',
    createdAt,
    count: 0,
    bodyBytes: 0,
    indexed: true,
    identityRules: IDENTITY_RULES,
    recorded,
  }
  return { info, exchanges: new Map(), identity: new Map(), unindexed: new Set() }
}

/** An in-process store for tests and benchmarks. */
export function createMemoryStore(): TraceStore {
  const ops = new MemoryOps()
  return createTraceStore(
    ':memory:',
    (fn) => fn(ops),
    async () => {},
  )
}

class MemoryOps implements StoreOps {
  readonly location = ':memory:'
  readonly #bodies = new Map<string, Uint8Array>()
  readonly #manifests = new Map<string, BodyManifest>()
  readonly #pieces = new Map<string, Uint8Array>()
  readonly #entries = new Map<string, Entry>()
  readonly #names = new Map<string, string>()

  async listTraces(): Promise<TraceSummary[]> {
    const out: TraceSummary[] = []
    for (const e of this.#entries.values()) {
      const status = e.info.status === 'complete' ? 'complete' : ownerAlive(e.owner) ? 'recording' : 'partial'
      out.push({ name: e.info.name, id: e.info.id, status, exchanges: e.exchanges.size, createdAt: e.info.createdAt })
    }
    return out.sort((a, b) => a.name.localeCompare(b.name) || a.createdAt.localeCompare(b.createdAt))
  }

  async completeId(name: string): Promise<string | undefined> {
    return this.#names.get(name)
  }

  async recordingIds(name: string): Promise<string[]> {
    return [...this.#entries.values()]
      .filter((e) => e.info.name === name)
      .sort((a, b) => b.info.createdAt.localeCompare(a.info.createdAt) || b.info.id.localeCompare(a.info.id))
      .map((e) => e.info.id)
  }

  async traceInfo(id: string): Promise<TraceInfo | undefined> {
    const e = this.#entries.get(id)
    return e ? { ...structuredClone(e.info), count: e.exchanges.size } : undefined
  }

  async exchanges(id: string, fromSeq: number, limit: number): Promise<Exchange[]> {
    const e = this.#entries.get(id)
    if (!e) return []
    // Sorted once per change, not per page: a replay pages through every exchange.
    e.sortedSeqs ??= [...e.exchanges.keys()].sort((a, b) => a - b)
    const from = firstIndex(e.sortedSeqs, (seq) => seq >= fromSeq)
    return e.sortedSeqs.slice(from, from + limit).map((seq) => JSON.parse(e.exchanges.get(seq) as string) as Exchange)
  }

  async lookup(id: string, key: string): Promise<number[]> {
    const e = this.#entries.get(id)
    return e ? [...(this.#indexed(e).get(key) ?? [])] : []
  }

  async identityKeys(id: string, afterKey: string, limit: number): Promise<Array<[string, number[]]>> {
    const e = this.#entries.get(id)
    if (!e) return []
    const identity = this.#indexed(e)
    e.sortedKeys ??= [...identity.keys()].sort()
    const keys = e.sortedKeys
    const from = firstIndex(keys, (k) => k > afterKey)
    return keys.slice(from, from + limit).map((k) => [k, [...(identity.get(k) as number[])]])
  }

  async body(digest: string): Promise<StoredBody | undefined> {
    const bytes = this.#bodies.get(digest)
    if (bytes) return { kind: 'bytes', bytes: new Uint8Array(bytes) }
    const manifest = this.#manifests.get(digest)
    return manifest ? { kind: 'pieces', manifest: structuredClone(manifest) } : undefined
  }

  async piece(sha: string): Promise<Uint8Array | undefined> {
    const p = this.#pieces.get(sha)
    return p ? new Uint8Array(p) : undefined
  }

  /** Bodies no exchange references go; pieces too, unless a recording is open (it may be streaming them). */
  async gc(options: { dryRun: boolean }): Promise<GcReport> {
    const referenced = new Set<string>()
    for (const e of this.#entries.values()) for (const json of e.exchanges.values()) for (const d of refsOf(JSON.parse(json) as Exchange)) referenced.add(d)
    const report: GcReport = { dryRun: options.dryRun, bodies: 0, pieces: 0, bytes: 0, keptRecent: 0 }
    for (const [digest, bytes] of this.#bodies) {
      if (referenced.has(digest)) continue
      report.bodies++
      report.bytes += bytes.byteLength
      if (!options.dryRun) this.#bodies.delete(digest)
    }
    const kept = new Set<string>()
    for (const [digest, manifest] of this.#manifests) {
      if (referenced.has(digest)) for (const p of manifest.pieces) kept.add(p.sha256)
      else {
        report.bodies++
        if (!options.dryRun) this.#manifests.delete(digest)
      }
    }
    const recording = [...this.#entries.values()].some((e) => e.info.status === 'recording')
    for (const [sha, bytes] of this.#pieces) {
      if (kept.has(sha)) continue
      if (recording) {
        report.keptRecent++
        continue
      }
      report.pieces++
      report.bytes += bytes.byteLength
      if (!options.dryRun) this.#pieces.delete(sha)
    }
    return report
  }

  async putPiece(sha: string, bytes: Uint8Array): Promise<void> {
    if (!this.#pieces.has(sha)) this.#pieces.set(sha, new Uint8Array(bytes))
  }

  async beginTrace(id: string, meta: TraceMeta, createdAt: string, owner: RecordingOwner, options?: BeginOptions): Promise<void> {
    if (this.#entries.has(id)) return
    this.#entries.set(id, { ...newEntry(id, meta, createdAt, options?.recorded !== false), owner })
  }

  async append(id: string, x: Exchange, bodies: ReadonlyMap<string, Uint8Array>, manifests: ReadonlyMap<string, BodyManifest>): Promise<void> {
    const e = this.#entries.get(id)
    if (!e || e.info.status === 'complete') {
      throw new ToolReplayError(ErrorCodes.STORE_CLOSED, `Cannot append to recording ${id} in the memory store: it is ${e ? 'already closed' : 'unknown'}.`)
    }
    this.#store(e, x, bodies, manifests)
  }

  async closeRecording(id: string, options?: { overwrite?: boolean; app?: AppRun }): Promise<void> {
    const e = this.#entries.get(id)
    if (!e || e.info.status === 'complete') return
    const current = this.#names.get(e.info.name)
    if (options?.overwrite === false && current !== undefined && current !== id) throw traceExists(e.info.name, this.location)
    if (options?.app) e.info.meta = { ...e.info.meta, app: structuredClone(options.app) }
    this.#replace(e)
  }

  async appendChunk(id: string, exchanges: Exchange[], bodies: ReadonlyMap<string, Uint8Array>): Promise<void> {
    for (const x of exchanges) await this.append(id, x, bodies, new Map())
  }

  async putTrace(trace: Trace, id: string, createdAt: string, overwrite: boolean): Promise<void> {
    const name = trace.meta.name
    const current = this.#names.get(name)
    if (current === id) return
    if (current !== undefined && !overwrite) {
      throw new ToolReplayError(
        ErrorCodes.TRACE_EXISTS,
        `Trace "${name}" already exists in the memory store. Pick another name, or replace it (\`overwrite: true\`).`,
      )
    }
    const seqs = new Set<number>()
    for (const x of trace.exchanges) {
      if (seqs.has(x.seq)) throw new ToolReplayError(ErrorCodes.TRACE_INVALID, `Trace "${name}" has two exchanges with seq ${x.seq}. Renumber them.`)
      seqs.add(x.seq)
      for (const digest of refsOf(x)) this.#assertBody(x, name, digest, trace.bodies, new Map())
    }
    const entry = newEntry(id, trace.meta, createdAt, false)
    for (const x of trace.exchanges) this.#store(entry, x, trace.bodies, new Map())
    this.#entries.set(id, entry)
    this.#replace(entry)
  }

  async deleteTrace(name: string): Promise<boolean> {
    const id = this.#names.get(name)
    if (id === undefined) return false
    this.#names.delete(name)
    this.#entries.delete(id)
    return true
  }

  async deleteRecording(id: string): Promise<boolean> {
    const e = this.#entries.get(id)
    if (!e || this.#names.get(e.info.name) === id) return false
    return this.#entries.delete(id)
  }

  #store(e: Entry, x: Exchange, bodies: ReadonlyMap<string, Uint8Array>, manifests: ReadonlyMap<string, BodyManifest>): void {
    for (const digest of refsOf(x)) this.#assertBody(x, e.info.name, digest, bodies, manifests)
    for (const digest of refsOf(x)) {
      if (this.#bodies.has(digest) || this.#manifests.has(digest)) continue
      const bytes = bodies.get(digest)
      if (bytes) this.#putBody(digest, bytes)
      else this.#manifests.set(digest, structuredClone(manifests.get(digest) as BodyManifest))
    }
    // Keyed by seq like the LevelDB store, so a resent append replaces rather than duplicates.
    if (!e.exchanges.has(x.seq)) e.sortedSeqs = undefined
    e.exchanges.set(x.seq, JSON.stringify(x))
    e.unindexed.add(x.seq)
    e.info.bodyBytes += (x.request.body?.size ?? 0) + ((x.outcome.kind === 'response' ? x.outcome.response.body : x.outcome.error.partial?.body)?.size ?? 0)
  }

  /** The entry's identity index, with the exchanges stored since the last lookup added. */
  #indexed(e: Entry): Map<string, number[]> {
    for (const seq of e.unindexed) {
      const x = JSON.parse(e.exchanges.get(seq) as string) as Exchange
      const reqBody = x.request.body ? this.#whole(x.request.body.digest) : null
      const key = computeIdentity({ method: x.request.method, url: x.request.url, headers: x.request.headers, body: reqBody }).key
      const seqs = e.identity.get(key) ?? []
      if (seqs.length === 0) e.sortedKeys = undefined
      insertSorted(seqs, seq)
      e.identity.set(key, seqs)
    }
    e.unindexed.clear()
    return e.identity
  }

  #assertBody(x: Exchange, name: string, digest: string, bodies: ReadonlyMap<string, Uint8Array>, manifests: ReadonlyMap<string, BodyManifest>): void {
    if (bodies.has(digest) || this.#bodies.has(digest) || this.#manifests.has(digest)) return
    const manifest = manifests.get(digest)
    if (manifest?.pieces.every((p) => this.#pieces.has(p.sha256))) return
    throw new ToolReplayError(
      ErrorCodes.BODY_MISSING,
      `Cannot store the exchange for ${x.request.url} in trace "${name}": it references body ${digest}, which was neither passed nor already stored. Pass every body the exchange references.`,
      { details: { trace: name, digest } },
    )
  }

  /** Stores bytes as the LevelDB store does: whole when small, else as pieces. */
  #putBody(digest: string, bytes: Uint8Array): void {
    if (bytes.byteLength <= INLINE_BODY_MAX) {
      this.#bodies.set(digest, new Uint8Array(bytes))
      return
    }
    const { manifest, pieces } = splitIntoPieces(bytes)
    for (const [sha, piece] of pieces) this.#pieces.set(sha, new Uint8Array(piece))
    this.#manifests.set(digest, manifest)
  }

  #whole(digest: string): Uint8Array | null {
    const bytes = this.#bodies.get(digest)
    if (bytes) return bytes
    const manifest = this.#manifests.get(digest)
    return manifest ? new Uint8Array(Buffer.concat(manifest.pieces.map((p) => this.#pieces.get(p.sha256) ?? new Uint8Array(0)))) : null
  }

  /** Completes an entry and makes it the trace of its name, dropping the one it replaces. */
  #replace(e: Entry): void {
    const old = this.#names.get(e.info.name)
    if (old !== undefined && old !== e.info.id) this.#entries.delete(old)
    e.info.status = 'complete'
    e.info.count = e.exchanges.size
    delete e.owner
    this.#names.set(e.info.name, e.info.id)
  }
}
