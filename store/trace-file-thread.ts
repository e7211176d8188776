/**
 * A big trace file read in a worker thread (trace-file-worker.ts) for TraceFileReader's `workerFrom`: the
 * worker scans, parses and verifies the file (hashing every body and the trace) while this thread takes the
 * exchanges on, so an import uses both cores of a small machine instead of one. The exchanges arrive as the
 * canonical JSON the trace digest took and are parsed here again (JSON.parse of that text gives the same
 * exchange: sorted plain objects, doubles); their bodies' bytes arrive packed, one transferred buffer a batch.
 * What the worker finds wrong arrives as the error the reader would have thrown in this thread.
 */
import type { Worker } from 'node:worker_threads'
import { canonicalJson, ErrorCodes, type Exchange, ToolReplayError, type TraceMeta } from '../trace/index.ts'
import { verifiedExchanges } from './file-verified.ts'
import { fromWireError, toWireError, type WireError } from './store-errors.ts'
import { startStoreThread } from './store-thread.ts'
import type { TraceFileExchange, TraceFileReadOptions } from './trace-file-format.ts'

/** The worker's first message: the header it read (checked against this thread's). */
export interface WorkerHeader {
  type: 'header'
  digest: string
  meta: TraceMeta
}

/** Exchanges in file order: `counts[i]` bodies for exchange i, taken in order from digests, sizes and bytes. */
export interface WorkerBatch {
  type: 'batch'
  texts: string[]
  counts: number[]
  digests: string[]
  sizes: number[]
  bytes: ArrayBuffer
}

/** What the worker posts: its header, batches, then `done` once the digest matched, or `error` at any point. */
export type WorkerMessage = WorkerHeader | WorkerBatch | { type: 'done' } | { type: 'error'; error: WireError }

/**
 * The exchanges of the file at `path`, read and verified in a worker thread; `expected` is the header this
 * thread read (a file that changed between the two reads fails as changed). Ends after the worker verified the
 * trace digest; stopping early (a caller that throws) ends the worker.
 */
export async function* exchangesInWorker(
  path: string,
  expected: { digest: string; meta: TraceMeta },
  options: TraceFileReadOptions,
): AsyncGenerator<TraceFileExchange> {
  const worker = startStoreThread('trace-file-worker', { path, options: { ...options, workerFrom: undefined } })
  const inbox = new Inbox(worker, path)
  try {
    for (;;) {
      const m = await inbox.next()
      if (m.type === 'done') return
      if (m.type === 'error') throw fromWireError(m.error)
      if (m.type === 'header') {
        if (m.digest !== expected.digest || canonicalJson(m.meta) !== canonicalJson(expected.meta)) throw changed(path)
        continue
      }
      // The next batch may be read while this one is stored.
      worker.postMessage('credit')
      yield* unpacked(m)
    }
  } finally {
    await worker.terminate()
  }
}

/** The exchanges of one batch, each with views of its bodies in the batch's buffer. */
function* unpacked(m: WorkerBatch): Generator<TraceFileExchange> {
  let body = 0
  let at = 0
  for (const [i, canonical] of m.texts.entries()) {
    const bodies = new Map<string, Uint8Array>()
    for (let n = m.counts[i] as number; n > 0; n--, body++) {
      const size = m.sizes[body] as number
      bodies.set(m.digests[body] as string, new Uint8Array(m.bytes, at, size))
      at += size
    }
    const exchange = JSON.parse(canonical) as Exchange
    verifiedExchanges.set(exchange, canonical)
    yield { exchange, bodies, canonical }
  }
}

/** The worker's messages in order, and its end: an `error` message when it stopped without saying why. */
class Inbox {
  readonly #queue: WorkerMessage[] = []
  #waiting: (() => void) | undefined

  constructor(worker: Worker, path: string) {
    const failed = (message: string) => this.#push({ type: 'error', error: toWireError(new Error(message), threadFailed(path)) })
    worker.on('message', (m: WorkerMessage) => this.#push(m))
    worker.on('error', (err) => failed(err.message))
    worker.on('exit', (code) => failed(`it stopped (exit code ${code})`))
  }

  async next(): Promise<WorkerMessage> {
    while (this.#queue.length === 0) await new Promise<void>((resolve) => (this.#waiting = resolve))
    return this.#queue.shift() as WorkerMessage
  }

  #push(m: WorkerMessage): void {
    this.#queue.push(m)
    this.#waiting?.()
    this.#waiting = undefined
  }
}

/**
 * What a failure of the thread itself says (one that could not start or stopped, TR_INTERNAL): the reader says
 * what is wrong with a file in a ToolReplayError of its own, which comes through with its code.
 */
export function threadFailed(path: string): string {
  return `The thread reading trace file ${path} failed, and nothing was imported (report this as a bug, with the command you ran)`
}

function changed(path: string): ToolReplayError {
  return new ToolReplayError(ErrorCodes.TRACE_FILE_INVALID, `Trace file ${path} changed while it was read. Import it again once nothing writes it.`, {
    details: { file: path },
  })
}
