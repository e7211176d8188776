/**
 * Tool Replay: record, strictly replay, fork and diff the HTTP exchanges of AI and API-driven apps.
 * The main entry re-exports the pieces most users need; subpaths (`tool-replay/interceptor`, ...) hold the rest.
 */

export type { ContractReport, FaultsConfig, Mode, SessionOptions, SessionSummary } from './engine/index.ts'
export { assertContracts, checkContracts, openSession, parseFaults, readFaultsFile } from './engine/index.ts'
export type { TraceStore } from './store/index.ts'
export { createMemoryStore } from './store/index.ts'
export type { ErrorCode, Exchange, Trace, TraceMeta } from './trace/index.ts'
export { ErrorCodes, isToolReplayError, ToolReplayError } from './trace/index.ts'
