import type { Exchange, Trace, TraceMeta } from '../trace/index.ts'

/** A trace as listed: complete once its recording closed, partial when the recorder died first. */
export interface TraceSummary {
  name: string
  /** Internal id; a re-recording gets a new id and replaces the name only when it closes. */
  id: string
  status: 'complete' | 'partial'
  exchanges: number
  /** ISO time the recording started (store-only bookkeeping; never exported). */
  createdAt: string
}

/** An open recording. Each `append` is one atomic write: an exchange is stored whole or not at all. */
export interface TraceRecording {
  readonly id: string
  readonly name: string
  /** Stores one exchange and the bodies it references (bodies already present are not rewritten). */
  append(exchange: Exchange, bodies: ReadonlyMap<string, Uint8Array>): Promise<void>
  /** Marks the recording complete and makes it the trace listed under its name. */
  close(): Promise<void>
}

/**
 * Persistence for traces. Implementations: the LevelDB store (default, `openStore`) and an
 * in-memory one (`createMemoryStore`, for tests and benchmarks). Every backend passes
 * store/trace-store-contract.ts.
 */
export interface TraceStore {
  /** Directory of the store, or ':memory:'. */
  readonly location: string
  listTraces(): Promise<TraceSummary[]>
  /** The complete trace with that name. Throws TR_TRACE_NOT_FOUND (naming what exists) when absent. */
  readTrace(name: string): Promise<Trace>
  hasTrace(name: string): Promise<boolean>
  /** Starts recording a trace; the previous trace of that name stays readable until `close()`. */
  beginTrace(meta: TraceMeta): Promise<TraceRecording>
  /** Writes a whole trace (import, fork) atomically as complete. Throws TR_TRACE_EXISTS unless `overwrite`. */
  putTrace(trace: Trace, options?: { overwrite?: boolean }): Promise<void>
  /** Removes a trace by name; returns false when there was none. */
  deleteTrace(name: string): Promise<boolean>
  close(): Promise<void>
}
