/**
 * The worker thread that reads a stored trace's bodies for an export (body-thread.ts): it opens the store
 * read-only, as the thread that started it did, and answers each request (bodies by digest and size, in
 * order) with their verified bytes packed in one transferred buffer, or with the error the first body that
 * does not check out gives. Requests are answered one at a time, in the order they came.
 */
import { parentPort, workerData } from 'node:worker_threads'
import { ErrorCodes, ToolReplayError } from '../trace/index.ts'
import type { BodyRequest, BodyThreadMessage, BodyThreadStart } from './body-thread.ts'
import { openStore } from './level-store.ts'
import { useSyncPointReads } from './leveldb-table.ts'
import { toWireError } from './store-errors.ts'
import type { TraceReader } from './trace-reader.ts'

const port = parentPort
if (port === null) throw new Error('body-worker.ts runs as a worker thread (body-thread.ts starts it)')
const start = workerData as BodyThreadStart
const post = (m: BodyThreadMessage, transfer: ArrayBuffer[] = []) => port.postMessage(m, transfer)
const failed = (err: unknown, id?: number) =>
  post({ type: 'error', ...(id !== undefined ? { id } : {}), error: toWireError(err, 'The thread reading bodies for an export failed') })

/** The reader of the same recording the thread that started this one reads (its name may have moved on since). */
async function open(): Promise<TraceReader> {
  // A body per exchange, each a block read: synchronous reads, as in the exporting thread.
  useSyncPointReads()
  const store = await openStore(start.location, { readOnly: true, create: false })
  const reader = await store.openTrace(start.name, { partial: start.partial })
  if (reader.info.id !== start.id) {
    throw new ToolReplayError(
      ErrorCodes.TRACE_NOT_FOUND,
      `Trace "${start.name}" was replaced in the store at ${start.location} while it was exported; nothing was written. Export it again.`,
      { details: { trace: start.name, location: start.location } },
    )
  }
  return reader
}

async function answer(reader: TraceReader, m: BodyRequest): Promise<void> {
  const parts: Uint8Array[] = []
  let total = 0
  for (let i = 0; i < m.digests.length; i++) {
    const bytes = await reader.bodyBytes({ digest: m.digests[i] as string, size: m.sizes[i] as number, chunks: [] }, m.uses[i] as string)
    parts.push(bytes)
    total += bytes.byteLength
  }
  const packed = new Uint8Array(total)
  let at = 0
  for (const p of parts) {
    packed.set(p, at)
    at += p.byteLength
  }
  post({ type: 'bodies', id: m.id, bytes: packed.buffer }, [packed.buffer])
}

const opened = open()
opened.then(
  () => post({ type: 'ready' }),
  (err) => failed(err),
)
let queue: Promise<void> = opened.then(
  () => {},
  () => {},
)
port.on('message', (m: BodyRequest) => {
  queue = queue.then(async () => {
    try {
      await answer(await opened, m)
    } catch (err) {
      failed(err, m.id)
    }
  })
})
