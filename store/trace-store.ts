import type { AppRun, Exchange, Trace, TraceMeta } from '../trace/index.ts'
import type { BodyWriter } from './body-writer.ts'
import type { BodyManifest, GcReport, RecordingOptions, TraceSummary } from './store-ops.ts'
import type { TraceReader } from './trace-reader.ts'

/** An open recording. Each `append` is one atomic write: an exchange is stored whole or not at all. */
export interface TraceRecording {
  readonly id: string
  readonly name: string
  /**
   * Stores one exchange and the bodies it references: small ones in `bodies`, big ones already streamed in
   * with `bodyWriter()` as `manifests` (bodies already present are not rewritten).
   */
  append(exchange: Exchange, bodies: ReadonlyMap<string, Uint8Array>, manifests?: ReadonlyMap<string, BodyManifest>): Promise<void>
  /** Streams a big body into the store, piece by piece; append the exchange with its manifest afterwards. */
  bodyWriter(): BodyWriter
  /**
   * Marks the recording complete and makes it the trace listed under its name; `app` (the command the run
   * was made with and how it ended) goes into its meta in the same write.
   */
  close(app?: AppRun): Promise<void>
  /**
   * Ends a recording that did not happen (the proxy or the command could not start): one that stored no
   * exchange is removed, so no empty partial trace is left; one that stored any stays a partial recording
   * (nothing recorded is lost). The previous trace of the name stays the one listed. Idempotent.
   */
  discard(): Promise<void>
}

/** A trace being written in batches; see TraceStore.stageTrace. */
export interface StagedTrace {
  readonly id: string
  /** Adds the next exchange with the bytes of its bodies (bodies an earlier exchange brought may be left out). */
  add(exchange: Exchange, bodies: ReadonlyMap<string, Uint8Array>): Promise<void>
  /** Lists the trace under its name. Throws TR_TRACE_EXISTS (and discards) when the name is taken, unless `overwrite`. */
  commit(options?: { overwrite?: boolean }): Promise<void>
  /** Removes what was staged (its bodies stay until `gc`, as a deleted trace's do). */
  discard(): Promise<void>
}

/** Which stored trace of a name: the complete one (default), or the newest recording that never completed. */
export interface TraceSelector {
  partial?: boolean
}

/**
 * Persistence for traces. Implementations: the LevelDB store (default, `openStore`) and an
 * in-memory one (`createMemoryStore`, for tests and benchmarks). Every backend passes
 * store/fixtures/trace-store-contract.ts (test code, not published).
 */
export interface TraceStore {
  /** Directory of the store, or ':memory:'. */
  readonly location: string
  listTraces(): Promise<TraceSummary[]>
  /** The whole trace, every body verified. Throws TR_TRACE_NOT_FOUND (naming what exists) when absent. */
  readTrace(name: string, selector?: TraceSelector): Promise<Trace>
  /** The trace opened for lazy, verified reading (replay): nothing is loaded until asked for. */
  openTrace(name: string, selector?: TraceSelector): Promise<TraceReader>
  hasTrace(name: string): Promise<boolean>
  /**
   * Starts recording a trace; the previous trace of that name stays readable until `close()`. With
   * `durability: 'fsync'` each append resolves only once it is synced to the disk (store/durability.ts).
   */
  beginTrace(meta: TraceMeta, options?: RecordingOptions): Promise<TraceRecording>
  /** Writes a whole trace (import, fork) atomically as complete. Throws TR_TRACE_EXISTS unless `overwrite`. */
  putTrace(trace: Trace, options?: { overwrite?: boolean }): Promise<void>
  /**
   * Starts writing a trace of any length in batches (import of a trace file): nothing is listed under its
   * name until `commit`, and `discard` removes what was staged.
   */
  stageTrace(meta: TraceMeta): Promise<StagedTrace>
  /**
   * Removes the complete trace of that name (returns false when there was none); with `partial`, removes its
   * recordings that never completed and whose process is gone.
   */
  deleteTrace(name: string, selector?: TraceSelector): Promise<boolean>
  /**
   * Removes the bodies and piece files no trace references (left by deleted and replaced traces), safe while
   * other processes record; `dryRun` only counts them.
   */
  gc(options?: { dryRun?: boolean }): Promise<GcReport>
  /** The space each trace's bodies take (complete, recording and partial). */
  usage(): Promise<TraceUsage[]>
  close(): Promise<void>
}

/** The space one trace's bodies take: bodies are stored once, so one shared by traces is counted in each. */
export interface TraceUsage {
  name: string
  id: string
  status: TraceSummary['status']
  exchanges: number
  /** Distinct bodies the trace references, and their bytes. */
  bodies: number
  bytes: number
  /** Bytes of those bodies that other traces reference too (what deleting this trace alone would not free). */
  shared: number
}
