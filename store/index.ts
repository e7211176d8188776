/** Persistence: the LevelDB store, the in-memory store and portable trace files. */

/** The source an export reads a stored trace from (a big one's bodies in a worker thread). */
export { BODY_THREAD_FROM, type ExportSourceOptions, exportSource } from './body-thread.ts'
export type { BodyWriter } from './body-writer.ts'
export type { Durability } from './durability.ts'
/** How far a recorded exchange is on its way to disk before its answer ends: the levels, the option, its parser. */
export { DURABILITY_LEVELS, DURABILITY_OPTION, parseDurability } from './durability.ts'
export type { FsckOptions, FsckReport, FsckTrace } from './fsck.ts'
/** Checks a whole store (every body against its SHA-256) and rescues what is intact. */
export { checkStore } from './fsck.ts'
export type { OpenStoreOptions } from './level-store.ts'
/** Opens the LevelDB store, its default location, and the socket processes share it through. */
export { defaultStoreDir, openStore, openStoreOps, storeSocketPath } from './level-store.ts'
/** Synchronous block reads for point lookups, for a process that runs one export (cli/commands/export.ts). */
export { useSyncPointReads } from './leveldb-table.ts'
/** An in-process store for tests and benchmarks. */
export { createMemoryStore } from './memory-store.ts'
/** This user's private directory in the temp dir (sockets too long for their store; shared sessions). */
export { privateDirProblem, privateTempDir } from './private-dir.ts'
/** TR_TRACE_EXISTS for a name taken in a store (import checks every name before it writes). */
export { traceExists } from './store-errors.ts'
/** Bytes a store directory takes on disk: the database's files and the piece files. */
export { diskUsage } from './store-files.ts'
export type { BodyManifest, GcReport, RecordingOptions, RecordingOwner, StoredBody, StoreOps, TraceInfo, TraceSummary } from './store-ops.ts'
/** Bodies over INLINE_BODY_MAX are stored (and streamed) as pieces of up to PIECE_SIZE. */
export { INLINE_BODY_MAX, PIECE_SIZE } from './store-ops.ts'
export type { ExportedTrace, TraceFileExchange, TraceFileOptions, TraceFileReadOptions, TraceSource, WrittenTraceFile } from './trace-file.ts'
/** Portable trace files and the format-independent trace digest. */
export {
  DEFAULT_INLINE_LIMIT,
  exportTrace,
  parseTraceFile,
  readTraceFile,
  storedTraceSource,
  TRACE_FILE_FORMAT,
  TraceDigester,
  TraceFileReader,
  traceDigest,
  traceFileBlobDigests,
  traceFileBlobDigestsIn,
  traceFileDigest,
  traceSource,
  withWriteErrors,
  writeTraceFile,
  writeTraceFileFrom,
} from './trace-file.ts'
export type { BodyUse } from './trace-reader.ts'
/** A stored trace opened for lazy, verified reading; the bodies an exchange references, with where each is used. */
export { bodyRefs, TraceReader } from './trace-reader.ts'
export type { StagedTrace, TraceRecording, TraceSelector, TraceStore, TraceUsage } from './trace-store.ts'
