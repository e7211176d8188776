/**
 * The LLM view of one exchange: what a model call said, in the terms of the model API rather than of
 * HTTP. Pure data, built by `llmView` from a recorded exchange; `undefined` where an exchange is not a
 * model call Tool Replay can read.
 */

/** The model APIs Tool Replay reads. OpenAI-compatible servers at any host count as the OpenAI APIs. */
export type LlmApi =
  | 'openai.chat'
  | 'openai.responses'
  | 'openai.realtime'
  | 'anthropic.messages'
  | 'google.gemini'
  | 'aws.bedrock.converse'
  | 'ollama.chat'
  | 'ollama.generate'

/** The APIs whose calls are one HTTP request and its response (every one but OpenAI Realtime, a WebSocket session). */
export type LlmHttpApi = Exclude<LlmApi, 'openai.realtime'>

/** Every API the LLM view reads, in the order detection tries them. */
export const LLM_APIS: readonly LlmApi[] = [
  'openai.chat',
  'openai.responses',
  'openai.realtime',
  'anthropic.messages',
  'google.gemini',
  'aws.bedrock.converse',
  'ollama.chat',
  'ollama.generate',
]

/** A tool call the model asked for (or that a request carries as history). */
export interface LlmToolCall {
  /** The position the wire format gives it: Chat `tool_calls[].index`, Responses `output_index`, Anthropic content block index. */
  index: number
  id?: string
  name: string
  /** The arguments parsed as JSON; undefined when `argumentsText` is not JSON (a model can emit broken JSON). */
  arguments: unknown
  /** The arguments exactly as sent (streamed deltas joined). */
  argumentsText: string
  /** False when the arguments text is not valid JSON. */
  argumentsValid: boolean
  /** For a handoff (OpenAI Agents SDK `transfer_to_*` tool): the agent it hands the run to. */
  handoff?: string
}

/** One input message: role and its text (non-text parts as placeholders such as "[image]"). */
export interface LlmMessage {
  role: string
  text: string
  /** Tool calls an assistant message of the history carries. */
  toolCalls?: LlmToolCall[]
  /** For a tool result: the call it answers. */
  toolCallId?: string
  /** For a tool result: the tool's name, when the request (or the trace) says which call it answers. */
  name?: string
  /** For a tool result the app marked as failed (Anthropic `is_error`, Bedrock `status: "error"`). */
  isError?: boolean
  /** For a tool result that completes a handoff (`{"assistant": NAME}`): the agent that takes over. */
  handoff?: string
  /** Set by `presentLlmView` when `text` was shortened: the original length. */
  truncatedFrom?: number
}

/** A tool result the request sends back to the model (the answer to the previous turn's tool call). */
export interface LlmToolResult {
  callId: string
  name?: string
  output: string
  isError?: boolean
  /** The agent a handoff hands the run to (OpenAI Agents SDK: the tool output `{"assistant": NAME}`). */
  handoff?: string
  /** Set by `presentLlmView` when `output` was shortened: the original length. */
  truncatedFrom?: number
}

/** Token counts as the API reported them. */
export interface LlmUsage {
  input?: number
  output?: number
  total?: number
  reasoning?: number
  cachedInput?: number
  /** The call's cost as the provider's usage reports it (OpenRouter's `usage.cost`, in its credits); never computed. */
  cost?: number
}

/** The LLM view of one exchange. */
export interface LlmView {
  api: LlmApi
  /** True when the response was (asked to be) an event stream. */
  stream: boolean
  /** The model that answered (from the response), else the one asked for. */
  model?: string
  /** The model the request asked for. */
  requestModel?: string
  /** Tool names the request offered the model. */
  tools: string[]
  /** The request's messages, system/instructions first, tool results as role "tool". */
  input: LlmMessage[]
  /** Tool results this request sends back: the tool messages after the last assistant turn. */
  toolResults: LlmToolResult[]
  /** All output text, joined (streams reassembled from their deltas). */
  outputText: string
  /** Reasoning summaries / thinking text the API returned, one entry per part. */
  reasoning: string[]
  /** Tool calls the model made, in output order. */
  toolCalls: LlmToolCall[]
  refusal?: string
  /** Why the model stopped: Chat `finish_reason`, Responses `status`, Anthropic `stop_reason`. */
  finish?: string
  /** Responses `incomplete_details.reason` (e.g. "max_output_tokens"). */
  finishDetail?: string
  usage?: LlmUsage
  /** The SDK's retry attempt (`x-stainless-retry-count`, or the AWS SDK's `amz-sdk-request: attempt=N`; 0 is the first try). */
  attempt?: number
  /** HTTP status of the response (absent for a network error). */
  status?: number
  /** The provider's error message, or the network error, when the call failed. */
  error?: string
  /** True when a stream ended before its final event (cut, aborted, or a recorded error). */
  incomplete?: boolean
  /** Number of events of a streamed response. */
  events?: number
  /** Bytes of audio the model streamed (base64 decoded): counted, never held in the view. */
  audioBytes?: number
  /**
   * An OpenAI Realtime session (one WebSocket exchange): each model response as its own view, in order, with the
   * input items the client added since the previous response as its `input` (tool results among them). The
   * session's own view sums them: every input item, every tool call, all output text (one line per response).
   */
  responses?: LlmView[]
}

/** What a request says, per API. */
export interface LlmRequestPart {
  model?: string
  stream: boolean
  tools: string[]
  input: LlmMessage[]
}

/** What a response says, per API. */
export interface LlmResponsePart {
  model?: string
  outputText: string
  reasoning: string[]
  toolCalls: LlmToolCall[]
  refusal?: string
  finish?: string
  finishDetail?: string
  usage?: LlmUsage
  /** False when a stream lacks its final event. */
  complete: boolean
  error?: string
}

/** One stream event: its `event:` name (an AWS event stream's `:event-type`) and its data, parsed as JSON where it is JSON. */
export interface LlmStreamEvent {
  event?: string
  /** An AWS event stream exception frame (`:message-type: exception`; `event` is its `:exception-type`). */
  exception?: boolean
  data: unknown
}
