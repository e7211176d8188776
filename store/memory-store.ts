import { ErrorCodes, type Exchange, ToolReplayError, type Trace, type TraceMeta } from '../trace/index.ts'
import { traceNotFound } from './store-errors.ts'
import type { TraceRecording, TraceStore, TraceSummary } from './trace-store.ts'

interface Entry {
  id: string
  meta: TraceMeta
  /**
   * Exchanges as JSON text (recordings keep them in seq order): the same form the LevelDB store keeps, so what one backend
   * returns the other does too, and a caller editing an exchange cannot change the store. Cheaper than
   * structuredClone on the recording hot path (one stringify per append; parsing waits for a read).
   */
  exchanges: Array<{ seq: number; json: string }>
  complete: boolean
  createdAt: string
}

/** An in-process store with the same contract as the LevelDB one; nothing persists. */
export function createMemoryStore(): TraceStore {
  const bodies = new Map<string, Uint8Array>()
  // name -> complete entry; partial recordings live in `recordings` until closed.
  const complete = new Map<string, Entry>()
  const recordings = new Set<Entry>()
  let counter = 0
  let closed = false

  const assertOpen = () => {
    if (closed) throw new ToolReplayError(ErrorCodes.STORE_CLOSED, 'The memory store is closed. Open a new one.')
  }
  const toTrace = (e: Entry): Trace => {
    const own = new Map<string, Uint8Array>()
    const exchanges = e.exchanges.map((x) => JSON.parse(x.json) as Exchange)
    for (const x of exchanges) {
      for (const ref of refsOf(x)) {
        const b = bodies.get(ref)
        // Copies, so a caller editing a body cannot change the store.
        if (b) own.set(ref, new Uint8Array(b))
      }
    }
    return { meta: structuredClone(e.meta), exchanges, bodies: own }
  }

  return {
    location: ':memory:',
    async listTraces() {
      assertOpen()
      const out: TraceSummary[] = []
      for (const e of complete.values()) out.push(summary(e))
      for (const e of recordings) out.push(summary(e))
      return out.sort((a, b) => a.name.localeCompare(b.name) || a.createdAt.localeCompare(b.createdAt))
    },
    async readTrace(name) {
      assertOpen()
      const e = complete.get(name)
      if (!e) throw traceNotFound(name, [...complete.keys()], ':memory:')
      return toTrace(e)
    },
    async hasTrace(name) {
      assertOpen()
      return complete.has(name)
    },
    async beginTrace(meta) {
      assertOpen()
      const entry: Entry = { id: `m${++counter}`, meta: structuredClone(meta), exchanges: [], complete: false, createdAt: new Date().toISOString() }
      recordings.add(entry)
      const rec: TraceRecording = {
        id: entry.id,
        name: meta.name,
        async append(exchange, newBodies) {
          assertOpen()
          assertBodies(exchange, newBodies, bodies, meta.name)
          for (const ref of refsOf(exchange)) if (!bodies.has(ref)) bodies.set(ref, new Uint8Array(newBodies.get(ref) as Uint8Array))
          // Keyed by seq like the LevelDB store, so a resent append replaces rather than duplicates.
          const stored = { seq: exchange.seq, json: JSON.stringify(exchange) }
          const list = entry.exchanges
          // Appends nearly always arrive in seq order: check the end before searching.
          if (list.length === 0 || (list.at(-1) as { seq: number }).seq < exchange.seq) list.push(stored)
          else {
            const at = list.findIndex((x) => x.seq >= exchange.seq)
            list.splice(at, list[at]?.seq === exchange.seq ? 1 : 0, stored)
          }
        },
        async close() {
          if (entry.complete) return
          entry.complete = true
          recordings.delete(entry)
          complete.set(entry.meta.name, entry)
        },
      }
      return rec
    },
    async putTrace(trace, options) {
      assertOpen()
      if (complete.has(trace.meta.name) && !options?.overwrite) {
        throw new ToolReplayError(
          ErrorCodes.TRACE_EXISTS,
          `Trace "${trace.meta.name}" already exists in the memory store. Pick another name or pass overwrite.`,
        )
      }
      for (const x of trace.exchanges) assertBodies(x, trace.bodies, bodies, trace.meta.name)
      for (const x of trace.exchanges) for (const ref of refsOf(x)) if (!bodies.has(ref)) bodies.set(ref, new Uint8Array(trace.bodies.get(ref) as Uint8Array))
      complete.set(trace.meta.name, {
        id: `m${++counter}`,
        meta: structuredClone(trace.meta),
        exchanges: trace.exchanges.map((x) => ({ seq: x.seq, json: JSON.stringify(x) })),
        complete: true,
        createdAt: new Date().toISOString(),
      })
    },
    async deleteTrace(name) {
      assertOpen()
      return complete.delete(name)
    },
    async close() {
      closed = true
    },
  }
}

function assertBodies(x: Exchange, given: ReadonlyMap<string, Uint8Array>, stored: Map<string, Uint8Array>, name: string): void {
  for (const digest of refsOf(x)) {
    if (!given.has(digest) && !stored.has(digest)) {
      throw new ToolReplayError(
        ErrorCodes.BODY_MISSING,
        `Cannot store the exchange for ${x.request.url} in trace "${name}": it references body ${digest}, which was neither passed nor already stored. Pass every body the exchange references.`,
        { details: { trace: name, digest } },
      )
    }
  }
}

function summary(e: Entry): TraceSummary {
  return { name: e.meta.name, id: e.id, status: e.complete ? 'complete' : 'partial', exchanges: e.exchanges.length, createdAt: e.createdAt }
}

/** Digests of every body an exchange references. */
export function refsOf(x: Exchange): string[] {
  const out: string[] = []
  if (x.request.body) out.push(x.request.body.digest)
  if (x.outcome.kind === 'response') out.push(x.outcome.response.body.digest)
  else if (x.outcome.error.partial) out.push(x.outcome.error.partial.body.digest)
  return out
}
