/**
 * `llmView(trace, exchange)`: an exchange read as a model call (model, messages in, output text,
 * reasoning, tool calls, tool results sent back, finish, usage, SDK retry attempt), or undefined when it
 * is not one Tool Replay can read. Never throws: an unknown or damaged shape falls back to the HTTP view.
 * @example
 * const v = llmView(trace, trace.exchanges[3])
 * if (v) console.log(v.model, v.outputText, v.toolCalls.map((c) => c.name))
 */
import type { Exchange, HeaderPairs, Trace } from '../exchange.ts'
import { headerValue } from '../header-pairs.ts'
import { readAnthropicEvents, readAnthropicRequest, readAnthropicResponse } from './anthropic-messages.ts'
import { readConverseEvents, readConverseRequest, readConverseResponse } from './bedrock-converse.ts'
import { trailingToolResults } from './content.ts'
import { detectLlmApi } from './detect.ts'
import { decodedResponse, requestJson } from './exchange-bodies.ts'
import { readGeminiEvents, readGeminiRequest, readGeminiResponse } from './gemini.ts'
import { markHandoffs } from './handoff.ts'
import { obj, str } from './json-access.ts'
import type { LlmHttpApi, LlmRequestPart, LlmResponsePart, LlmStreamEvent, LlmView } from './llm-types.ts'
import { readOllamaChatRequest, readOllamaEvents, readOllamaGenerateRequest, readOllamaResponse } from './ollama.ts'
import { readChatEvents, readChatRequest, readChatResponse } from './openai-chat.ts'
import { isRealtimeSession, readRealtimeSession, realtimeEvents } from './openai-realtime.ts'
import { readResponsesEvents, readResponsesRequest, readResponsesResponse } from './openai-responses.ts'

interface Reader {
  /** Reads the request body; `path` is the URL path (Gemini and Bedrock name the model there). */
  request(req: Record<string, unknown>, path: string): LlmRequestPart
  json(body: Record<string, unknown>): LlmResponsePart
  events(events: LlmStreamEvent[]): LlmResponsePart
}

const READERS: Record<LlmHttpApi, Reader> = {
  'openai.chat': { request: readChatRequest, json: readChatResponse, events: readChatEvents },
  'openai.responses': { request: readResponsesRequest, json: readResponsesResponse, events: readResponsesEvents },
  'anthropic.messages': { request: readAnthropicRequest, json: readAnthropicResponse, events: readAnthropicEvents },
  'google.gemini': { request: readGeminiRequest, json: readGeminiResponse, events: readGeminiEvents },
  'aws.bedrock.converse': { request: readConverseRequest, json: readConverseResponse, events: readConverseEvents },
  'ollama.chat': { request: readOllamaChatRequest, json: readOllamaResponse, events: readOllamaEvents },
  'ollama.generate': { request: readOllamaGenerateRequest, json: readOllamaResponse, events: readOllamaEvents },
}

/** The LLM view of an exchange, or undefined when it is not a model call Tool Replay reads. Never throws. */
export function llmView(trace: Pick<Trace, 'bodies' | 'meta'>, x: Exchange): LlmView | undefined {
  try {
    return readLlmView(trace, x)
  } catch {
    // Defense in depth: the readers do not throw (a fuzz test holds them to it), but a shape nobody foresaw
    // must still never break show, diff or fork.
    return undefined
  }
}

/** `llmView` without the safety net, for the fuzz test that proves the readers themselves never throw. */
export function readLlmView(trace: Pick<Trace, 'bodies' | 'meta'>, x: Exchange): LlmView | undefined {
  if (x.websocket) return realtimeView(trace, x)
  if (x.request.method.toUpperCase() !== 'POST') return undefined
  const req = requestJson(trace, x)
  if (!req) return undefined
  const response = decodedResponse(trace, x)
  const path = pathOf(x.request.url)
  const api = detectLlmApi(path, req, response)
  if (!api) return undefined
  const reader = READERS[api]
  const rq = reader.request(req, path)
  const view: LlmView = {
    api,
    stream: rq.stream || response?.events !== undefined,
    tools: rq.tools,
    input: rq.input,
    toolResults: trailingToolResults(rq.input),
    outputText: '',
    reasoning: [],
    toolCalls: [],
  }
  if (rq.model !== undefined) {
    view.requestModel = rq.model
    view.model = rq.model
  }
  const attempt = attemptOf(x)
  if (attempt !== undefined) view.attempt = attempt
  if (response) view.status = response.head.status
  if (x.outcome.kind === 'error') view.error = `${x.outcome.error.code} during ${x.outcome.error.phase}`
  if (response && response.head.status >= 400) {
    view.error =
      errorMessage(response.json, response.head.headers) ?? `HTTP ${response.head.status}${response.head.statusText ? ` ${response.head.statusText}` : ''}`
    return view
  }
  let rs: LlmResponsePart | undefined
  if (response?.events) {
    rs = reader.events(response.events)
    view.events = response.events.length
  } else if (obj(response?.json)) rs = reader.json(obj(response?.json) as Record<string, unknown>)
  if (rs) mergeResponse(view, rs)
  if (x.outcome.kind === 'error' && view.stream) view.incomplete = true
  markHandoffs(view, req)
  return view
}

/** A WebSocket session read as an OpenAI Realtime session, or undefined when it speaks something else. */
function realtimeView(trace: Pick<Trace, 'bodies' | 'meta'>, x: Exchange): LlmView | undefined {
  const events = realtimeEvents(trace, x)
  if (!isRealtimeSession(x.request.url, events)) return undefined
  const view = readRealtimeSession(x.request.url, events)
  if (x.outcome.kind === 'response') view.status = x.outcome.response.status
  else view.error = `${x.outcome.error.code} during ${x.outcome.error.phase}`
  const end = x.websocket?.end
  // A session cut mid-response: the open response is already marked incomplete; say how the connection ended.
  if (end && view.incomplete) view.error ??= `${end.code}: ${end.message}`
  return view
}

/** The SDK's retry attempt: `x-stainless-retry-count: N` (openai, anthropic) or `amz-sdk-request: attempt=N+1` (AWS). */
function attemptOf(x: Exchange): number | undefined {
  const stainless = headerValue(x.request.headers, 'x-stainless-retry-count')
  const aws = /\battempt=(\d+)/.exec(headerValue(x.request.headers, 'amz-sdk-request') ?? '')?.[1]
  const n = stainless !== undefined ? Number(stainless) : aws !== undefined ? Number(aws) - 1 : undefined
  return n !== undefined && Number.isSafeInteger(n) && n >= 0 ? n : undefined
}

function mergeResponse(view: LlmView, rs: LlmResponsePart): void {
  if (rs.model !== undefined) view.model = rs.model
  view.outputText = rs.outputText
  view.reasoning = rs.reasoning
  view.toolCalls = rs.toolCalls
  if (rs.refusal !== undefined) view.refusal = rs.refusal
  if (rs.finish !== undefined) view.finish = rs.finish
  if (rs.finishDetail !== undefined) view.finishDetail = rs.finishDetail
  if (rs.usage !== undefined) view.usage = rs.usage
  if (rs.error !== undefined) view.error = rs.error
  if (!rs.complete) view.incomplete = true
}

/**
 * The message of an error body: OpenAI `{error: {message, code}}`, Anthropic `{type: "error", error: {type,
 * message}}`, Google `{error: {code: 403, message, status}}`, AWS `{message}` (`__type`), Ollama `{error: "..."}`.
 */
function errorMessage(json: unknown, headers: HeaderPairs): string | undefined {
  const body = obj(json)
  const error = obj(body?.error)
  if (!error) {
    const message = str(body?.message) ?? str(body?.Message) ?? str(body?.error)
    const name = awsErrorName(headerValue(headers, 'x-amzn-errortype') ?? str(body?.__type))
    return message !== undefined && name ? `${name}: ${message}` : message
  }
  const message = str(error.message)
  const code = str(error.code) ?? str(error.status) ?? str(error.type)
  if (message && code) return `${code}: ${message}`
  return message ?? code
}

/** "AccessDeniedException" from `AccessDeniedException:http://...` or `com.amazon.coral#AccessDeniedException`. */
function awsErrorName(type: string | undefined): string | undefined {
  const name = type?.split(':')[0]
  return name?.slice(name.indexOf('#') + 1) || undefined
}

function pathOf(url: string): string {
  try {
    return new URL(url).pathname
  } catch {
    return ''
  }
}
