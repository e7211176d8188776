/**
 * The worker thread that reads a stored trace's bodies for an export (body-thread.ts): it opens the store
 * read-only, as the thread that started it did, and answers each request (bodies by digest and size, in
 * order) with their verified bytes in one transferred buffer, or with the error the first body that does not
 * check out gives. Requests are answered one at a time, in the order they came.
 */
import { parentPort, workerData } from 'node:worker_threads'
import type { BodyRequest, BodyThreadMessage, BodyThreadStart } from './body-thread.ts'
import { openStoreOps } from './level-store.ts'
import { useSyncPointReads } from './leveldb-table.ts'
import { toWireError } from './store-errors.ts'
import { packed } from './store-thread.ts'
import { TraceReader } from './trace-reader.ts'

const port = parentPort
if (port === null) throw new Error('body-worker.ts runs as a worker thread (body-thread.ts starts it)')
const start = workerData as BodyThreadStart
const post = (m: BodyThreadMessage, transfer: ArrayBuffer[] = []) => port.postMessage(m, transfer)
const failed = (err: unknown, id?: number) =>
  post({ type: 'error', ...(id !== undefined ? { id } : {}), error: toWireError(err, 'The thread reading bodies for an export failed') })

/**
 * A reader of the recording the starting thread reads, by its info (not looked up again by name: bodies are
 * read by digest, and the info only names the trace in messages).
 */
async function open(): Promise<TraceReader> {
  // A body per exchange, each a block read: synchronous reads, as in the exporting thread.
  useSyncPointReads()
  const { ops } = await openStoreOps(start.location, { readOnly: true, create: false })
  return new TraceReader(ops, start.info)
}

async function answer(reader: TraceReader, m: BodyRequest): Promise<void> {
  const parts: Uint8Array[] = []
  let total = 0
  for (let i = 0; i < m.digests.length; i++) {
    const bytes = await reader.bodyBytes({ digest: m.digests[i] as string, size: m.sizes[i] as number, chunks: [] }, m.uses[i] as string)
    parts.push(bytes)
    total += bytes.byteLength
  }
  // One body that fills a buffer of its own (a big one, most often) goes over as it is: no second copy of it
  // here. Such a buffer was made for this read (a point read copies its value out, a piece file is read into a
  // new buffer), so transferring it takes it from no one; a view into a block or a log batch is packed.
  const only = parts.length === 1 ? (parts[0] as Uint8Array) : undefined
  const bytes = only && only.byteOffset === 0 && only.byteLength === only.buffer.byteLength ? (only.buffer as ArrayBuffer) : packed(parts, total)
  post({ type: 'bodies', id: m.id, bytes }, [bytes])
}

const opened = open()
// A store that cannot be opened fails every request, now and later (body-thread.ts rejects them all).
opened.catch((err) => failed(err))
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
