/**
 * What the store's worker threads share (trace-file-thread.ts for an import, body-thread.ts for an export):
 * how one is started, and how the bytes a batch carries travel in one transferred buffer.
 */
import { Worker } from 'node:worker_threads'

/**
 * A store thread's young generation: V8's default for a worker (up to 48 MB) held that much more memory for
 * garbage that dies at once, for no time saved. A million-exchange export: 285-287 MiB peak at 4 MB against
 * 296-300 MiB, 81-88 s against 82-92 s; an import: 304-309 MiB against 332-339, 66-73 s both (at 200,000
 * exchanges 233-237 MiB against 264-268, 13.8-21.8 s both, alternated).
 */
const THREAD_LIMITS = { maxYoungGenerationSizeMb: 4 }

/**
 * Starts the worker module `name` (a file of this folder: beside this one from the sources,
 * dist/store/<name>.js from the package, a build entry of its own in scripts/build.mjs).
 */
export function startStoreThread(name: 'trace-file-worker' | 'body-worker', workerData: unknown): Worker {
  const self = import.meta.url
  const file = new URL(self.endsWith('.ts') ? `./${name}.ts` : `../store/${name}.js`, self)
  // None of this process's node options: the thread runs our own modules by path, and some options a process
  // starts with (--input-type, for one) stop a worker from starting.
  return new Worker(file, { execArgv: [], workerData, resourceLimits: THREAD_LIMITS })
}

/** `parts` one after the other in one new buffer (`total` bytes: their sum), to be transferred. */
export function packed(parts: readonly Uint8Array[], total: number): ArrayBuffer {
  const all = new Uint8Array(total)
  let at = 0
  for (const p of parts) {
    all.set(p, at)
    at += p.byteLength
  }
  return all.buffer
}
