/** The trace model and pure operations on it. No I/O. */

// First: every entry point reaches this module, so a Node too old for the library fails here, saying so.
import './node-version.ts'

/** The application's outcome (`meta.app`) for a reader. */
export { formatAppRun, shellLine } from './app-run.ts'
export { BodyAccumulator, bodyBytes, bodyChunk, bodyFromBytes, bodyFromChunks, concatBytes, splitChunks, tryUtf8 } from './body.ts'
export type { AlignedPair, Attribution, DiffDetail, DifferenceKind, DiffOptions, FaultNote, TraceDiff, TraceDifference } from './diff.ts'
export {
  DEFAULT_VOLATILE_HEADERS,
  DEFAULT_VOLATILE_KEYS,
  DIFF_FORMAT_VERSION,
  DIFF_OPTIONS,
  DIFFERENCE_KINDS,
  decodeContentEncoding,
  diffTraces,
  formatDetail,
  formatDiffText,
} from './diff.ts'
export { sha256 } from './digest.ts'
export type { ErrorCode } from './errors.ts'
export { ErrorCodes, isToolReplayError, ToolReplayError } from './errors.ts'
export type { StreamPoint } from './event-stream-cut.ts'
export { cutBody, StreamCutter } from './event-stream-cut.ts'
/** AWS event streams (Bedrock's ConverseStream): frames decoded, CRC-checked, and encoded again. */
export type { DecodedEventStream, EventStreamFrame } from './eventstream.ts'
export { decodeEventStream, encodeEventStreamFrame, encodeEventStreamHeaders, eventStreamFramesAsJson, isAwsEventStream } from './eventstream.ts'
export type {
  AppExit,
  AppRun,
  BodyChunk,
  BodyRef,
  ErrorPhase,
  Exchange,
  ExchangeFault,
  ExchangeOrigin,
  FaultKind,
  FaultPhase,
  HeaderPairs,
  Lineage,
  Outcome,
  OutputTail,
  PatchRecord,
  RecordedError,
  RecordedRequest,
  RecordedResponse,
  ResponseHead,
  Trace,
  TraceMeta,
  WebSocketEnd,
  WebSocketMessage,
  WebSocketOpcode,
  WebSocketSession,
  WebSocketUpstream,
} from './exchange.ts'
export { CLIENT_ABORT_CODE, ERROR_PHASES, FAULT_KINDS, FAULT_PHASES, OUTPUT_TAIL_BYTES, TRACE_FORMAT_VERSION, WEBSOCKET_OPCODES } from './exchange.ts'
/** The fault kinds' defaults, server_error's statuses and the errors failing kinds give (for rules and fork patches). */
export type { WebSocketFaultKind } from './fault-kinds.ts'
export { BEFORE_FORWARD_KINDS, FAULT_DEFAULTS, faultError, SERVER_ERROR_STATUSES, WEBSOCKET_FAULT_CLOSE_CODE, WEBSOCKET_FAULT_KINDS } from './fault-kinds.ts'
export { faultTag, upstreamPhrase } from './fault-label.ts'
export type { DecodedGrpcBody, GrpcMessage, GrpcMessageView } from './grpc-frames.ts'
export { decodeGrpcBody, formatGrpcBody, grpcMessageViews, isGrpcContentType } from './grpc-frames.ts'
export { headerPairsFromRaw, headerValue, stripHopByHop } from './header-pairs.ts'
export type { JsonEdit } from './json-codec.ts'
export {
  canonicalJson,
  cloneJson,
  editJson,
  exactNumber,
  isExactNumber,
  isJsonNumber,
  jsonEqual,
  parseJson,
  sortKeysDeep,
  stringifyJson,
  tryParseJson,
} from './json-codec.ts'
export type { JsonDifference, PathSegment } from './json-path.ts'
export { diffJson, formatJsonPath, jsonPathMatches, parseJsonPath, replaceAtJsonPath, selectJsonPath, setAtJsonPath } from './json-path.ts'
export type { JsonTextComment, JsonTextKey, JsonTextKind, JsonTextReading, JsonTextValue, JsonTextVisitor } from './json-text.ts'
export { readJsonText } from './json-text.ts'
export type { LineReaderOptions, LineWire, LongLine } from './line-reader.ts'
/** Newline-delimited framing of every NDJSON wire: linear, bounded, with its typed error (see line-reader.ts). */
export { LINE_EDGE_BYTES, LineReader, lineTooLong, MAX_SOCKET_LINE_BYTES } from './line-reader.ts'
export type {
  LlmApi,
  LlmDiffDetail,
  LlmMessage,
  LlmPatchAction,
  LlmPatchResult,
  LlmPatchTarget,
  LlmToolCall,
  LlmToolResult,
  LlmTraceDiff,
  LlmTraceDifference,
  LlmUsage,
  LlmView,
  McpDiffDetail,
  McpView,
  TimelineTurn,
} from './llm/index.ts'
export {
  applyLlmPatch,
  canonicalLlmAction,
  compareLlmViews,
  diffTracesLlm,
  formatLlmDetail,
  formatLlmDiffText,
  formatModelTurn,
  formatTimeline,
  formatToolTurn,
  formatTurnLine,
  formatUsage,
  INPUT_TEXT_LIMIT,
  LLM_APIS,
  linkTurn,
  llmTimeline,
  llmView,
  mcpAsk,
  mcpNotes,
  mcpOutcome,
  mcpView,
  parseLlmPatchAction,
  presentLlmView,
  turnOf,
  validateLlmPatch,
} from './llm/index.ts'
export type { McpEvent, McpMessageKind, McpStdioTarget, TranscriptLine } from './mcp-wire.ts'
/** MCP over stdio as exchanges: URLs, headers and the transcript a response body holds (see mcp-wire.ts). */
export {
  EVENT_KEY,
  eventLine,
  isJsonRpcResponse,
  MASKED_ARGUMENT,
  MCP_COMMAND_HEADER,
  MCP_ID_HEADER,
  MCP_MESSAGE_HEADER,
  MCP_PROGRESS_TOKEN_HEADER,
  MCP_SERVER_EXITED,
  MCP_STDIO_SCHEME,
  MCP_TRANSCRIPT_TYPE,
  maskedCommandLine,
  mcpMessageKind,
  mcpStdioUrl,
  PROGRESS_TOKEN,
  parseCommandLine,
  parseMcpStdioUrl,
  readTranscriptLine,
  SERVER_NAME,
  toolErrorTranscript,
  transcriptLines,
} from './mcp-wire.ts'
export type { OptionDeclaration, OptionInput, OptionInputs, OptionTable, OptionValue, OptionValues } from './option-declaration.ts'
export { optionHelp, optionsFromCode, optionsFromFlags, parseOption } from './option-declaration.ts'
export type { ForkOptions, ForkResult, PatchAction, PatchNote, PatchSelector, PatchSpec, ResolvedPatch } from './patch.ts'
export {
  canonicalPatchSpec,
  exchangeLabel,
  forkTrace,
  forkTraceWithNotes,
  occurrenceOf,
  parsePatchSpec,
  patchId,
  resolvePatches,
  resolvePatchFile,
} from './patch.ts'
export type { ProviderShape, SyntheticResponse } from './provider-errors.ts'
export { PROVIDER_SHAPES, providerErrorResponse, providerFor } from './provider-errors.ts'
export type { BodyFingerprint, IdentityOptions, IdentityParts, IdentityRequest, RequestIdentity } from './request-identity.ts'
export {
  ALWAYS_IGNORED_HEADERS,
  computeIdentity,
  describeIdentityDifferences,
  IDENTITY_OPTIONS,
  IDENTITY_RULES,
  identityDistance,
  MULTIPART_BOUNDARY,
  multipartBoundary,
  normalizeUrl,
} from './request-identity.ts'
export type { DriftKind, ExchangeShapeReport, ShapeCompareOptions, ShapeDrift, ShapeSide } from './shape-drift.ts'
/** Drift in shape between a recorded answer and a live one (`tr-proxy drift`). */
export { compareExchangeShapes, formatShapeDrift } from './shape-drift.ts'
export type { SseEvent } from './sse.ts'
export { isEventStream, parseSse, sseEventsAsJson } from './sse.ts'
export { textTable } from './text-table.ts'
export { assertTraceName } from './trace-name.ts'
export type { ExchangeProblem, ValidationContext } from './validate.ts'
export {
  appRunProblem,
  assertValidAppRun,
  assertValidBranch,
  assertValidExchange,
  assertValidTrace,
  exchangeProblem,
  headFitsHttp,
  invalidExchange,
  RECORDED_STATUS_MAX,
  RECORDED_STATUS_MIN,
} from './validate.ts'
export {
  closePayload,
  isSendableCloseCode,
  readClosePayload,
  SWITCHING_PROTOCOLS,
  WEBSOCKET_VOLATILE_KEYS,
  websocketBodyRefs,
  websocketMatchKey,
} from './websocket.ts'
export type { WebSocketFaultPlan } from './websocket-fault-patch.ts'
export { liveWebSocketView, websocketUpstream } from './websocket-fault-patch.ts'
