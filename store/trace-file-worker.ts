/**
 * The worker thread that reads a big trace file for TraceFileReader (trace-file-read.ts, `workerFrom`): it
 * reads and verifies the file as the reader does in one thread (schema, body hashes, the trace digest at the
 * end) and posts the exchanges in batches, each as its canonical JSON and the bytes of its bodies packed in one
 * transferred buffer, while the thread that started it redacts and stores them. A batch waits for a credit, so
 * at most CREDITS batches are on their way. See WorkerMessage for what it says.
 */
import { parentPort, workerData } from 'node:worker_threads'
import { toWireError } from './store-errors.ts'
import { packed } from './store-thread.ts'
import type { TraceFileReadOptions } from './trace-file-format.ts'
import { TraceFileReader } from './trace-file-read.ts'
import { threadFailed, type WorkerBatch, type WorkerMessage } from './trace-file-thread.ts'

/** Batches posted before the first credit comes back. */
const CREDITS = 2
/** A batch is posted at this many exchanges or body bytes, whichever comes first. */
const BATCH_EXCHANGES = 512
const BATCH_BYTES = 4 * 1024 * 1024

const port = parentPort
if (port === null) throw new Error('trace-file-worker.ts runs as a worker thread (trace-file-read.ts starts it)')
const { path, options } = workerData as { path: string; options: TraceFileReadOptions }

let credits = CREDITS
let wake: (() => void) | undefined
port.on('message', () => {
  credits++
  wake?.()
})

const post = (m: WorkerMessage, transfer: ArrayBuffer[] = []) => port.postMessage(m, transfer)

/** Posts `batch` once a credit allows it. */
async function send(batch: Pending): Promise<void> {
  while (credits === 0) await new Promise<void>((resolve) => (wake = resolve))
  credits--
  const m = batch.message()
  post(m, [m.bytes])
}

/** One batch being gathered: texts, and per exchange how many bodies; the bodies' digests, sizes and bytes. */
class Pending {
  readonly texts: string[] = []
  readonly counts: number[] = []
  readonly digests: string[] = []
  readonly sizes: number[] = []
  readonly parts: Uint8Array[] = []
  bytes = 0

  add(canonical: string, bodies: ReadonlyMap<string, Uint8Array>): void {
    this.texts.push(canonical)
    this.counts.push(bodies.size)
    for (const [digest, bytes] of bodies) {
      this.digests.push(digest)
      this.sizes.push(bytes.byteLength)
      this.parts.push(bytes)
      this.bytes += bytes.byteLength
    }
  }

  get full(): boolean {
    return this.texts.length >= BATCH_EXCHANGES || this.bytes >= BATCH_BYTES
  }

  message(): WorkerBatch {
    return { type: 'batch', texts: this.texts, counts: this.counts, digests: this.digests, sizes: this.sizes, bytes: packed(this.parts, this.bytes) }
  }
}

// What was read before a failure is handed out first, as the reader in one thread hands it out before it throws.
let batch = new Pending()
try {
  const reader = await TraceFileReader.open(path, options)
  post({ type: 'header', digest: reader.digest, meta: reader.meta })
  for await (const { canonical, bodies } of reader.exchanges()) {
    batch.add(canonical, bodies)
    if (!batch.full) continue
    await send(batch)
    batch = new Pending()
  }
  if (batch.texts.length > 0) await send(batch)
  post({ type: 'done' })
} catch (err) {
  if (batch.texts.length > 0) await send(batch)
  post({ type: 'error', error: toWireError(err, threadFailed(path)) })
}
