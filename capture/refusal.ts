/**
 * The one response both capture paths give when the engine refuses a request (strict-replay miss or
 * overrun, refused upgrade, closed session, a request the engine could not read). The proxy writes it to
 * the client; the interceptor plays it into fetch. Built here once so both paths behave the same.
 *
 * Why 403 with `x-should-retry: false` and a provider-shaped JSON body: LLM SDKs retry what looks
 * transient, silently, and every retry of a refusal is another refusal. Their retry rules (read in each
 * library's source, current majors):
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
 * So the status must be a 4xx outside 408/409/429 and not 400, 401 or 404: 403, "the server understood the
 * request and refuses it", which is what strict replay does. The body parses as an OpenAI error
 * (`error.message/type/code`, also the AI SDK's OpenAI schema) and as an Anthropic error (`type: "error"`,
 * `error.type/message`, `error.details.error_code`); a top-level `message` makes the Anthropic SDK show the
 * text rather than the JSON. Every library then shows "403 TR_REPLAY_MISS: Failed to replay ...".
 * `x-tool-replay-error: <code>` marks it as ours: no recorded exchange carries it.
 *
 * A request body over the limit (TR_REQUEST_TOO_LARGE) gets 413 instead, on every path: "Content Too
 * Large" says what is wrong, and no library above retries it (LangChain lists it in STATUS_NO_RETRY).
 */

import type { Playback } from '../engine/index.ts'
import { type ErrorCode, ErrorCodes, type HeaderPairs, stringifyJson, type ToolReplayError } from '../trace/index.ts'

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

/**
 * The response a capture path sends for a refused request.
 * @example
 * const r = refusalResponse(decision.error) // 403 "Tool Replay Refused", x-tool-replay-error: TR_REPLAY_MISS
 */
export function refusalResponse(error: ToolReplayError): RefusalResponse {
  const code: ErrorCode = error.code
  const message = `${code}: ${error.message}`
  const body = new TextEncoder().encode(
    stringifyJson({
      type: 'error',
      message,
      error: { type: ERROR_TYPE, code, message, param: null, details: { error_code: code } },
    }),
  )
  return {
    status: code === ErrorCodes.REQUEST_TOO_LARGE ? TOO_LARGE_STATUS : REFUSAL_STATUS,
    statusText: REFUSAL_STATUS_TEXT,
    headers: [
      ['content-type', 'application/json; charset=utf-8'],
      ['content-length', String(body.byteLength)],
      ['x-should-retry', 'false'],
      ['cache-control', 'no-store'],
      [ERROR_HEADER, code],
    ],
    body,
  }
}

/** The refusal as a Playback, for capture paths that play responses (one chunk, no delay). */
export function refusalPlayback(error: ToolReplayError): Playback {
  const r = refusalResponse(error)
  return {
    kind: 'response',
    head: { status: r.status, statusText: r.statusText, headers: r.headers },
    headersMs: 0,
    chunks: [{ bytes: r.body, atMs: 0 }],
    trailers: [],
  }
}
