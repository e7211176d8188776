import { ErrorCodes, type Exchange, ToolReplayError, type Trace, type TraceMeta } from '../trace/index.ts'
import { traceNotFound } from './store-errors.ts'
import type { TraceRecording, TraceStore, TraceSummary } from './trace-store.ts'

interface Entry {
  id: string
  meta: TraceMeta
  exchanges: Exchange[]
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
    for (const x of e.exchanges) {
      for (const ref of refsOf(x)) {
        const b = bodies.get(ref)
        if (b) own.set(ref, b)
      }
    }
    return { meta: structuredClone(e.meta), exchanges: structuredClone(e.exchanges), bodies: own }
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
          for (const [k, v] of newBodies) if (!bodies.has(k)) bodies.set(k, v)
          entry.exchanges.push(structuredClone(exchange))
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
      for (const [k, v] of trace.bodies) bodies.set(k, v)
      complete.set(trace.meta.name, {
        id: `m${++counter}`,
        meta: structuredClone(trace.meta),
        exchanges: structuredClone(trace.exchanges),
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
