/**
 * The TraceStore every backend gets, written once over StoreOps: name lookup, lazy verified reading,
 * recordings with streamed big bodies, partial recordings. The LevelDB store runs the ops locally or over
 * its socket (with fail-over); the memory store runs them on maps.
 */
import { randomBytes } from 'node:crypto'
import { hostname } from 'node:os'
import { type AppRun, ErrorCodes, type Exchange, ToolReplayError, type Trace, type TraceMeta } from '../trace/index.ts'
import { BodyWriter } from './body-writer.ts'
import { parseDurability } from './durability.ts'
import { verifiedExchanges } from './file-verified.ts'
import { assertStorableApp, assertStorableExchange, assertStorableTrace } from './storable.ts'
import { traceExists, traceNotFound } from './store-errors.ts'
import type { BodyManifest, RecordingOptions, StoreOps, TraceInfo } from './store-ops.ts'
import { bodyRefs, TraceReader } from './trace-reader.ts'
import type { StagedTrace, TraceRecording, TraceSelector, TraceStore, TraceUsage } from './trace-store.ts'

/** Runs one store operation on whatever backend is current (resending it after a fail-over). */
export type RunOps = <T>(fn: (ops: StoreOps) => Promise<T>) => Promise<T>

/** Builds a TraceStore over `run`; `release` runs once on close; with `readOnly`, writes reject with its error. */
export function createTraceStore(location: string, run: RunOps, release: () => Promise<void>, readOnly?: () => Error): TraceStore {
  let closed = false
  const live: RunOps = (fn) => {
    if (closed) {
      return Promise.reject(new ToolReplayError(ErrorCodes.STORE_CLOSED, `The trace store at ${location} is closed. Open it again with openStore().`))
    }
    return run(fn)
  }
  /** Ops that go through `live` one call at a time, for readers and writers that outlive one call. */
  const ops = routedOps(location, live)

  const info = async (name: string, selector: TraceSelector = {}): Promise<TraceInfo> => {
    if (selector.partial) {
      for (const id of await live((o) => o.recordingIds(name))) {
        const found = await live((o) => o.traceInfo(id))
        if (found && found.status !== 'complete') return found
      }
      throw new ToolReplayError(
        ErrorCodes.TRACE_NOT_FOUND,
        `Trace "${name}" has no recording that did not complete in the store at ${location}. Drop --partial to use the complete trace.`,
        { details: { trace: name, location } },
      )
    }
    const id = await live((o) => o.completeId(name))
    const found = id === undefined ? undefined : await live((o) => o.traceInfo(id))
    if (found) return found
    const list = await live((o) => o.listTraces())
    const err = traceNotFound(
      name,
      list.filter((t) => t.status === 'complete').map((t) => t.name),
      location,
    )
    const partials = list.filter((t) => t.name === name && t.status !== 'complete').length
    if (partials === 0) throw err
    throw new ToolReplayError(err.code, `${err.message} It has ${partials} recording(s) that did not complete: add --partial to read the newest.`, {
      details: err.details ?? {},
    })
  }

  return {
    location,
    listTraces: () => live((o) => o.listTraces()),
    async openTrace(name, selector) {
      return new TraceReader(ops, await info(name, selector))
    },
    async readTrace(name, selector) {
      return new TraceReader(ops, await info(name, selector)).readAll()
    },
    hasTrace: async (name) => (await live((o) => o.completeId(name))) !== undefined,
    async beginTrace(meta: TraceMeta, options?: RecordingOptions): Promise<TraceRecording> {
      if (readOnly) throw readOnly()
      const durability = parseDurability(options?.durability)
      const id = newId()
      await live((o) => o.beginTrace(id, meta, new Date().toISOString(), { pid: process.pid, host: hostname() }, { durability }))
      let done = false
      let appends = 0
      return {
        id,
        name: meta.name,
        append: async (exchange: Exchange, bodies: ReadonlyMap<string, Uint8Array>, manifests: ReadonlyMap<string, BodyManifest> = new Map()) => {
          assertStorableExchange(meta.name, exchange, bodies)
          appends++
          return live((o) => o.append(id, exchange, bodies, manifests))
        },
        bodyWriter: () => new BodyWriter((sha, bytes) => live((o) => o.putPiece(sha, bytes))),
        close: async (app?: AppRun) => {
          if (done) return
          if (app !== undefined) assertStorableApp(meta.name, app)
          await live((o) => (app === undefined ? o.closeRecording(id) : o.closeRecording(id, { app })))
          done = true
        },
        discard: async () => {
          if (done) return
          done = true
          if (appends === 0) await live((o) => o.deleteRecording(id))
        },
      }
    },
    putTrace: async (trace: Trace, options) => {
      if (readOnly) throw readOnly()
      assertStorableTrace(trace)
      const id = newId()
      const createdAt = new Date().toISOString()
      const overwrite = options?.overwrite === true
      if (!isBig(trace)) return live((o) => o.putTrace(trace, id, createdAt, overwrite))
      return putInChunks(live, location, trace, id, createdAt, overwrite)
    },
    async stageTrace(meta) {
      if (readOnly) throw readOnly()
      return stageTrace(live, meta, newId(), new Date().toISOString())
    },
    async deleteTrace(name, selector) {
      if (readOnly) throw readOnly()
      if (!selector?.partial) return live((o) => o.deleteTrace(name))
      const list = await live((o) => o.listTraces())
      let deleted = false
      // A recording still in progress is never touched: only ones whose process is gone.
      for (const t of list.filter((s) => s.name === name && s.status === 'partial')) deleted = (await live((o) => o.deleteRecording(t.id))) || deleted
      return deleted
    },
    async gc(options) {
      if (readOnly && options?.dryRun !== true) throw readOnly()
      return live((o) => o.gc({ dryRun: options?.dryRun === true }))
    },
    usage: () => traceUsage(ops),
    async close() {
      if (closed) return
      closed = true
      await release()
    },
  }
}

/** A trace of more exchanges (or more body bytes than CHUNK_BYTES) is stored in chunks. */
const BIG_EXCHANGES = 1000
/**
 * Exchanges and body bytes per batch when a trace is stored in chunks. 200, not 1000: a chunk's exchanges
 * wait for its batch, and at 1000 most of them outlived two young collections and were copied to the old
 * generation (a 200,000-exchange import: 0.92x the time in 6 of 7 alternating pairs, 10-15 MB less at its
 * peak; 64 cost more than it saved).
 */
const CHUNK_EXCHANGES = 200
const CHUNK_BYTES = 8 * 1024 * 1024

function isBig(trace: Trace): boolean {
  if (trace.exchanges.length > BIG_EXCHANGES) return true
  let bytes = 0
  for (const b of trace.bodies.values()) bytes += b.byteLength
  return bytes > CHUNK_BYTES
}

/**
 * A trace stored as a recording written in bounded batches, listed under its name only at `commit`: one
 * giant batch would make LevelDB hold the whole trace in its log and memtable, and every later open replay
 * it (minutes and gigabytes for a million exchanges). Discarded, or killed half-way, it leaves no trace under
 * the name (a killed one leaves a partial recording: `rm --partial`, `gc`).
 */
async function stageTrace(live: RunOps, meta: TraceMeta, id: string, createdAt: string): Promise<StagedTrace> {
  await live((o) => o.beginTrace(id, meta, createdAt, { pid: process.pid, host: hostname() }, { recorded: false }))
  let chunk: Exchange[] = []
  let bodies = new Map<string, Uint8Array>()
  let bytes = 0
  let ended = false
  // One chunk is written while the next is read: the store's write (LevelDB's threads) overlaps the caller's
  // parsing instead of following it. Never more than one, so memory stays at two chunks.
  let writing: Promise<void> = Promise.resolve()
  const flush = async () => {
    if (chunk.length === 0) return
    const [xs, bs] = [chunk, bodies]
    chunk = []
    bodies = new Map()
    bytes = 0
    const previous = writing
    // A chunk goes only after the one before it landed; a failed one fails every chunk after it.
    writing = previous.then(() => live((o) => o.appendChunk(id, xs, bs)))
    writing.catch(() => {})
    await previous
  }
  const discard = async () => {
    if (ended) return
    ended = true
    // After the chunk in flight, so no chunk lands on a recording already deleted.
    await writing.catch(() => {})
    await live((o) => o.deleteRecording(id)).catch(() => {})
  }
  return {
    id,
    async add(x, own) {
      if (!verifiedExchanges.has(x)) assertStorableExchange(meta.name, x, own)
      for (const [ref] of bodyRefs(x)) {
        const b = own.get(ref.digest)
        if (b !== undefined && !bodies.has(ref.digest)) {
          bodies.set(ref.digest, b)
          bytes += b.byteLength
        }
      }
      chunk.push(x)
      if (chunk.length >= CHUNK_EXCHANGES || bytes >= CHUNK_BYTES) await flush()
    },
    async commit(options) {
      try {
        await flush()
        await writing
        await live((o) => o.closeRecording(id, { overwrite: options?.overwrite === true }))
        ended = true
      } catch (err) {
        await discard()
        throw err
      }
    },
    discard,
  }
}

/** putTrace of a big trace: staged in batches, then committed. */
async function putInChunks(live: RunOps, location: string, trace: Trace, id: string, createdAt: string, overwrite: boolean): Promise<void> {
  if (!overwrite && (await live((o) => o.completeId(trace.meta.name))) !== undefined) throw traceExists(trace.meta.name, location)
  const staged = await stageTrace(live, trace.meta, id, createdAt)
  try {
    for (const x of trace.exchanges) await staged.add(x, trace.bodies)
  } catch (err) {
    await staged.discard()
    throw err
  }
  await staged.commit({ overwrite })
}

/** The bodies of every trace (its exchanges read a page at a time) and what they share. */
async function traceUsage(ops: StoreOps): Promise<TraceUsage[]> {
  const out: Array<TraceUsage & { sizes: Map<string, number> }> = []
  const users = new Map<string, number>()
  for (const t of await ops.listTraces()) {
    const sizes = new Map<string, number>()
    let exchanges = 0
    for (let from = 0; ; ) {
      const page = await ops.exchanges(t.id, from, 1000)
      for (const x of page) {
        exchanges++
        for (const [ref] of bodyRefs(x)) sizes.set(ref.digest, ref.size)
      }
      if (page.length < 1000) break
      from = (page.at(-1) as Exchange).seq + 1
    }
    for (const d of sizes.keys()) users.set(d, (users.get(d) ?? 0) + 1)
    out.push({ name: t.name, id: t.id, status: t.status, exchanges, bodies: sizes.size, bytes: 0, shared: 0, sizes })
  }
  return out.map(({ sizes, ...u }) => {
    for (const [d, size] of sizes) {
      u.bytes += size
      if ((users.get(d) ?? 0) > 1) u.shared += size
    }
    return u
  })
}

/** StoreOps whose every call goes through `run` (so readers survive a fail-over and see a closed store). */
export function routedOps(location: string, run: RunOps): StoreOps {
  return {
    location,
    listTraces: () => run((o) => o.listTraces()),
    completeId: (name) => run((o) => o.completeId(name)),
    recordingIds: (name) => run((o) => o.recordingIds(name)),
    traceInfo: (id) => run((o) => o.traceInfo(id)),
    exchanges: (id, from, limit) => run((o) => o.exchanges(id, from, limit)),
    lookup: (id, key) => run((o) => o.lookup(id, key)),
    identityKeys: (id, after, limit) => run((o) => o.identityKeys(id, after, limit)),
    body: (digest, size) => run((o) => o.body(digest, size)),
    piece: (sha) => run((o) => o.piece(sha)),
    putPiece: (sha, bytes) => run((o) => o.putPiece(sha, bytes)),
    beginTrace: (id, meta, createdAt, owner, options) => run((o) => o.beginTrace(id, meta, createdAt, owner, options)),
    append: (id, x, bodies, manifests) => run((o) => o.append(id, x, bodies, manifests)),
    closeRecording: (id, options) => run((o) => o.closeRecording(id, options)),
    appendChunk: (id, exchanges, bodies) => run((o) => o.appendChunk(id, exchanges, bodies)),
    putTrace: (trace, id, createdAt, overwrite) => run((o) => o.putTrace(trace, id, createdAt, overwrite)),
    deleteTrace: (name) => run((o) => o.deleteTrace(name)),
    deleteRecording: (id) => run((o) => o.deleteRecording(id)),
    gc: (options) => run((o) => o.gc(options)),
  }
}

// Time first so ids sort by creation in listings and debugging; random so processes never collide.
function newId(): string {
  return `${Date.now().toString(36)}-${randomBytes(6).toString('hex')}`
}
