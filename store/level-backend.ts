/**
 * The store operations (StoreOps) on an open LevelDB, for the one process that owns the directory. Other
 * processes reach these same operations over store/store-rpc.ts, so every write in a store goes through
 * one LevelBackend and one write queue: that is what makes `closeRecording` (read the old trace's keys, then
 * delete them in the rename batch) safe without LevelDB transactions.
 *
 * Key layout (utf8 keys, byte values):
 *   b!<sha256>                   a body up to INLINE_BODY_MAX, content-addressed; written only when absent
 *   B!<sha256>                   JSON BodyManifest of a bigger body, whose pieces are files:
 *   pieces/<2 hex>/<sha256>      (a file beside the database) one piece (<= PIECE_SIZE), content-addressed,
 *                                written to a temp name and renamed, so a reader never sees half a piece
 *   m!<id>                       JSON StoredMeta: name, TraceMeta, createdAt, status, count, owner
 *   x!<id>!<seq 10d>             JSON Exchange; zero-padded so key order is seq order
 *   k!<id>!<identity>!<seq 10d>  empty: the request-identity index replay looks requests up in
 *   n!<name>                     id of the complete trace listed under that name
 * Every state change is one db.batch, so a killed process leaves either the old or the new state; the
 * batches that complete, replace or delete a trace are synced to disk.
 */

import { stat } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import type { Level } from 'level'
import { type AppRun, computeIdentity, ErrorCodes, type Exchange, IDENTITY_RULES, ToolReplayError, type Trace, type TraceMeta } from '../trace/index.ts'
import { verifiedExchanges } from './file-verified.ts'
import { collectGarbage } from './gc.ts'
import { piecePath, syncPieces, writePiece } from './pieces.ts'
import { traceExists } from './store-errors.ts'
import { assertNoLinks, filesCorrupt, inspectStore, recordClosed, recordSynced } from './store-files.ts'
import {
  type BeginOptions,
  type BodyManifest,
  type GcReport,
  INLINE_BODY_MAX,
  type RecordingOwner,
  refsOf,
  type StoredBody,
  type StoreOps,
  splitIntoPieces,
  type TraceInfo,
  type TraceSummary,
} from './store-ops.ts'
import { type KvRange, type KvRead, prefixRange, type StoredMeta, StoreReads, storeKeys } from './store-reads.ts'
import { bodyRefs } from './trace-reader.ts'

const STORED_BODIES_LIMIT = 100_000
/**
 * LevelDB's table cache: the fewest files it allows (64 tables and 10 others). Each open table is mapped into
 * memory, and a million-exchange import (about 190 tables) kept 35 MB of them resident at its peak with
 * LevelDB's default of 1000 open files, 18 MB with this; reopening a table is a few reads.
 */
const MAX_OPEN_FILES = 74
/** Bodies up to this size, bytes in hand, are written rather than looked for first (#present): about a block of a table. */
const REWRITE_MAX = 4096

interface QueuedAppend {
  id: string
  exchange: Exchange
  bodies: ReadonlyMap<string, Uint8Array>
  manifests: ReadonlyMap<string, BodyManifest>
  resolve: () => void
  reject: (err: unknown) => void
}

type BatchOp = { type: 'put'; key: string; value: Uint8Array } | { type: 'del'; key: string }

export { storeKeys }

const range = prefixRange

const encoder = new TextEncoder()
const EMPTY = new Uint8Array(0)
const SYNC = { sync: true }

/** The single-process implementation; `openStore` wraps it with ownership and RPC. */
export class LevelBackend implements StoreOps {
  readonly location: string
  readonly #db: Level<string, Uint8Array>
  #writes: Promise<unknown> = Promise.resolve()
  /**
   * Metadata of recordings known to be open. Safe to cache: this backend is the only writer of the
   * directory (it holds the LevelDB lock), and only closeRecording turns a recording complete.
   */
  readonly #openRecordings = new Map<string, StoredMeta>()
  /**
   * Body keys known to be stored (seen or written by this backend). No other process writes here and gc
   * removes what it deletes, so an entry never goes stale; it saves the hasMany round trip for bodies a
   * recording repeats. Bounded: cleared when full.
   */
  readonly #storedBodies = new Set<string>()
  /** Appends waiting for the write queue, committed together as one batch (see append). */
  #queuedAppends: QueuedAppend[] | undefined
  readonly #piecesDir: string
  /** Piece subdirectories known to exist. */
  readonly #pieceDirs = new Set<string>()
  /** While gc runs: the bodies exchanges written meanwhile reference (gc keeps them). */
  #gcReferenced: Set<string> | undefined
  /** The gc running, if any (one at a time). */
  #gc: Promise<GcReport> | undefined
  /** Set while gc sweeps piece files: new piece writes wait for it. */
  #piecesHeld: Promise<void> | undefined
  readonly #piecePuts = new Set<Promise<void>>()

  /** The reads, over LevelDB. */
  readonly #reads: StoreReads

  private constructor(location: string, db: Level<string, Uint8Array>, piecesDir: string) {
    this.location = location
    this.#db = db
    this.#piecesDir = piecesDir
    this.#reads = new StoreReads(location, levelKv(db), piecesDir)
  }

  /**
   * Opens the LevelDB at `dir`. Rejects with the raw level error when another process holds the lock
   * (`isLockedError`), so the caller can become a client instead. A store whose files do not account for
   * everything (store-files.ts: damaged or cut-short logs, orphan tables that hold data, a damaged MANIFEST,
   * no CURRENT) is TR_STORE_CORRUPT and is never opened: LevelDB's recovery would drop or overwrite what it
   * cannot account for. `create: false` never creates one.
   */
  static async open(dir: string, options: { create?: boolean } = {}): Promise<LevelBackend> {
    const files = await inspectStore(dir)
    assertNoLinks(files)
    if (files.problems.length > 0) throw filesCorrupt(dir, files.problems)
    if (files.empty && options.create === false) throw storeNotFound(dir)
    const db = new (levelClass())<string, Uint8Array>(dir, { keyEncoding: 'utf8', valueEncoding: 'view' })
    try {
      await db.open({ createIfMissing: options.create !== false, maxOpenFiles: MAX_OPEN_FILES })
    } catch (err) {
      if (isLockedError(err)) throw err
      const cause = ((err as { cause?: Error }).cause ?? err) as Error
      if (/corrupt|manifest|CURRENT/i.test(cause.message)) throw filesCorrupt(dir, [{ files: [], why: `LevelDB refused it (${cause.message})` }])
      throw new ToolReplayError(
        ErrorCodes.STORE_IO,
        `Failed to open the trace store at ${dir}: ${cause.message}. Check that the path is a Tool Replay store directory (or does not exist yet) and is writable, or pass another --store.`,
        { cause: err, details: { location: dir } },
      )
    }
    return new LevelBackend(dir, db, join(dir, 'pieces'))
  }

  async close(): Promise<void> {
    // Must wait for queued writes: closing under a pending batch would fail it half-way through the queue.
    await this.#writes.catch(() => {})
    await this.#db.close()
    await recordClosed(this.location)
  }

  // --- reads (store-reads.ts, over LevelDB) ---

  listTraces(): Promise<TraceSummary[]> {
    return this.#io(() => this.#reads.listTraces())
  }

  completeId(name: string): Promise<string | undefined> {
    return this.#io(() => this.#reads.completeId(name))
  }

  recordingIds(name: string): Promise<string[]> {
    return this.#io(() => this.#reads.recordingIds(name))
  }

  traceInfo(id: string): Promise<TraceInfo | undefined> {
    return this.#io(() => this.#reads.traceInfo(id))
  }

  exchanges(id: string, fromSeq: number, limit: number): Promise<Exchange[]> {
    return this.#io(() => this.#reads.exchanges(id, fromSeq, limit))
  }

  lookup(id: string, key: string): Promise<number[]> {
    return this.#io(() => this.#reads.lookup(id, key))
  }

  identityKeys(id: string, afterKey: string, limit: number): Promise<Array<[string, number[]]>> {
    return this.#io(() => this.#reads.identityKeys(id, afterKey, limit))
  }

  body(digest: string, size?: number): Promise<StoredBody | undefined> {
    return this.#io(() => this.#reads.body(digest, size))
  }

  piece(sha: string): Promise<Uint8Array | undefined> {
    return this.#reads.piece(sha)
  }

  // --- writes ---

  /** Content-addressed: not ordered with other writes, and a piece already there (same size) is not rewritten. */
  async putPiece(sha: string, bytes: Uint8Array): Promise<void> {
    while (this.#piecesHeld) await this.#piecesHeld
    const put = writePiece(this.location, this.#piecesDir, sha, bytes, this.#pieceDirs)
    this.#piecePuts.add(put)
    try {
      await put
    } finally {
      this.#piecePuts.delete(put)
    }
  }

  /**
   * Removes the bodies and piece files no trace references (gc.ts says what is kept and why), then compacts
   * the store so LevelDB returns the space. One gc at a time; a second call waits for the first.
   */
  async gc(options: { dryRun: boolean }): Promise<GcReport> {
    while (this.#gc) await this.#gc.catch(() => {})
    const run = this.#collect(options.dryRun)
    this.#gc = run
    try {
      return await run
    } finally {
      this.#gc = undefined
    }
  }

  async #collect(dryRun: boolean): Promise<GcReport> {
    const referenced = new Set<string>()
    this.#gcReferenced = referenced
    try {
      const report = await collectGarbage({
        kv: levelKv(this.#db),
        piecesDir: this.#piecesDir,
        dryRun,
        referencedSince: referenced,
        exclusive: (fn) => this.#write(fn),
        deleteKeys: async (keys) => {
          await this.#syncedBatch(keys.map((key) => ({ type: 'del', key })))
          // Forgotten as stored, so an append of the same body writes it again.
          this.#storedBodies.clear()
        },
        holdPieces: async () => {
          let release = () => {}
          this.#piecesHeld = new Promise<void>((resolve) => {
            release = () => {
              this.#piecesHeld = undefined
              resolve()
            }
          })
          await Promise.allSettled([...this.#piecePuts])
          return release
        },
      })
      // `level` is classic-level in Node, which has compactRange; its own types leave it out.
      const db = this.#db as unknown as { compactRange(start: string, end: string): Promise<void> }
      if (!dryRun) await this.#io(() => db.compactRange('\u0000', '\uffff'))
      return report
    } finally {
      this.#gcReferenced = undefined
    }
  }

  #piecePath(sha: string): string {
    return piecePath(this.#piecesDir, sha)
  }

  /** Starts a recording under a caller-chosen id, so a retried call after a lost connection is harmless. */
  beginTrace(id: string, meta: TraceMeta, createdAt: string, owner: RecordingOwner, options?: BeginOptions): Promise<void> {
    return this.#write(async () => {
      if ((await this.#reads.getMeta(id)) !== undefined) return
      const stored: StoredMeta = {
        id,
        name: meta.name,
        meta,
        createdAt,
        status: 'recording',
        count: 0,
        bodyBytes: 0,
        indexed: true,
        identityRules: IDENTITY_RULES,
        recorded: options?.recorded !== false,
        owner,
        ordered: { exchanges: 0, count: 0 },
      }
      if (options?.durability === 'fsync') stored.durability = 'fsync'
      await this.#db.put(storeKeys.meta(id), json(stored))
      this.#openRecordings.set(id, stored)
    })
  }

  /** Idempotent: the exchange key is its seq and bodies are content-addressed, so a retry rewrites the same bytes. */
  append(id: string, exchange: Exchange, bodies: ReadonlyMap<string, Uint8Array>, manifests: ReadonlyMap<string, BodyManifest>): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const item: QueuedAppend = { id, exchange, bodies, manifests, resolve, reject }
      // Group commit: appends that arrive while earlier writes are still running join one batch, so a
      // recording app pays one hasMany and one batch per group rather than per exchange. Each exchange
      // is still stored whole or not at all, and nothing written after this group is enqueued (a
      // closeRecording, say) can be overtaken: #write starts a new group for appends that follow it.
      // No lingering for more: a client's answer waits for its exchange to be stored (capture/live-tee.ts),
      // so an append is written as soon as the writes before it are.
      if (this.#queuedAppends) {
        this.#queuedAppends.push(item)
        return
      }
      const group = [item]
      void this.#write(async () => {
        if (this.#queuedAppends === group) this.#queuedAppends = undefined
        return this.#appendGroup(group)
      }).catch(() => {})
      this.#queuedAppends = group
    })
  }

  /** Writes a group of appends in one batch; each append settles on its own (a bad one fails alone). */
  async #appendGroup(group: QueuedAppend[]): Promise<void> {
    const written: QueuedAppend[] = []
    const ops: BatchOp[] = []
    try {
      const present = await this.#present(group.map((a) => [a.exchange, a.bodies]))
      const touched = new Map<string, StoredMeta>()
      // Piece files the group's bodies are made of; synced before the batch when an append asks for fsync.
      const pieces = new Set<string>()
      let sync = false
      for (const a of group) {
        try {
          const stored = touched.get(a.id) ?? { ...(await this.#recordingMeta(a.id)) }
          assertSeq(a.exchange, stored.name)
          const own = await this.#exchangeOps(a.id, stored.name, a.exchange, a.bodies, a.manifests, present, pieces)
          if (stored.durability === 'fsync') {
            sync = true
            for (const sha of await this.#storedPieces(a.exchange, own)) pieces.add(sha)
          }
          ops.push(...own)
          countIn(stored, a.exchange)
          touched.set(a.id, stored)
          written.push(a)
        } catch (err) {
          a.reject(err)
        }
      }
      // The running count keeps `ls` from iterating exchanges, even of a recording still in progress.
      for (const m of touched.values()) ops.push({ type: 'put', key: storeKeys.meta(m.id), value: json(m) })
      if (sync) {
        // Durability fsync: the pieces first (a synced exchange must not reference pieces a power cut can
        // take), then one synced batch for the whole group (store/durability.ts).
        await this.#io(() => syncPieces(this.location, this.#piecesDir, pieces))
        if (ops.length > 0) await this.#io(() => this.#syncedBatch(ops))
      } else if (ops.length > 0) await this.#io(() => this.#db.batch(ops))
      for (const m of touched.values()) this.#openRecordings.set(m.id, m)
      if (this.#storedBodies.size > STORED_BODIES_LIMIT) this.#storedBodies.clear()
      for (const key of present) this.#storedBodies.add(key)
    } catch (err) {
      // The shared read or the batch failed: nothing of the group was written (settled appends stay as they are).
      for (const a of written) a.reject(err)
      return
    }
    for (const a of written) a.resolve()
  }

  /**
   * Which body keys of these exchanges are stored (or known to be); the result also collects keys this batch
   * adds. A body of at most REWRITE_MAX bytes whose bytes are in hand is not looked for: it is written (again, if
   * it was there: the same bytes under the same key). Such lookups read the store's tables at random, a block
   * each, and LevelDB keeps the tables it reads mapped: a million-exchange import peaked at 498 MB RSS (173 MB of
   * mapped table files near its end) and at 356 MB without them (67 MB mapped, the node binary's 42 included), faster too.
   */
  async #present(exchanges: Array<[Exchange, ReadonlyMap<string, Uint8Array>]>): Promise<Set<string>> {
    const present = new Set<string>()
    const keys = new Set<string>()
    for (const [x, bodies] of exchanges) {
      for (const digest of refsOf(x)) {
        const key = storeKeys.body(digest)
        if (this.#storedBodies.has(key)) present.add(key)
        else if ((bodies.get(digest)?.byteLength ?? Number.POSITIVE_INFINITY) > REWRITE_MAX) keys.add(key)
      }
    }
    const unknown = [...keys]
    if (unknown.length === 0) return present
    const manifestKeys = unknown.map((k) => `B${k.slice(1)}`)
    const flags = await this.#io(() => this.#db.hasMany([...unknown, ...manifestKeys]))
    unknown.forEach((key, i) => {
      if (flags[i] || flags[i + unknown.length]) present.add(key)
    })
    return present
  }

  /**
   * The ops that store one exchange: its bodies not yet stored (small ones whole, big ones as the manifest of
   * pieces already put), the exchange, and its identity-index entry. Marks added bodies in `present`.
   */
  async #exchangeOps(
    id: string,
    name: string,
    x: Exchange,
    bodies: ReadonlyMap<string, Uint8Array>,
    manifests: ReadonlyMap<string, BodyManifest>,
    present: Set<string>,
    pieces?: Set<string>,
  ): Promise<BatchOp[]> {
    const ops: BatchOp[] = []
    // Marked present only once every body of the exchange is in hand: a refused append must not leave its
    // first bodies marked as stored (and cached so), or the next append of the same body would skip it.
    const added: string[] = []
    for (const digest of refsOf(x)) {
      this.#gcReferenced?.add(digest)
      const key = storeKeys.body(digest)
      if (present.has(key) || added.includes(key)) continue
      const bytes = bodies.get(digest)
      const manifest = manifests.get(digest)
      if (bytes !== undefined) ops.push(...(await this.#bodyOps(digest, bytes, pieces)))
      else if (manifest !== undefined) {
        for (const p of manifest.pieces) {
          if ((await stat(this.#piecePath(p.sha256)).catch(() => undefined))?.size !== p.size) throw bodyMissing(x, name, `piece ${p.sha256} of body ${digest}`)
          pieces?.add(p.sha256)
        }
        ops.push({ type: 'put', key: storeKeys.manifest(digest), value: json(manifest) })
      } else throw bodyMissing(x, name, `body ${digest}`)
      added.push(key)
    }
    for (const key of added) present.add(key)
    const text = verifiedExchanges.get(x)
    ops.push({ type: 'put', key: storeKeys.exchange(id, x.seq), value: text === undefined ? json(x) : encoder.encode(text) })
    const requestBody = x.request.body ? (bodies.get(x.request.body.digest) ?? (await this.#wholeBody(x.request.body.digest))) : null
    const identity = computeIdentity({ method: x.request.method, url: x.request.url, headers: x.request.headers, body: requestBody }).key
    ops.push({ type: 'put', key: storeKeys.identity(id, identity, x.seq), value: EMPTY })
    return ops
  }

  /** A body as ops: whole when small, else its pieces (written as files now) and its manifest. */
  async #bodyOps(digest: string, bytes: Uint8Array, written?: Set<string>): Promise<BatchOp[]> {
    if (bytes.byteLength <= INLINE_BODY_MAX) return [{ type: 'put', key: storeKeys.body(digest), value: bytes }]
    const { manifest, pieces } = splitIntoPieces(bytes)
    for (const [sha, piece] of pieces) {
      await this.putPiece(sha, piece)
      written?.add(sha)
    }
    return [{ type: 'put', key: storeKeys.manifest(digest), value: json(manifest) }]
  }

  /**
   * The pieces of the bodies an exchange references that were already stored (by this recording or another,
   * perhaps without fsync), for a synced append: they must be on the disk too before it is confirmed.
   */
  async #storedPieces(x: Exchange, own: BatchOp[]): Promise<string[]> {
    const out: string[] = []
    const writing = new Set(own.map((op) => op.key))
    for (const [{ digest, size }] of bodyRefs(x)) {
      if (size <= INLINE_BODY_MAX || writing.has(storeKeys.manifest(digest))) continue
      // Not stored yet means an earlier append of this group writes it: its pieces are in the group's already.
      const stored = await this.#reads.body(digest)
      if (stored?.kind === 'pieces') for (const p of stored.manifest.pieces) out.push(p.sha256)
    }
    return out
  }

  /** A stored body's bytes, whole (request bodies, for their identity; bounded by the request body limit). */
  async #wholeBody(digest: string): Promise<Uint8Array | null> {
    const stored = await this.body(digest)
    if (stored === undefined) return null
    if (stored.kind === 'bytes') return stored.bytes
    const parts: Uint8Array[] = []
    for (const p of stored.manifest.pieces) parts.push((await this.piece(p.sha256)) ?? new Uint8Array(0))
    return Buffer.concat(parts)
  }

  /** The metadata of an open recording; throws TR_STORE_CLOSED when it is complete or unknown. */
  async #recordingMeta(id: string): Promise<StoredMeta> {
    const cached = this.#openRecordings.get(id)
    if (cached) return cached
    const stored = await this.#reads.getMeta(id)
    if (stored === undefined || stored.status === 'complete') {
      throw new ToolReplayError(
        ErrorCodes.STORE_CLOSED,
        `Cannot append to recording ${id} in the store at ${this.location}: it is ${stored ? 'already closed' : 'unknown'}. Start a new recording with beginTrace().`,
      )
    }
    this.#openRecordings.set(id, stored)
    return stored
  }

  /** Makes the recording the trace listed under its name and drops the trace it replaces, in one synced batch. */
  closeRecording(id: string, options?: { overwrite?: boolean; app?: AppRun }): Promise<void> {
    return this.#write(async () => {
      const stored = await this.#reads.getMeta(id)
      if (stored === undefined) throw this.#reads.corrupt(storeKeys.meta(id), 'a recording being closed has no metadata')
      if (stored.status === 'complete') return
      const current = await this.completeId(stored.name)
      if (options?.overwrite === false && current !== undefined && current !== id) throw traceExists(stored.name, this.location)
      this.#openRecordings.delete(id)
      const ops = await this.#replaceOps(stored.name, id)
      const { owner: _owner, durability: _durability, ordered, ...rest } = stored
      ops.push({
        type: 'put',
        key: storeKeys.meta(id),
        value: json({
          ...rest,
          meta: options?.app ? { ...rest.meta, app: options.app } : rest.meta,
          status: 'complete',
          // Staged in seq order (an import), the count is known; otherwise a retried or late append may have
          // rewritten a seq, and only the exchanges themselves tell.
          count: ordered !== undefined && ordered.count === stored.count ? ordered.exchanges : await this.#reads.countExchanges(id),
        }),
      })
      await this.#syncedBatch(ops)
    })
  }

  /** Part of a big trace being stored (trace-store-impl.ts putInChunks): one batch, not synced (close is). */
  appendChunk(id: string, exchanges: Exchange[], bodies: ReadonlyMap<string, Uint8Array>): Promise<void> {
    return this.#write(async () => {
      const stored = { ...(await this.#recordingMeta(id)) }
      const present = await this.#present(exchanges.map((x) => [x, bodies]))
      const ops: BatchOp[] = []
      for (const x of exchanges) {
        assertSeq(x, stored.name)
        ops.push(...(await this.#exchangeOps(id, stored.name, x, bodies, new Map(), present)))
        countIn(stored, x)
      }
      ops.push({ type: 'put', key: storeKeys.meta(id), value: json(stored) })
      await this.#db.batch(ops)
      this.#openRecordings.set(id, stored)
    })
  }

  putTrace(trace: Trace, id: string, createdAt: string, overwrite: boolean): Promise<void> {
    return this.#write(async () => {
      const name = trace.meta.name
      const current = await this.completeId(name)
      // A retry of a put that already landed: the name points at our own id.
      if (current === id) return
      if (current !== undefined && !overwrite) throw traceExists(name, this.location)
      const ops: BatchOp[] = []
      const present = await this.#present(trace.exchanges.map((x) => [x, trace.bodies]))
      const seen = new Set<number>()
      let bodyBytes = 0
      for (const x of trace.exchanges) {
        assertSeq(x, name)
        if (seen.has(x.seq)) throw new ToolReplayError(ErrorCodes.TRACE_INVALID, `Trace "${name}" has two exchanges with seq ${x.seq}. Renumber them.`)
        seen.add(x.seq)
        ops.push(...(await this.#exchangeOps(id, name, x, trace.bodies, new Map(), present)))
        bodyBytes += bodyBytesOf(x)
      }
      ops.push(...(await this.#replaceOps(name, id)))
      const stored: StoredMeta = {
        id,
        name,
        meta: trace.meta,
        createdAt,
        status: 'complete',
        count: trace.exchanges.length,
        bodyBytes,
        indexed: true,
        identityRules: IDENTITY_RULES,
      }
      ops.push({ type: 'put', key: storeKeys.meta(id), value: json(stored) })
      await this.#syncedBatch(ops)
    })
  }

  deleteTrace(name: string): Promise<boolean> {
    return this.#write(async () => {
      const id = await this.completeId(name)
      if (id === undefined) return false
      const ops = await this.#traceKeyOps(id)
      ops.push({ type: 'del', key: storeKeys.name(name) })
      await this.#syncedBatch(ops)
      return true
    })
  }

  deleteRecording(id: string): Promise<boolean> {
    return this.#write(async () => {
      const stored = await this.#reads.getMeta(id)
      if (stored === undefined || (await this.completeId(stored.name)) === id) return false
      this.#openRecordings.delete(id)
      await this.#syncedBatch(await this.#traceKeyOps(id))
      return true
    })
  }

  /**
   * A batch synced to disk, then the log's length recorded (store-files.ts): an open that later finds the
   * log shorter knows confirmed writes were lost and refuses the store. Runs inside the write queue, so no
   * other write moves the log in between.
   */
  async #syncedBatch(ops: BatchOp[]): Promise<void> {
    await this.#db.batch(ops, SYNC)
    await recordSynced(this.location)
  }

  /** Runs writes one at a time: close and put read before they write, and must not interleave. */
  #write<T>(fn: () => Promise<T>): Promise<T> {
    // Appends that come after this write must not join a group queued before it.
    this.#queuedAppends = undefined
    const run = this.#writes.then(() => this.#io(fn))
    this.#writes = run.catch(() => {})
    return run
  }

  /** Ops that point `name` at `id` and delete the trace it pointed at before. Bodies stay (see level-store.ts on GC). */
  async #replaceOps(name: string, id: string): Promise<BatchOp[]> {
    const old = await this.completeId(name)
    const ops = old !== undefined && old !== id ? await this.#traceKeyOps(old) : []
    ops.push({ type: 'put', key: storeKeys.name(name), value: encoder.encode(id) })
    return ops
  }

  async #traceKeyOps(id: string): Promise<BatchOp[]> {
    const ops: BatchOp[] = [{ type: 'del', key: storeKeys.meta(id) }]
    for (const prefix of [`x!${id}!`, `k!${id}!`]) for await (const key of this.#db.keys(range(prefix))) ops.push({ type: 'del', key })
    return ops
  }

  /** Maps level's own failures to TR_STORE_*; ToolReplayErrors pass through. */
  async #io<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn()
    } catch (err) {
      if (err instanceof ToolReplayError) throw err
      const code = (err as { code?: string }).code
      if (code === 'LEVEL_DATABASE_NOT_OPEN') {
        throw new ToolReplayError(ErrorCodes.STORE_CLOSED, `The trace store at ${this.location} is closed. Open it again with openStore().`, { cause: err })
      }
      const message = `${(err as Error).message ?? ''} ${((err as { cause?: Error }).cause?.message ?? '') as string}`
      if (code === 'LEVEL_CORRUPTION' || /corrupt/i.test(message)) {
        throw new ToolReplayError(
          ErrorCodes.STORE_CORRUPT,
          `The trace store at ${this.location} is damaged: ${message.trim()}. Run \`tr-proxy fsck --store ${this.location}\` to see what is intact and export it, then move the store directory aside and re-import or re-record.`,
          { cause: err, details: { location: this.location } },
        )
      }
      throw new ToolReplayError(
        ErrorCodes.STORE_IO,
        `Failed to access the trace store at ${this.location}: ${message.trim()}. Check disk space and permissions.`,
        { cause: err, details: { location: this.location } },
      )
    }
  }
}

/** TR_STORE_NOT_FOUND for a directory that holds no store. */
export function storeNotFound(dir: string): ToolReplayError {
  return new ToolReplayError(
    ErrorCodes.STORE_NOT_FOUND,
    `There is no trace store at ${dir}. Record into it first (\`tr-proxy record\` or install({ mode: 'record' })), or point at an existing one with --store DIR or TOOL_REPLAY_STORE.`,
    { details: { location: dir } },
  )
}

/** LevelDB as the key-value reader store-reads.ts reads through. */
function levelKv(db: Level<string, Uint8Array>): KvRead {
  return {
    get: (key) => db.get(key),
    async scan(r: KvRange, visit) {
      const { limit: _limit, ...bounds } = r
      for await (const [key, value] of db.iterator(bounds)) if (visit(key, value) === false) return
    },
  }
}

function bodyMissing(x: Exchange, name: string, what: string): ToolReplayError {
  return new ToolReplayError(
    ErrorCodes.BODY_MISSING,
    `Cannot store the exchange for ${x.request.url} in trace "${name}": it references ${what}, which was neither passed nor already stored. Pass every body the exchange references.`,
    { details: { trace: name, what } },
  )
}

/** True for the error classic-level gives when another process holds the directory's lock. */
export function isLockedError(err: unknown): boolean {
  const e = err as { code?: string; cause?: { code?: string } } | undefined
  return e?.code === 'LEVEL_LOCKED' || e?.cause?.code === 'LEVEL_LOCKED'
}

/**
 * Counts a stored exchange into its recording's meta: `count` is one past the highest seq, and `ordered` the
 * number of exchanges while every seq is above all earlier ones (so none can be a rewrite of one already there:
 * a resent batch after a lost answer drops it, and closing then counts the exchanges), with the `count` it
 * was kept at: a store written meanwhile by a version that does not keep it shows as a `count` that moved.
 */
function countIn(stored: StoredMeta, x: Exchange): void {
  const before = stored.count ?? 0
  const ordered = stored.ordered
  // Trusted only while it was kept by every write that moved `count` (a writer that knows nothing of it would not).
  if (ordered !== undefined && ordered.count === before && x.seq >= before) stored.ordered = { exchanges: ordered.exchanges + 1, count: x.seq + 1 }
  else delete stored.ordered
  stored.count = Math.max(before, x.seq + 1)
  stored.bodyBytes = (stored.bodyBytes ?? 0) + bodyBytesOf(x)
}

function bodyBytesOf(x: Exchange): number {
  const response = x.outcome.kind === 'response' ? x.outcome.response.body : x.outcome.error.partial?.body
  return (x.request.body?.size ?? 0) + (response?.size ?? 0)
}

function assertSeq(x: Exchange, name: string): void {
  if (!Number.isSafeInteger(x.seq) || x.seq < 0) {
    throw new ToolReplayError(ErrorCodes.TRACE_INVALID, `Exchange for ${x.request?.url} in trace "${name}" has seq ${x.seq}; seq must be an integer >= 0.`)
  }
}

function json(v: unknown): Uint8Array {
  return encoder.encode(JSON.stringify(v))
}

/**
 * `level` (CommonJS), loaded at the first open, not with the module: importing Tool Replay must not cost LevelDB's
 * 30 modules and native addon. Taken with require, not import(): a full test run once saw `import('level')` give a
 * namespace whose `Level` was undefined in a recording CLI (the ESM view of a CommonJS module is the one step
 * require skips); the class is checked either way.
 */
let levelModule: typeof import('level') | undefined
function levelClass(): typeof Level {
  levelModule ??= createRequire(import.meta.url)('level') as typeof import('level')
  if (typeof levelModule.Level !== 'function') {
    throw new ToolReplayError(ErrorCodes.STORE_IO, 'The installed `level` package has no Level class. Reinstall the dependencies (npm ci).')
  }
  return levelModule.Level
}
