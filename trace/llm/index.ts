/** The LLM view of traces: model turns read in model terms, diffed in those terms, and patched by meaning. Pure. */

export type { LlmDiffDetail, LlmTraceDiff, LlmTraceDifference } from './llm-diff.ts'
export { compareLlmViews, diffTracesLlm, formatLlmDetail, formatLlmDiffText } from './llm-diff.ts'
export { formatModelTurn, formatUsage, INPUT_TEXT_LIMIT, presentLlmView } from './llm-format.ts'
export type { LlmPatchAction, LlmPatchResult } from './llm-patch.ts'
export { applyLlmPatch, canonicalLlmAction, parseLlmPatchAction, validateLlmPatch } from './llm-patch.ts'
export type { LlmApi, LlmMessage, LlmToolCall, LlmToolResult, LlmUsage, LlmView } from './llm-types.ts'
export { LLM_APIS } from './llm-types.ts'
export { llmView } from './llm-view.ts'
export type { LlmPatchTarget } from './patch-plan.ts'
export type { TimelineTurn } from './timeline.ts'
export { formatTimeline, formatTurnLine, llmTimeline, turnOf } from './timeline.ts'
