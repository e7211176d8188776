/** Persistence: the LevelDB store, the in-memory store and portable trace files. */

export type { OpenStoreOptions } from './level-store.ts'
/** Opens the LevelDB store, its default location, and the socket processes share it through. */
export { defaultStoreDir, openStore, storeSocketPath } from './level-store.ts'
/** An in-process store for tests and benchmarks. */
export { createMemoryStore } from './memory-store.ts'
export type { ExportedTrace, TraceFileOptions } from './trace-file.ts'
/** Portable trace files and the format-independent trace digest. */
export {
  DEFAULT_INLINE_LIMIT,
  exportTrace,
  parseTraceFile,
  readTraceFile,
  TRACE_FILE_FORMAT,
  traceDigest,
  writeTraceFile,
} from './trace-file.ts'
export type { TraceRecording, TraceStore, TraceSummary } from './trace-store.ts'
