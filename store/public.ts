/**
 * `tool-replay/store`, the public entry: open the LevelDB store or an in-memory one, and read, write and
 * export portable trace files. The folder's door for sibling folders is `./index.ts`; what is exported here
 * is a decision, pinned by e2e/public-surface.test.ts.
 */

export type { Durability, ExportedTrace, GcReport, OpenStoreOptions, TraceFileOptions, TraceSelector, TraceStore, TraceSummary, TraceUsage } from './index.ts'
export { createMemoryStore, defaultStoreDir, exportTrace, openStore, parseTraceFile, readTraceFile, traceDigest, writeTraceFile } from './index.ts'
