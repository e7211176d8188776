/** The LLM view of traces: model turns read in model terms, diffed in those terms, and patched by meaning. Pure. */

/** The LLM layer of a diff: differences on model turns re-read in model terms. */
export type { LlmDiffDetail, LlmTraceDiff, LlmTraceDifference } from './llm-diff.ts'
export { compareLlmViews, diffTracesLlm, formatLlmDetail, formatLlmDiffText } from './llm-diff.ts'
/** One model turn for a reader, and a bounded copy of a view for JSON output. */
export { formatModelTurn, formatUsage, INPUT_TEXT_LIMIT, presentLlmView } from './llm-format.ts'
/** Fork by meaning: `llm.*` patch actions (trace/patch.ts parses, validates and applies them through these). */
export type { LlmPatchAction, LlmPatchResult } from './llm-patch.ts'
export { applyLlmPatch, canonicalLlmAction, parseLlmPatchAction, validateLlmPatch } from './llm-patch.ts'
/** The LLM view of one exchange. */
export type { LlmApi, LlmMessage, LlmToolCall, LlmToolResult, LlmUsage, LlmView } from './llm-types.ts'
export { LLM_APIS } from './llm-types.ts'
export { llmView } from './llm-view.ts'
/** MCP messages (stdio and Streamable HTTP) read in tool terms. */
export type { McpDiffDetail, McpView } from './mcp.ts'
export { compareMcpViews, formatToolTurn, mcpAsk, mcpNotes, mcpOutcome, mcpView } from './mcp.ts'
export type { LlmPatchTarget } from './patch-plan.ts'
/** A trace as a timeline of turns. */
export type { TimelineTurn } from './timeline.ts'
export { formatTimeline, formatTurnLine, linkTurn, llmTimeline, turnOf } from './timeline.ts'
