/** Persistence: the LevelDB store, the in-memory store and portable trace files. */

export { createMemoryStore } from './memory-store.ts'
export type { OpenStoreOptions } from './level-store.ts'
export { defaultStoreDir, openStore, storeSocketPath } from './level-store.ts'
export type { TraceRecording, TraceStore, TraceSummary } from './trace-store.ts'
