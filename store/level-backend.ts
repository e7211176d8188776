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

import { randomBytes } from 'node:crypto'
import { mkdir, readdir, readFile, rename, stat, unlink, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { Level } from 'level'
import { type AppRun, computeIdentity, ErrorCodes, type Exchange, ToolReplayError, type Trace, type TraceMeta } from '../trace/index.ts'
import { checkLogFile } from './leveldb-log.ts'
import {
  type BodyManifest,
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

/** What `m!<id>` holds. Stores written before count/indexed existed lack them. */
interface StoredMeta {
  id: string
  name: string
  meta: TraceMeta
  createdAt: string
  status: 'recording' | 'complete'
  count?: number
  bodyBytes?: number
  indexed?: boolean
  /** Written by a recording of this store (beginTrace), not put whole. */
  recorded?: boolean
  owner?: RecordingOwner
}

const STORED_BODIES_LIMIT = 100_000
/** How long a store with a MANIFEST but no CURRENT may be "being created" before it counts as damaged. */
const CURRENT_WAIT_STEPS = 20
const CURRENT_WAIT_STEP_MS = 50

interface QueuedAppend {
  id: string
  exchange: Exchange
  bodies: ReadonlyMap<string, Uint8Array>
  manifests: ReadonlyMap<string, BodyManifest>
  resolve: () => void
  reject: (err: unknown) => void
}

type BatchOp = { type: 'put'; key: string; value: Uint8Array } | { type: 'del'; key: string }

const pad = (seq: number) => String(seq).padStart(10, '0')

/** Key builders, exported for tests that damage a store on purpose. */
export const storeKeys = {
  body: (digest: string) => `b!${digest}`,
  manifest: (digest: string) => `B!${digest}`,
  meta: (id: string) => `m!${id}`,
  exchange: (id: string, seq: number) => `x!${id}!${pad(seq)}`,
  identity: (id: string, key: string, seq: number) => `k!${id}!${key}!${pad(seq)}`,
  name: (name: string) => `n!${name}`,
}

// '"' sorts right after '!', so [`p!`, `p"`) is exactly the keys under prefix p.
const range = (prefix: string) => ({ gte: prefix, lt: `${prefix.slice(0, -1)}"` })

const encoder = new TextEncoder()
const decoder = new TextDecoder()
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
   * Body keys known to be stored (seen or written by this backend). Bodies are never deleted (see
   * level-store.ts on GC) and no other process writes here, so an entry never goes stale; it saves the
   * hasMany round trip for bodies a recording repeats. Bounded: cleared when full.
   */
  readonly #storedBodies = new Set<string>()
  /** Appends waiting for the write queue, committed together as one batch (see append). */
  #queuedAppends: QueuedAppend[] | undefined
  readonly #piecesDir: string
  /** Piece subdirectories known to exist. */
  readonly #pieceDirs = new Set<string>()

  private constructor(location: string, db: Level<string, Uint8Array>, piecesDir: string) {
    this.location = location
    this.#db = db
    this.#piecesDir = piecesDir
  }

  /**
   * Opens the LevelDB at `dir`. Rejects with the raw level error when another process holds the lock
   * (`isLockedError`), so the caller can become a client instead. A damaged store is TR_STORE_CORRUPT and is
   * never opened (LevelDB's recovery would drop what it cannot read, and a missing CURRENT would make it
   * create an empty store and delete the tables); `create: false` never creates one.
   */
  static async open(dir: string, options: { create?: boolean; unchecked?: boolean; piecesDir?: string } = {}): Promise<LevelBackend> {
    // `unchecked`: fsck's private copy of a damaged store, where LevelDB may recover what it can.
    if (!options.unchecked) await assertOpenable(dir, options.create !== false)
    const db = new Level<string, Uint8Array>(dir, { keyEncoding: 'utf8', valueEncoding: 'view' })
    try {
      await db.open({ createIfMissing: options.create !== false })
    } catch (err) {
      if (isLockedError(err)) throw err
      const cause = ((err as { cause?: Error }).cause ?? err) as Error
      if (/corrupt|manifest|CURRENT/i.test(cause.message)) throw corruptOnOpen(dir, cause.message, err)
      throw new ToolReplayError(
        ErrorCodes.STORE_IO,
        `Failed to open the trace store at ${dir}: ${cause.message}. Check that the path is a Tool Replay store directory (or does not exist yet) and is writable, or pass another --store.`,
        { cause: err, details: { location: dir } },
      )
    }
    return new LevelBackend(dir, db, options.piecesDir ?? join(dir, 'pieces'))
  }

  async close(): Promise<void> {
    // Must wait for queued writes: closing under a pending batch would fail it half-way through the queue.
    await this.#writes.catch(() => {})
    await this.#db.close()
  }

  // --- reads ---

  async listTraces(): Promise<TraceSummary[]> {
    return this.#io(async () => {
      const out: TraceSummary[] = []
      for await (const [key, value] of this.#db.iterator(range('m!'))) {
        const m = this.#parse<StoredMeta>(key, value)
        const status = m.status === 'complete' ? 'complete' : ownerAlive(m.owner) ? 'recording' : 'partial'
        out.push({ name: m.name, id: m.id, status, exchanges: m.count ?? (await this.#countExchanges(m.id)), createdAt: m.createdAt })
      }
      return out.sort((a, b) => a.name.localeCompare(b.name) || a.createdAt.localeCompare(b.createdAt))
    })
  }

  async completeId(name: string): Promise<string | undefined> {
    const v = await this.#io(() => this.#db.get(storeKeys.name(name)))
    return v === undefined ? undefined : decoder.decode(v)
  }

  async recordingIds(name: string): Promise<string[]> {
    const metas: StoredMeta[] = []
    await this.#io(async () => {
      for await (const [key, value] of this.#db.iterator(range('m!'))) {
        const m = this.#parse<StoredMeta>(key, value)
        if (m.name === name) metas.push(m)
      }
    })
    return metas.sort((a, b) => b.createdAt.localeCompare(a.createdAt) || b.id.localeCompare(a.id)).map((m) => m.id)
  }

  async traceInfo(id: string): Promise<TraceInfo | undefined> {
    const m = await this.#getMeta(id)
    if (m === undefined) return undefined
    const info: TraceInfo = {
      id,
      name: m.name,
      meta: m.meta,
      status: m.status,
      createdAt: m.createdAt,
      count: m.count ?? (await this.#countExchanges(id)),
      bodyBytes: m.bodyBytes ?? 0,
      indexed: m.indexed === true,
      recorded: m.recorded === true,
    }
    if (m.owner) info.owner = m.owner
    return info
  }

  async exchanges(id: string, fromSeq: number, limit: number): Promise<Exchange[]> {
    return this.#io(async () => {
      const out: Exchange[] = []
      for await (const [key, value] of this.#db.iterator({ gte: storeKeys.exchange(id, fromSeq), lt: `x!${id}"`, limit }))
        out.push(this.#parseExchange(key, value))
      return out
    })
  }

  async lookup(id: string, key: string): Promise<number[]> {
    return this.#io(async () => {
      const out: number[] = []
      for await (const k of this.#db.keys(range(`k!${id}!${key}!`))) out.push(Number(k.slice(k.lastIndexOf('!') + 1)))
      return out
    })
  }

  async identityKeys(id: string, afterKey: string, limit: number): Promise<Array<[string, number[]]>> {
    return this.#io(async () => {
      const prefix = `k!${id}!`
      const out: Array<[string, number[]]> = []
      // "~" sorts after every hex digit: start past every seq of `afterKey`.
      const gt = afterKey === '' ? undefined : `${prefix}${afterKey}!~`
      for await (const k of this.#db.keys({ ...(gt ? { gt } : { gte: prefix }), lt: `k!${id}"` })) {
        const rest = k.slice(prefix.length)
        const bang = rest.lastIndexOf('!')
        const key = rest.slice(0, bang)
        const seq = Number(rest.slice(bang + 1))
        const last = out.at(-1)
        if (last && last[0] === key) last[1].push(seq)
        else {
          if (out.length === limit) break
          out.push([key, [seq]])
        }
      }
      return out
    })
  }

  async body(digest: string): Promise<StoredBody | undefined> {
    const [bytes, manifest] = await this.#io(() => this.#db.getMany([storeKeys.body(digest), storeKeys.manifest(digest)]))
    if (bytes !== undefined) return { kind: 'bytes', bytes: new Uint8Array(bytes) }
    if (manifest !== undefined) return { kind: 'pieces', manifest: this.#parse<BodyManifest>(storeKeys.manifest(digest), manifest) }
    return undefined
  }

  async piece(sha: string): Promise<Uint8Array | undefined> {
    try {
      return new Uint8Array(await readFile(this.#piecePath(sha)))
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined
      throw this.#ioError(err)
    }
  }

  // --- writes ---

  /** Content-addressed: not ordered with other writes, and a piece already there (same size) is not rewritten. */
  async putPiece(sha: string, bytes: Uint8Array): Promise<void> {
    const path = this.#piecePath(sha)
    if ((await stat(path).catch(() => undefined))?.size === bytes.byteLength) return
    const dir = join(this.#piecesDir, sha.slice(0, 2))
    try {
      if (!this.#pieceDirs.has(dir)) {
        await mkdir(dir, { recursive: true, mode: 0o700 })
        this.#pieceDirs.add(dir)
      }
      const tmp = join(dir, `.${sha}.${randomBytes(4).toString('hex')}.tmp`)
      try {
        await writeFile(tmp, bytes, { mode: 0o600 })
        await rename(tmp, path)
      } catch (err) {
        await unlink(tmp).catch(() => {})
        throw err
      }
    } catch (err) {
      throw this.#ioError(err)
    }
  }

  #piecePath(sha: string): string {
    if (!/^[0-9a-f]{64}$/.test(sha)) throw new ToolReplayError(ErrorCodes.INTERNAL, `"${sha}" is not a piece digest.`)
    return join(this.#piecesDir, sha.slice(0, 2), sha)
  }

  /** Starts a recording under a caller-chosen id, so a retried call after a lost connection is harmless. */
  beginTrace(id: string, meta: TraceMeta, createdAt: string, owner: RecordingOwner): Promise<void> {
    return this.#write(async () => {
      if ((await this.#getMeta(id)) !== undefined) return
      const stored: StoredMeta = { id, name: meta.name, meta, createdAt, status: 'recording', count: 0, bodyBytes: 0, indexed: true, recorded: true, owner }
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
      const present = await this.#present(group.flatMap((a) => refsOf(a.exchange).map(storeKeys.body)))
      const touched = new Map<string, StoredMeta>()
      for (const a of group) {
        try {
          const stored = touched.get(a.id) ?? { ...(await this.#recordingMeta(a.id)) }
          assertSeq(a.exchange, stored.name)
          const own = await this.#exchangeOps(a.id, stored.name, a.exchange, a.bodies, a.manifests, present)
          ops.push(...own)
          stored.count = Math.max(stored.count ?? 0, a.exchange.seq + 1)
          stored.bodyBytes = (stored.bodyBytes ?? 0) + bodyBytesOf(a.exchange)
          touched.set(a.id, stored)
          written.push(a)
        } catch (err) {
          a.reject(err)
        }
      }
      // The running count keeps `ls` from iterating exchanges, even of a recording still in progress.
      for (const m of touched.values()) ops.push({ type: 'put', key: storeKeys.meta(m.id), value: json(m) })
      if (ops.length > 0) await this.#io(() => this.#db.batch(ops))
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

  /** Which of `keys` are stored (or already known to be); the result also collects keys this batch adds. */
  async #present(keys: string[]): Promise<Set<string>> {
    const present = new Set<string>()
    const unknown = [...new Set(keys)].filter((k) => {
      if (this.#storedBodies.has(k)) present.add(k)
      return !this.#storedBodies.has(k)
    })
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
  ): Promise<BatchOp[]> {
    const ops: BatchOp[] = []
    // Marked present only once every body of the exchange is in hand: a refused append must not leave its
    // first bodies marked as stored (and cached so), or the next append of the same body would skip it.
    const added: string[] = []
    for (const digest of refsOf(x)) {
      const key = storeKeys.body(digest)
      if (present.has(key) || added.includes(key)) continue
      const bytes = bodies.get(digest)
      const manifest = manifests.get(digest)
      if (bytes !== undefined) ops.push(...(await this.#bodyOps(digest, bytes)))
      else if (manifest !== undefined) {
        for (const p of manifest.pieces) {
          if ((await stat(this.#piecePath(p.sha256)).catch(() => undefined))?.size !== p.size) throw bodyMissing(x, name, `piece ${p.sha256} of body ${digest}`)
        }
        ops.push({ type: 'put', key: storeKeys.manifest(digest), value: json(manifest) })
      } else throw bodyMissing(x, name, `body ${digest}`)
      added.push(key)
    }
    for (const key of added) present.add(key)
    ops.push({ type: 'put', key: storeKeys.exchange(id, x.seq), value: json(x) })
    const requestBody = x.request.body ? (bodies.get(x.request.body.digest) ?? (await this.#wholeBody(x.request.body.digest))) : null
    const identity = computeIdentity({ method: x.request.method, url: x.request.url, headers: x.request.headers, body: requestBody }).key
    ops.push({ type: 'put', key: storeKeys.identity(id, identity, x.seq), value: EMPTY })
    return ops
  }

  /** A body as ops: whole when small, else its pieces (written as files now) and its manifest. */
  async #bodyOps(digest: string, bytes: Uint8Array): Promise<BatchOp[]> {
    if (bytes.byteLength <= INLINE_BODY_MAX) return [{ type: 'put', key: storeKeys.body(digest), value: bytes }]
    const { manifest, pieces } = splitIntoPieces(bytes)
    for (const [sha, piece] of pieces) await this.putPiece(sha, piece)
    return [{ type: 'put', key: storeKeys.manifest(digest), value: json(manifest) }]
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
    const stored = await this.#getMeta(id)
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
  closeRecording(id: string, app?: AppRun): Promise<void> {
    return this.#write(async () => {
      const stored = await this.#getMeta(id)
      this.#openRecordings.delete(id)
      if (stored === undefined) throw this.#corrupt(storeKeys.meta(id), 'a recording being closed has no metadata')
      if (stored.status === 'complete') return
      const ops = await this.#replaceOps(stored.name, id)
      const { owner: _owner, ...rest } = stored
      const meta = app ? { ...rest.meta, app } : rest.meta
      ops.push({ type: 'put', key: storeKeys.meta(id), value: json({ ...rest, meta, status: 'complete', count: await this.#countExchanges(id) }) })
      await this.#db.batch(ops, SYNC)
    })
  }

  putTrace(trace: Trace, id: string, createdAt: string, overwrite: boolean): Promise<void> {
    return this.#write(async () => {
      const name = trace.meta.name
      const current = await this.completeId(name)
      // A retry of a put that already landed: the name points at our own id.
      if (current === id) return
      if (current !== undefined && !overwrite) {
        throw new ToolReplayError(
          ErrorCodes.TRACE_EXISTS,
          `Trace "${name}" already exists in the store at ${this.location}. Pick another name, delete it first, or pass overwrite.`,
          { details: { trace: name, location: this.location } },
        )
      }
      const ops: BatchOp[] = []
      const present = await this.#present(trace.exchanges.flatMap((x) => refsOf(x).map(storeKeys.body)))
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
      const stored: StoredMeta = { id, name, meta: trace.meta, createdAt, status: 'complete', count: trace.exchanges.length, bodyBytes, indexed: true }
      ops.push({ type: 'put', key: storeKeys.meta(id), value: json(stored) })
      await this.#db.batch(ops, SYNC)
    })
  }

  deleteTrace(name: string): Promise<boolean> {
    return this.#write(async () => {
      const id = await this.completeId(name)
      if (id === undefined) return false
      const ops = await this.#traceKeyOps(id)
      ops.push({ type: 'del', key: storeKeys.name(name) })
      await this.#db.batch(ops, SYNC)
      return true
    })
  }

  deleteRecording(id: string): Promise<boolean> {
    return this.#write(async () => {
      const stored = await this.#getMeta(id)
      if (stored === undefined || (await this.completeId(stored.name)) === id) return false
      this.#openRecordings.delete(id)
      await this.#db.batch(await this.#traceKeyOps(id), SYNC)
      return true
    })
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

  async #countExchanges(id: string): Promise<number> {
    let n = 0
    for await (const _ of this.#db.keys(range(`x!${id}!`))) n++
    return n
  }

  async #getMeta(id: string): Promise<StoredMeta | undefined> {
    const key = storeKeys.meta(id)
    const v = await this.#io(() => this.#db.get(key))
    return v === undefined ? undefined : this.#parse<StoredMeta>(key, v)
  }

  #parse<T>(key: string, value: Uint8Array): T {
    try {
      const v = JSON.parse(decoder.decode(value)) as unknown
      if (v === null || typeof v !== 'object') throw new TypeError('not a JSON object')
      return v as T
    } catch (err) {
      throw this.#corrupt(key, `its value is not valid JSON (${(err as Error).message})`, err)
    }
  }

  #parseExchange(key: string, value: Uint8Array): Exchange {
    const x = this.#parse<Exchange>(key, value)
    // Enough shape to fail here, naming the key, rather than deep inside a replay.
    if (typeof x.seq !== 'number' || typeof x.request?.url !== 'string' || (x.outcome?.kind !== 'response' && x.outcome?.kind !== 'error')) {
      throw this.#corrupt(key, 'its value is not an exchange')
    }
    if (key !== storeKeys.exchange(key.slice(2, key.lastIndexOf('!')), x.seq))
      throw this.#corrupt(key, `it holds exchange #${x.seq}, not the one its key names`)
    return x
  }

  #corrupt(key: string, why: string, cause?: unknown): ToolReplayError {
    return new ToolReplayError(
      ErrorCodes.STORE_CORRUPT,
      `The trace store at ${this.location} is damaged at key "${key}": ${why}. Run \`tr-proxy fsck --store ${this.location}\` to see what is intact, export it, then delete the affected trace (\`tr-proxy rm <name>\`) and re-record or re-import it.`,
      { cause, details: { location: this.location, key } },
    )
  }

  /** A file-system failure on a piece as TR_STORE_IO. */
  #ioError(err: unknown): ToolReplayError {
    return new ToolReplayError(
      ErrorCodes.STORE_IO,
      `Failed to access a body piece in ${this.#piecesDir}: ${(err as Error).message}. Check disk space and permissions.`,
      {
        cause: err,
        details: { location: this.location },
      },
    )
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

/**
 * Refuses to open a store LevelDB would damage further: LevelFiles without CURRENT (LevelDB would create an
 * empty store and delete them), or a write-ahead log with a damaged record (LevelDB would drop it silently).
 */
async function assertOpenable(dir: string, create: boolean): Promise<void> {
  let files = await readdir(dir).catch(() => [] as string[])
  const hasData = (list: string[]) => list.some((f) => /\.(ldb|sst|log)$/.test(f) || f.startsWith('MANIFEST-'))
  // Another process creating this store writes its MANIFEST a moment before CURRENT: give it that moment
  // (bounded) before calling the store damaged.
  for (let i = 0; i < CURRENT_WAIT_STEPS && !files.includes('CURRENT') && hasData(files); i++) {
    await sleep(CURRENT_WAIT_STEP_MS)
    files = await readdir(dir).catch(() => [] as string[])
  }
  const hasCurrent = files.includes('CURRENT')
  if (!hasCurrent && hasData(files)) {
    throw corruptOnOpen(
      dir,
      'it holds LevelDB files but no CURRENT file, so it cannot be opened, and Tool Replay will not create a new store over it (that would delete them)',
    )
  }
  if (!hasCurrent && !create) {
    throw new ToolReplayError(
      ErrorCodes.STORE_NOT_FOUND,
      `There is no trace store at ${dir}. Record into it first (\`tr-proxy record\` or install({ mode: 'record' })), or point at an existing one with --store DIR or TOOL_REPLAY_STORE.`,
      { details: { location: dir } },
    )
  }
  for (const log of files.filter((f) => f.endsWith('.log'))) {
    const damage = await checkLogFile(join(dir, log)).catch(() => [])
    if (damage.length > 0) {
      const first = damage[0] as { offset: number; why: string }
      throw corruptOnOpen(
        dir,
        `its write-ahead log ${log} has ${damage.length} damaged record(s) (first at byte ${first.offset}: ${first.why}); LevelDB would silently drop them`,
      )
    }
  }
}

function corruptOnOpen(dir: string, why: string, cause?: unknown): ToolReplayError {
  return new ToolReplayError(
    ErrorCodes.STORE_CORRUPT,
    `The trace store at ${dir} is damaged: ${why}. Nothing was changed. Run \`tr-proxy fsck --store ${dir}\` to see what can be recovered (it works on a copy and can export what is intact), then move the directory aside.`,
    { cause, details: { location: dir } },
  )
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
