/**
 * A stored trace's bodies read in a worker thread (body-worker.ts) for a big export: the worker does the
 * store's point reads (a table block read, checked and decompressed, per body) and verifies each body's hash,
 * while this thread reads the exchanges and formats, hashes and writes the file, so an export uses both cores
 * of a small machine instead of one. The bodies arrive packed, one transferred buffer a request; what the
 * worker finds wrong arrives as the error the reader would have thrown in this thread.
 */
import type { Worker } from 'node:worker_threads'
import { type BodyRef, ErrorCodes, ToolReplayError, type TraceMeta } from '../trace/index.ts'
import { fromWireError, type WireError } from './store-errors.ts'
import type { TraceInfo } from './store-ops.ts'
import { startStoreThread } from './store-thread.ts'
import { storedTraceSource, type TraceSource } from './trace-file-export.ts'
import type { TraceReader } from './trace-reader.ts'
import type { TraceStore } from './trace-store.ts'

/** Traces of at least this many exchanges read their bodies in a worker thread: below it, starting one costs more than it saves. */
export const BODY_THREAD_FROM = 20_000

/** What the worker opens: the store, and the recording the exporting thread reads. */
export interface BodyThreadStart {
  location: string
  info: TraceInfo
}

/** Bodies by digest and size, with where each is used (for messages), answered in order. */
export interface BodyRequest {
  id: number
  digests: string[]
  sizes: number[]
  uses: string[]
}

/** What the worker posts: a request's bodies (packed in order), or an error (a request's, or the thread's: without an id). */
export type BodyThreadMessage = { type: 'bodies'; id: number; bytes: ArrayBuffer } | { type: 'error'; id?: number; error: WireError }

/** How a stored trace is exported. */
export interface ExportSourceOptions {
  /** Traces of at least this many exchanges read their bodies in a worker thread. Default BODY_THREAD_FROM. */
  threadFrom?: number
}

/**
 * The source a stored trace is exported from (`meta` written as its meta): for a trace of `threadFrom`
 * exchanges or more in a store on disk, one whose bodies a worker thread reads (`close` ends it: whoever
 * takes the source must call it, as writeTraceFileFrom does); else storedTraceSource.
 */
export function exportSource(store: TraceStore, reader: TraceReader, meta: TraceMeta, options: ExportSourceOptions = {}): TraceSource {
  const source = storedTraceSource(reader, meta)
  if (reader.info.count < (options.threadFrom ?? BODY_THREAD_FROM) || store.location === ':memory:') return source
  const thread = new BodyThread({ location: store.location, info: reader.info })
  return { ...source, bodies: (wanted) => thread.read(wanted), close: () => thread.close() }
}

type Waiter = { digests: string[]; sizes: number[]; resolve: (bytes: Map<string, Uint8Array>) => void; reject: (err: unknown) => void }

/** The worker, and the requests it has not answered yet. */
class BodyThread {
  readonly #worker: Worker
  readonly #waiting = new Map<number, Waiter>()
  #next = 0
  /** Why the thread cannot answer any more (it failed to open the trace, or stopped). */
  #broken: ToolReplayError | undefined

  constructor(start: BodyThreadStart) {
    this.#worker = startStoreThread('body-worker', start)
    this.#worker.on('message', (m: BodyThreadMessage) => this.#take(m))
    this.#worker.on('error', (err) => this.#break(threadFailed(err.message)))
    this.#worker.on('exit', (code) => this.#break(threadFailed(`it stopped (exit code ${code})`)))
  }

  /** The bytes of each wanted body, verified, by digest. */
  read(wanted: ReadonlyArray<[BodyRef, string]>): Promise<Map<string, Uint8Array>> {
    if (this.#broken) return Promise.reject(this.#broken)
    const id = this.#next++
    const request: BodyRequest = { id, digests: [], sizes: [], uses: [] }
    for (const [ref, use] of wanted) {
      request.digests.push(ref.digest)
      request.sizes.push(ref.size)
      request.uses.push(use)
    }
    return new Promise((resolve, reject) => {
      this.#waiting.set(id, { digests: request.digests, sizes: request.sizes, resolve, reject })
      this.#worker.postMessage(request)
    })
  }

  async close(): Promise<void> {
    this.#broken ??= threadFailed('it was closed')
    await this.#worker.terminate()
  }

  #take(m: BodyThreadMessage): void {
    if (m.id === undefined) {
      // Only an error comes without an id: the thread's own, which fails every request.
      this.#break(fromWireError((m as { error: WireError }).error))
      return
    }
    const w = this.#waiting.get(m.id)
    if (w === undefined) return
    this.#waiting.delete(m.id)
    if (m.type === 'error') {
      w.reject(fromWireError(m.error))
      return
    }
    const out = new Map<string, Uint8Array>()
    let at = 0
    for (let i = 0; i < w.digests.length; i++) {
      const size = w.sizes[i] as number
      out.set(w.digests[i] as string, new Uint8Array(m.bytes, at, size))
      at += size
    }
    w.resolve(out)
  }

  #break(err: ToolReplayError): void {
    this.#broken ??= err
    for (const w of this.#waiting.values()) w.reject(this.#broken)
    this.#waiting.clear()
  }
}

function threadFailed(why: string): ToolReplayError {
  return new ToolReplayError(
    ErrorCodes.INTERNAL,
    `The thread reading bodies for an export failed (${why}), and no file was written. Report this as a bug, with the command you ran.`,
  )
}
