/**
 * Record and replay sessions: matching, occurrence, the ledger and strict accounting, redaction, drift plans;
 * the session's fault host (fault-host/: applies the faults/ floor's decisions to a session's exchanges);
 * the session shared with child processes (and the variable that marks a command run behind tr-proxy).
 */

export type { Ticket } from './arrival-order.ts'
export { ArrivalOrder, DEFAULT_ARRIVAL_WAIT_MS } from './arrival-order.ts'
export type { CapturedRequest, ConnectionRequest, Decision, ExchangeRecorder, Playback, PlaybackChunk, PlaybackChunks } from './decision.ts'
export type { DriftPlanOptions, DriftRequestKind, PlannedExchange } from './drift-plan.ts'
/** What `tr-proxy drift` re-sends (safe methods; model calls and others when asked), and the trace `--update` writes. */
export { driftUpdatedTrace, planDrift } from './drift-plan.ts'
export type { DriftedExchange, DriftReport, LiveAnswers, TraceDriftReport } from './drift-report.ts'
/** The drift report: per exchange, the live answer's changes in shape or why it was not re-sent; JSON and text. */
export { DRIFT_FORMAT_VERSION, driftReport, formatDriftText, traceDriftReport } from './drift-report.ts'
export type { FaultVerdict } from './fault-host/fault-verdict.ts'
export { faultVerdict, faultVerdictError, formatFaultVerdict } from './fault-host/fault-verdict.ts'
export type { FaultClock, FaultsInput, SessionFaultsOptions } from './fault-host/session-faults.ts'
export { loadSessionFaults, SessionFaults } from './fault-host/session-faults.ts'
export type { LedgerEntry, SessionSummary } from './ledger.ts'
export { formatSummary } from './ledger.ts'
export type { McpDriftOptions, McpResend } from './mcp-drift-plan.ts'
/** How drift re-sends MCP messages: stdio servers re-spawned when asked, fresh Streamable HTTP sessions. */
export { MCP_SAFE_METHODS, McpHttpSessions, mcpStdioReplies } from './mcp-drift-plan.ts'
export { openSession } from './open-session.ts'
export type { RedactionOptions } from './redaction.ts'
export { DEFAULT_REDACTED_HEADERS, DEFAULT_REDACTED_QUERY_PARAMS, REDACTED, REDACTION_OPTIONS, Redactor } from './redaction.ts'
export type { ConfigSource, ToolReplayConfig } from './redaction-config.ts'
export { CONFIG_OPTIONS, DEFAULT_CONFIG_FILE, loadConfig, mergeRedaction, parseConfig } from './redaction-config.ts'
export type { ScanOptions, SecretFinding, SecretKind } from './secret-scan.ts'
export { maskSecret, scanDocument, scanTrace } from './secret-scan.ts'
export { Session } from './session.ts'
export type { Mode, SessionOptions } from './session-options.ts'
export { MODES, SESSION_OPTIONS } from './session-options.ts'
export type { RemoteSession, SharedSessionHost } from './session-share.ts'
/** A session shared with child processes (the `tr-proxy mcp` wrapper an app's MCP client spawns), and finding one. */
export { connectSharedSession, findSharedSession, PROXY_RUN_ENV, SESSION_SOCKET_ENV, sharedSessionDir, shareSession } from './session-share.ts'
/** Credentials in free text (a command's output and command line) replaced by [REDACTED]. */
export { redactText, secretEnvValues } from './text-redaction.ts'
export type { RedactedTrace } from './trace-redaction.ts'
export { redactTrace } from './trace-redaction.ts'
export { CLIENT_ABORT_CODE, clientAbortError, DEFAULT_MAX_BODY_BYTES, parseMaxBodyBytes } from './transport-rules.ts'
export type { WebSocketDecision } from './websocket-decision.ts'
export type { WebSocketRecorder } from './websocket-recorder.ts'
export type { ClientTurn, PlayedMessage, Scheduled, WebSocketPlayback } from './websocket-replay.ts'
/** Replaying a WebSocket session: the conversation that answers each client message, and the close code of a miss. */
export { MISS_CLOSE_CODE, WebSocketConversation } from './websocket-replay.ts'
