/**
 * The TraceStore operations on an open LevelDB, for the one process that owns the directory.
 * Other processes reach these same operations over store/store-rpc.ts, so every write in a store
 * goes through one LevelBackend and one write queue: that is what makes `close()` (read the old
 * trace's keys, then delete them in the rename batch) safe without LevelDB transactions.
 *
 * Key layout (utf8 keys, byte values):
 *   b!<sha256>          body bytes, content-addressed; written only when absent
 *   m!<id>              JSON StoredMeta: name, TraceMeta, createdAt, status
 *   x!<id>!<seq 10d>    JSON Exchange; zero-padded so key order is seq order
 *   n!<name>            id of the complete trace listed under that name
 * Every state change is one db.batch, so a killed process leaves either the old or the new state.
 */
import { readdir } from 'node:fs/promises'
import { setTimeout as sleep } from 'node:timers/promises'
import { Level } from 'level'
import { ErrorCodes, type Exchange, ToolReplayError, type Trace, type TraceMeta } from '../trace/index.ts'
import { refsOf } from './memory-store.ts'
import { traceNotFound } from './store-errors.ts'
import type { TraceSummary } from './trace-store.ts'

/** What `m!<id>` holds. */
interface StoredMeta {
  id: string
  name: string
  meta: TraceMeta
  createdAt: string
  status: 'recording' | 'complete'
}

const STORED_BODIES_LIMIT = 100_000
const APPEND_LINGER_MS = 5

interface QueuedAppend {
  id: string
  exchange: Exchange
  bodies: ReadonlyMap<string, Uint8Array>
  resolve: () => void
  reject: (err: unknown) => void
}

type BatchOp = { type: 'put'; key: string; value: Uint8Array } | { type: 'del'; key: string }

/** Key builders, exported for tests that damage a store on purpose. */
export const storeKeys = {
  body: (digest: string) => `b!${digest}`,
  meta: (id: string) => `m!${id}`,
  exchange: (id: string, seq: number) => `x!${id}!${String(seq).padStart(10, '0')}`,
  name: (name: string) => `n!${name}`,
}

// '"' sorts right after '!', so [`p!`, `p"`) is exactly the keys under prefix p.
const range = (prefix: string) => ({ gte: prefix, lt: `${prefix.slice(0, -1)}"` })

const encoder = new TextEncoder()
const decoder = new TextDecoder()

/** The single-process implementation; `openStore` wraps it with ownership and RPC. */
export class LevelBackend {
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

  private constructor(location: string, db: Level<string, Uint8Array>) {
    this.location = location
    this.#db = db
  }

  /**
   * Opens the LevelDB at `dir`. Rejects with the raw level error when another process holds the lock
   * (`isLockedError`), so the caller can become a client instead; other failures become TR_STORE_IO.
   */
  static async open(dir: string, options: { create?: boolean } = {}): Promise<LevelBackend> {
    // LevelDB, asked to create a store where CURRENT is missing, makes an empty one and deletes every table
    // the new manifest does not name: a damaged store would be wiped. Only a directory with no LevelDB files
    // at all may be created.
    const files = await readdir(dir).catch(() => [] as string[])
    const hasCurrent = files.includes('CURRENT')
    const hasData = files.some((f) => /\.(ldb|sst|log)$/.test(f) || f.startsWith('MANIFEST-'))
    if (!hasCurrent && hasData) {
      throw new ToolReplayError(
        ErrorCodes.STORE_CORRUPT,
        `The trace store at ${dir} is damaged: it holds LevelDB files but no CURRENT file, so it cannot be opened, and Tool Replay will not create a new store over it (that would delete them). Nothing was changed. Run \`tr-proxy fsck --store ${dir}\` to see what can be recovered, copy the directory aside, and restore CURRENT from a backup (it names the MANIFEST-NNNNNN file to use).`,
        { details: { location: dir } },
      )
    }
    if (!hasCurrent && options.create === false) {
      throw new ToolReplayError(
        ErrorCodes.STORE_NOT_FOUND,
        `There is no trace store at ${dir}. Record into it first (\`tr-proxy record\` or install({ mode: 'record' })), or point at an existing one with --store DIR or TOOL_REPLAY_STORE.`,
        { details: { location: dir } },
      )
    }
    const db = new Level<string, Uint8Array>(dir, { keyEncoding: 'utf8', valueEncoding: 'view' })
    try {
      await db.open({ createIfMissing: options.create !== false })
    } catch (err) {
      if (isLockedError(err)) throw err
      const cause = (err as { cause?: Error }).cause ?? err
      throw new ToolReplayError(
        ErrorCodes.STORE_IO,
        `Failed to open the trace store at ${dir}: ${(cause as Error).message}. Check that the path is a Tool Replay store directory (or does not exist yet) and is writable, or pass another --store.`,
        { cause: err, details: { location: dir } },
      )
    }
    return new LevelBackend(dir, db)
  }

  async close(): Promise<void> {
    // Must wait for queued writes: closing under a pending batch would fail it half-way through the queue.
    await this.#writes.catch(() => {})
    await this.#db.close()
  }

  async listTraces(): Promise<TraceSummary[]> {
    return this.#io(async () => {
      const out: TraceSummary[] = []
      for await (const [key, value] of this.#db.iterator(range('m!'))) {
        const m = this.#parse<StoredMeta>(key, value)
        let exchanges = 0
        for await (const _ of this.#db.keys(range(`x!${m.id}!`))) exchanges++
        out.push({ name: m.name, id: m.id, status: m.status === 'complete' ? 'complete' : 'partial', exchanges, createdAt: m.createdAt })
      }
      return out.sort((a, b) => a.name.localeCompare(b.name) || a.createdAt.localeCompare(b.createdAt))
    })
  }

  async hasTrace(name: string): Promise<boolean> {
    return (await this.#io(() => this.#db.get(storeKeys.name(name)))) !== undefined
  }

  async readTrace(name: string): Promise<Trace> {
    const id = await this.#completeId(name)
    if (id === undefined) throw traceNotFound(name, await this.#names(), this.location)
    const stored = await this.#getMeta(id)
    if (stored === undefined) throw this.#corrupt(storeKeys.meta(id), `name "${name}" points to a trace whose metadata is missing`)
    const exchanges: Exchange[] = []
    for await (const [key, value] of this.#db.iterator(range(`x!${id}!`))) exchanges.push(this.#parseExchange(key, value))
    const digests = [...new Set(exchanges.flatMap(refsOf))]
    const values = await this.#io(() => this.#db.getMany(digests.map(storeKeys.body)))
    const bodies = new Map<string, Uint8Array>()
    digests.forEach((digest, i) => {
      const bytes = values[i]
      if (bytes === undefined) throw this.#corrupt(storeKeys.body(digest), `trace "${name}" references a body the store does not hold`)
      // Copy: level may hand out views into a shared buffer, and traces outlive the read.
      bodies.set(digest, new Uint8Array(bytes))
    })
    return { meta: stored.meta, exchanges, bodies }
  }

  /** Starts a recording under a caller-chosen id, so a retried call after a lost connection is harmless. */
  beginTrace(id: string, meta: TraceMeta, createdAt: string): Promise<void> {
    return this.#write(async () => {
      if ((await this.#getMeta(id)) !== undefined) return
      const stored: StoredMeta = { id, name: meta.name, meta, createdAt, status: 'recording' }
      await this.#db.put(storeKeys.meta(id), json(stored))
      this.#openRecordings.set(id, stored)
    })
  }

  /** Idempotent: the exchange key is its seq and bodies are content-addressed, so a retry rewrites the same bytes. */
  append(id: string, exchange: Exchange, bodies: ReadonlyMap<string, Uint8Array>): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const item: QueuedAppend = { id, exchange, bodies, resolve, reject }
      // Group commit: appends that arrive while earlier writes are still running join one batch, so a
      // recording app pays one hasMany and one batch per group rather than per exchange. Each exchange
      // is still stored whole or not at all, and nothing written after this group is enqueued (a
      // closeRecording, say) can be overtaken: #write starts a new group for appends that follow it.
      if (this.#queuedAppends) {
        this.#queuedAppends.push(item)
        return
      }
      const group = [item]
      void this.#write(async () => {
        // Linger a moment so appends of the next few exchanges join this batch: each LevelDB call costs
        // the recording app main-thread time whatever its size. Delays only when the append is stored.
        await sleep(APPEND_LINGER_MS)
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
      // Bodies already stored, or put by an earlier append of this group.
      const present = new Set<string>()
      const unknown: string[] = []
      for (const a of group) {
        for (const digest of refsOf(a.exchange)) {
          const key = storeKeys.body(digest)
          if (this.#storedBodies.has(key)) present.add(key)
          else if (!unknown.includes(key)) unknown.push(key)
        }
      }
      const flags = unknown.length > 0 ? await this.#io(() => this.#db.hasMany(unknown)) : []
      unknown.forEach((key, i) => {
        if (flags[i]) present.add(key)
      })
      for (const a of group) {
        try {
          const stored = await this.#recordingMeta(a.id)
          assertSeq(a.exchange, stored.name)
          const own: BatchOp[] = []
          const adds: string[] = []
          for (const digest of refsOf(a.exchange)) {
            const key = storeKeys.body(digest)
            if (present.has(key) || adds.includes(key)) continue
            const bytes = a.bodies.get(digest)
            if (bytes === undefined) {
              throw new ToolReplayError(
                ErrorCodes.BODY_MISSING,
                `Cannot store the exchange for ${a.exchange.request.url} in trace "${stored.name}": it references body ${digest}, which was neither passed nor already stored. Pass every body the exchange references.`,
                { details: { trace: stored.name, digest } },
              )
            }
            own.push({ type: 'put', key, value: bytes })
            adds.push(key)
          }
          own.push({ type: 'put', key: storeKeys.exchange(a.id, a.exchange.seq), value: json(a.exchange) })
          for (const key of adds) present.add(key)
          ops.push(...own)
          written.push(a)
        } catch (err) {
          a.reject(err)
        }
      }
      if (ops.length > 0) await this.#io(() => this.#db.batch(ops))
      if (this.#storedBodies.size > STORED_BODIES_LIMIT) this.#storedBodies.clear()
      for (const key of present) this.#storedBodies.add(key)
    } catch (err) {
      // The shared read or the batch failed: nothing of the group was written (settled appends stay as they are).
      for (const a of group) a.reject(err)
      return
    }
    for (const a of written) a.resolve()
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

  /** Makes the recording the trace listed under its name and drops the trace it replaces, in one batch. */
  closeRecording(id: string): Promise<void> {
    return this.#write(async () => {
      const stored = await this.#getMeta(id)
      this.#openRecordings.delete(id)
      if (stored === undefined) throw this.#corrupt(storeKeys.meta(id), 'a recording being closed has no metadata')
      if (stored.status === 'complete') return
      const ops = await this.#replaceOps(stored.name, id)
      ops.push({ type: 'put', key: storeKeys.meta(id), value: json({ ...stored, status: 'complete' }) })
      await this.#db.batch(ops)
    })
  }

  putTrace(trace: Trace, id: string, createdAt: string, overwrite: boolean): Promise<void> {
    return this.#write(async () => {
      const name = trace.meta.name
      const current = await this.#completeId(name)
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
      const pendingBodies = new Set<string>()
      const seen = new Set<number>()
      for (const x of trace.exchanges) {
        assertSeq(x, name)
        if (seen.has(x.seq)) throw new ToolReplayError(ErrorCodes.TRACE_INVALID, `Trace "${name}" has two exchanges with seq ${x.seq}. Renumber them.`)
        seen.add(x.seq)
        ops.push(...(await this.#bodyOps(x.request.url, refsOf(x), trace.bodies, name, pendingBodies)))
        ops.push({ type: 'put', key: storeKeys.exchange(id, x.seq), value: json(x) })
      }
      ops.push(...(await this.#replaceOps(name, id)))
      const stored: StoredMeta = { id, name, meta: trace.meta, createdAt, status: 'complete' }
      ops.push({ type: 'put', key: storeKeys.meta(id), value: json(stored) })
      await this.#db.batch(ops)
    })
  }

  deleteTrace(name: string): Promise<boolean> {
    return this.#write(async () => {
      const id = await this.#completeId(name)
      if (id === undefined) return false
      const ops = await this.#traceKeyOps(id)
      ops.push({ type: 'del', key: storeKeys.name(name) })
      await this.#db.batch(ops)
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

  /** Batch ops to store the bodies `refs` needs that the store lacks; fails when neither has them. */
  async #bodyOps(url: string, refs: string[], given: ReadonlyMap<string, Uint8Array>, name: string, pending = new Set<string>()): Promise<BatchOp[]> {
    const keys = refs.map(storeKeys.body)
    const present = await this.#db.hasMany(keys)
    const ops: BatchOp[] = []
    refs.forEach((digest, i) => {
      const key = keys[i] as string
      if (present[i] || pending.has(key)) return
      pending.add(key)
      const bytes = given.get(digest)
      if (bytes === undefined) {
        throw new ToolReplayError(
          ErrorCodes.BODY_MISSING,
          `Cannot store the exchange for ${url} in trace "${name}": it references body ${digest}, which was neither passed nor already stored. Pass every body the exchange references.`,
          { details: { trace: name, digest } },
        )
      }
      ops.push({ type: 'put', key, value: bytes })
    })
    return ops
  }

  /** Ops that point `name` at `id` and delete the trace it pointed at before. Bodies stay (see level-store.ts on GC). */
  async #replaceOps(name: string, id: string): Promise<BatchOp[]> {
    const old = await this.#completeId(name)
    const ops = old !== undefined && old !== id ? await this.#traceKeyOps(old) : []
    ops.push({ type: 'put', key: storeKeys.name(name), value: encoder.encode(id) })
    return ops
  }

  async #traceKeyOps(id: string): Promise<BatchOp[]> {
    const ops: BatchOp[] = [{ type: 'del', key: storeKeys.meta(id) }]
    for await (const key of this.#db.keys(range(`x!${id}!`))) ops.push({ type: 'del', key })
    return ops
  }

  async #completeId(name: string): Promise<string | undefined> {
    const v = await this.#io(() => this.#db.get(storeKeys.name(name)))
    return v === undefined ? undefined : decoder.decode(v)
  }

  async #getMeta(id: string): Promise<StoredMeta | undefined> {
    const key = storeKeys.meta(id)
    const v = await this.#io(() => this.#db.get(key))
    return v === undefined ? undefined : this.#parse<StoredMeta>(key, v)
  }

  async #names(): Promise<string[]> {
    const out: string[] = []
    for await (const key of this.#db.keys(range('n!'))) out.push(key.slice(2))
    return out
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
    return x
  }

  #corrupt(key: string, why: string, cause?: unknown): ToolReplayError {
    return new ToolReplayError(
      ErrorCodes.STORE_CORRUPT,
      `The trace store at ${this.location} is damaged at key "${key}": ${why}. Delete the affected trace (\`tr-proxy rm <name>\`) and re-record or re-import it; if that fails, delete the store directory.`,
      { cause, details: { location: this.location, key } },
    )
  }

  /** Maps level's own failures to TR_STORE_IO; ToolReplayErrors pass through. */
  async #io<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn()
    } catch (err) {
      if (err instanceof ToolReplayError) throw err
      const code = (err as { code?: string }).code
      if (code === 'LEVEL_DATABASE_NOT_OPEN') {
        throw new ToolReplayError(ErrorCodes.STORE_CLOSED, `The trace store at ${this.location} is closed. Open it again with openStore().`, { cause: err })
      }
      if (code === 'LEVEL_CORRUPTION' || /corruption/i.test((err as Error).message ?? '')) {
        throw new ToolReplayError(
          ErrorCodes.STORE_CORRUPT,
          `The trace store at ${this.location} is damaged: ${(err as Error).message}. Export the traces you still can (\`tr-proxy export\`), then move the store directory aside and re-import or re-record them.`,
          { cause: err, details: { location: this.location } },
        )
      }
      throw new ToolReplayError(
        ErrorCodes.STORE_IO,
        `Failed to access the trace store at ${this.location}: ${(err as Error).message}. Check disk space and permissions.`,
        {
          cause: err,
          details: { location: this.location },
        },
      )
    }
  }
}

/** True for the error classic-level gives when another process holds the directory's lock. */
export function isLockedError(err: unknown): boolean {
  const e = err as { code?: string; cause?: { code?: string } } | undefined
  return e?.code === 'LEVEL_LOCKED' || e?.cause?.code === 'LEVEL_LOCKED'
}

function assertSeq(x: Exchange, name: string): void {
  if (!Number.isSafeInteger(x.seq) || x.seq < 0) {
    throw new ToolReplayError(ErrorCodes.TRACE_INVALID, `Exchange for ${x.request?.url} in trace "${name}" has seq ${x.seq}; seq must be an integer >= 0.`)
  }
}

function json(v: unknown): Uint8Array {
  return encoder.encode(JSON.stringify(v))
}
