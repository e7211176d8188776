/** Record and replay sessions: matching, occurrence, strict accounting and redaction. */

export type { LedgerEntry, SessionSummary } from './ledger.ts'
export { formatSummary } from './ledger.ts'
export { toNodeError } from './node-error.ts'
export type { RedactionOptions } from './redaction.ts'
export { DEFAULT_REDACTED_HEADERS, DEFAULT_REDACTED_QUERY_PARAMS, REDACTED, Redactor } from './redaction.ts'
export type { CapturedRequest, Decision, ExchangeRecorder, Mode, Playback, PlaybackChunk, SessionOptions } from './session.ts'
export { MODES, openSession, Session } from './session.ts'
