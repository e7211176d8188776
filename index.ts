/**
 * Tool Replay: record, strictly replay, fork and diff the HTTP exchanges of AI and API-driven apps.
 * The main entry re-exports the pieces most users need from the public entries; subpaths
 * (`tool-replay/interceptor`, ...) hold the rest. What is exported is pinned by e2e/public-surface.test.ts.
 */

export type { Mode, SessionOptions, SessionSummary } from './engine/public.ts'
export { openSession } from './engine/public.ts'
export type { ContractReport, FaultsConfig } from './faults/public.ts'
export { assertContracts, checkContracts, parseFaults, readFaultsFile } from './faults/public.ts'
export type { TraceStore } from './store/public.ts'
export { createMemoryStore } from './store/public.ts'
export type { ErrorCode, Exchange, Trace, TraceMeta } from './trace/public.ts'
export { ErrorCodes, isToolReplayError, ToolReplayError } from './trace/public.ts'
