/** The API's shapes as the page reads them: the server's own types (type-only imports, erased from the bundle). */
export type { AppRun, LlmToolCall as ToolCall, LlmView, McpView } from '../../trace/index.ts'
export type { BodyView, ExchangeView, ResponseView } from '../exchange-view.ts'
export type { RunSummary, WaterfallBar } from '../run-summary.ts'
export type { RunAgainst, RunListing as Run, RunStats, TimelineRow as Row } from '../run-view.ts'
export type { ReplayVerdict } from '../verdict.ts'
export type { WebSocketFrameView, WebSocketSessionRow, WebSocketView } from '../websocket-session.ts'
