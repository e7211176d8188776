/**
 * The one response both capture paths give when the engine refuses a request (strict-replay miss or
 * overrun, refused upgrade, closed session, a request the engine could not read). The proxy writes it to
 * the client; the interceptor plays it into fetch or node:http. Built here once so both paths behave the same.
 *
 * Why 403 with `x-should-retry: false`: LLM SDKs retry what looks transient, silently, and every retry of a
 * refusal is another refusal. Their retry rules (read in each library's source, current majors):
 * - openai (openai/openai-node src/client.ts `shouldRetry`) and @anthropic-ai/sdk
 *   (anthropics/anthropic-sdk-typescript src/client.ts `shouldRetry`): `x-should-retry: false` wins over
 *   everything; without it they retry 408, 409, 429 and >= 500. A rejected fetch is a connection error,
 *   also retried (that is why the old rejected fetch and 599 both cost 2 retries and ~1.3 s).
 * - Vercel AI SDK (vercel/ai packages/provider/src/errors/api-call-error.ts `isRetryable`, used by
 *   packages/ai/src/util/retry-with-exponential-backoff.ts): retries 408, 409, 429 and >= 500, and every
 *   failed fetch (packages/provider-utils/src/handle-fetch-error.ts); it ignores `x-should-retry`.
 * - LangChain (langchain-ai/langchainjs libs/langchain-core/src/utils/async_caller.ts
 *   `STATUS_NO_RETRY`): never retries 400-407, 409 (and 413); everything else up to 6 times, with
 *   @langchain/openai turning the openai client's own retries off. libs/providers/langchain-openai
 *   src/utils/client.ts relabels 400 bodies mentioning "tool_calls" (a miss in a tool loop often does)
 *   as INVALID_TOOL_RESULTS, 401 as an authentication and 404 as a model-not-found error.
 * - OpenAI Agents SDK (openai/openai-agents-js packages/agents-openai/src/retryAdvice.ts
 *   `getOpenAIRetryAdvice`, packages/agents-core/src/runner/modelRetry.ts): runner retries only with
 *   `modelSettings.retry`, and then `x-should-retry: false` vetoes; otherwise the openai client's rules above.
 * - @google/genai (googleapis/js-genai src/_api_client.ts `apiCall`, `DEFAULT_RETRY_HTTP_STATUS_CODES`):
 *   retries only with `httpOptions.retryOptions`, and then 408, 429, 500, 502, 503, 504 and rejected fetches
 *   (p-retry); a 403 response is returned to the caller, which throws `ApiError`.
 * - AWS SDK v3 (smithy-lang/smithy-typescript packages/core/src/submodules/retry/middleware-retry/
 *   retryMiddleware.ts `getRetryErrorType`, service-error-classification/service-error-classification.ts):
 *   retries throttling (429, ThrottlingException, ...), transient errors (500, 502, 503, 504, timeouts,
 *   ECONNRESET and other network errors, a corrected clock skew) and nothing else; the deprecated
 *   retry-pre-sra StandardRetryStrategy also retries clock-skew error names, AccessDeniedException among them.
 * - ollama (ollama/ollama-js src/utils.ts): never retries.
 * So the status must be a 4xx outside 408/409/429 and not 400, 401 or 404: 403, "the server understood the
 * request and refuses it", which is what strict replay does.
 *
 * The body follows the error shape the client of the refused API reads (`refusalShape`, from the request's
 * URL): one JSON that parses as an OpenAI error (`error.message/type/code`, also the AI SDK's OpenAI schema)
 * and as an Anthropic error (`type: "error"`, `error.type/message`, `error.details.error_code`; a top-level
 * `message` makes the Anthropic SDK show the text rather than the JSON) by default; Google's
 * `{error: {code, message, status}}` for Gemini and other googleapis paths; AWS's `x-amzn-errortype` header
 * and `{message}` for Bedrock and other amazonaws hosts, with a type in no retry list
 * (`ToolReplayRefusedException`); Ollama's `{error: "..."}`, a string (the ollama client shows `error` as
 * the message: an object became "[object Object]"). Every client then shows "TR_REPLAY_MISS: Failed to
 * replay ...". `x-tool-replay-error: <code>` marks the response as ours: no recorded exchange carries it.
 *
 * A request body over the limit (TR_REQUEST_TOO_LARGE) gets 413 instead, on every path: "Content Too
 * Large" says what is wrong, and no library above retries it (LangChain lists it in STATUS_NO_RETRY).
 */

import { type Playback, Redactor } from '../engine/index.ts'
import { type ErrorCode, ErrorCodes, type HeaderPairs, stringifyJson, ToolReplayError } from '../trace/index.ts'

/** Status of every refusal but an over-large body's (see the module comment for why 403). */
export const REFUSAL_STATUS = 403
/** Status of the refusal of a request body over the limit. */
export const TOO_LARGE_STATUS = 413

/** Reason phrase of every refusal, so a plain HTTP client's status line says who answered. */
export const REFUSAL_STATUS_TEXT = 'Tool Replay Refused'

/** The header naming the Tool Replay error code on every response Tool Replay makes itself. */
export const ERROR_HEADER = 'x-tool-replay-error'

/** A refusal as a response: status, reason phrase, headers and JSON body bytes. */
export interface RefusalResponse {
  status: number
  statusText: string
  headers: HeaderPairs
  body: Uint8Array
}

/** The error `type` in the body: neither an OpenAI nor an Anthropic type, so no SDK maps it to its own meaning. */
const ERROR_TYPE = 'tool_replay_error'

/** The AWS error type of a refusal: modeled by no service, and in no AWS SDK retry list. */
export const AWS_REFUSAL_TYPE = 'ToolReplayRefusedException'

/** Which error shape a refusal takes: the one the refused API's clients read. */
export type RefusalShape = 'openai-anthropic' | 'google' | 'aws' | 'ollama'

/** The refused request's URL, as the engine's errors carry it (`details.request`: `{method, url}` or "METHOD url"). */
function refusedUrl(error: ToolReplayError): string | undefined {
  const request = error.details?.request
  if (typeof request === 'string') return request.split(' ')[1]
  const url = (request as { url?: unknown } | undefined)?.url
  return typeof url === 'string' ? url : undefined
}

/** The error shape for a request URL: Gemini / googleapis, Bedrock / amazonaws, Ollama's native API, else OpenAI + Anthropic. */
export function refusalShape(url: string | undefined): RefusalShape {
  let u: URL
  try {
    u = new URL(url ?? '')
  } catch {
    return 'openai-anthropic'
  }
  const path = u.pathname
  if (/\/models\/[^/]+:[A-Za-z]+$/.test(path) || /(?:^|\.)googleapis\.com$/.test(u.hostname)) return 'google'
  if (/^\/model\/[^/]+\/(?:converse|converse-stream|invoke|invoke-with-response-stream)$/.test(path) || /\.amazonaws\.com(?:\.cn)?$/.test(u.hostname))
    return 'aws'
  if (/^\/api\/(?:chat|generate|embed|embeddings|show|tags|ps|pull|push|create|copy|delete|version)$/.test(path)) return 'ollama'
  return 'openai-anthropic'
}

function refusalBody(shape: RefusalShape, code: ErrorCode, message: string): unknown {
  switch (shape) {
    case 'google':
      return {
        error: {
          code: REFUSAL_STATUS,
          message,
          status: 'PERMISSION_DENIED',
          details: [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: code, domain: 'tool-replay' }],
        },
      }
    case 'aws':
      return { __type: AWS_REFUSAL_TYPE, message }
    case 'ollama':
      return { error: message }
    default:
      return { type: 'error', message, error: { type: ERROR_TYPE, code, message, param: null, details: { error_code: code } } }
  }
}

/**
 * The response a capture path sends for a refused request, in the error shape its API's clients read.
 * @example
 * const r = refusalResponse(decision.error) // 403 "Tool Replay Refused", x-tool-replay-error: TR_REPLAY_MISS
 */
export function refusalResponse(error: ToolReplayError, requestHeaders?: HeaderPairs): RefusalResponse {
  const code: ErrorCode = error.code
  const message = `${code}: ${error.message}`
  if (requestHeaders && isGrpc(requestHeaders)) return grpcRefusal(code, message)
  const shape = refusalShape(refusedUrl(error))
  const body = new TextEncoder().encode(stringifyJson(refusalBody(shape, code, message)))
  const headers: HeaderPairs = [
    ['content-type', 'application/json; charset=utf-8'],
    ['content-length', String(body.byteLength)],
    ['x-should-retry', 'false'],
    ['cache-control', 'no-store'],
    [ERROR_HEADER, code],
  ]
  if (shape === 'aws') headers.push(['x-amzn-errortype', AWS_REFUSAL_TYPE])
  return { status: code === ErrorCodes.REQUEST_TOO_LARGE ? TOO_LARGE_STATUS : REFUSAL_STATUS, statusText: REFUSAL_STATUS_TEXT, headers, body }
}

/**
 * The refusal as a Playback, for capture paths that play responses (one chunk, no delay); `requestHeaders`
 * says which shape a client reads (a gRPC call gets a gRPC status).
 */
export function refusalPlayback(error: ToolReplayError, requestHeaders?: HeaderPairs): Playback {
  const r = refusalResponse(error, requestHeaders)
  return {
    kind: 'response',
    head: { status: r.status, statusText: r.statusText, headers: r.headers },
    headersMs: 0,
    chunks: r.body.byteLength > 0 ? [{ bytes: r.body, atMs: 0 }] : [],
    trailers: [],
  }
}

/** gRPC's status for a refusal: PERMISSION_DENIED, the status gRPC maps HTTP 403 to, retried by no gRPC client. */
export const GRPC_REFUSAL_STATUS = 7

function isGrpc(headers: HeaderPairs): boolean {
  return headers.some(([k, v]) => k.toLowerCase() === 'content-type' && /^application\/grpc(?:[+;]|$)/i.test(v.trim()))
}

/**
 * A refused gRPC call: a Trailers-Only answer (HTTP 200, the status in the head, no body), as gRPC servers
 * fail a call, so the client reports `PERMISSION_DENIED` with the refusal's message instead of an HTTP status.
 */
function grpcRefusal(code: ErrorCode, message: string): RefusalResponse {
  return {
    status: 200,
    statusText: '',
    headers: [
      ['content-type', 'application/grpc'],
      ['grpc-status', String(GRPC_REFUSAL_STATUS)],
      ['grpc-message', grpcMessage(message)],
      [ERROR_HEADER, code],
    ],
    body: new Uint8Array(0),
  }
}

/** A grpc-message value: UTF-8, percent-encoded outside printable ASCII and for '%' (gRPC over HTTP/2 spec). */
export function grpcMessage(text: string): string {
  let out = ''
  for (const byte of new TextEncoder().encode(text)) {
    out += byte >= 0x20 && byte <= 0x7e && byte !== 0x25 ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`
  }
  return out
}

/**
 * A request that came after a strict replay's end-of-file judgement: node:test runs a file's `after()` hooks
 * in the order they were registered, so the setup's (registered first) judges before the file's own hooks run,
 * and a timer can outlive the tests. Such a request is refused, never sent: this prints why, marks the process
 * failed (so a run whose app swallows the refusal still fails) and returns the error the refusal carries.
 */
export function lateRequestRefusal(trace: string, method: string, url: string): ToolReplayError {
  const label = `${method} ${new Redactor().url(url)}`
  const error = new ToolReplayError(
    ErrorCodes.REPLAY_MISS,
    `Failed to replay "${label}": it came after the end-of-file judgement of trace "${trace}" (from an after() hook of the test file, which node:test runs after the setup's, or a timer that outlived the tests). Strict replay never lets a request through: make it inside a test or a beforeEach/afterEach hook.`,
    { details: { request: { method, url: new Redactor().url(url) }, trace } },
  )
  process.stderr.write(`tool-replay: ${error.code} ${label}: refused, it came after trace "${trace}" was judged at the end of the test file.\n`)
  process.exitCode = 1
  return error
}
