/**
 * Error responses shaped like the provider's own, so an SDK classifies an injected 429 or 5xx exactly as it
 * would a real one: the openai SDK reads `error.{message,type,param,code}` (RateLimitError, InternalServerError),
 * the Anthropic SDK `{type: "error", error: {type, message}, request_id}` (`err.type` = "rate_limit_error").
 * Both SDKs' retry logic reads `retry-after-ms` first, then `retry-after` (seconds or an HTTP date).
 */
import type { HeaderPairs } from './exchange.ts'

/** Which error body a synthetic 429/5xx carries: the provider's own shape, or a plain one. */
export type ProviderShape = 'openai' | 'anthropic' | 'generic'
export const PROVIDER_SHAPES: readonly ProviderShape[] = ['openai', 'anthropic', 'generic']

/** A response a fault makes up: head and whole body. */
export interface SyntheticResponse {
  status: number
  statusText: string
  headers: HeaderPairs
  body: Uint8Array
}

const STATUS_TEXT: Record<number, string> = {
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
  529: 'Overloaded',
}

/** The provider whose error shape a URL's host calls for: OpenAI (and Azure OpenAI), Anthropic, or generic. */
export function providerFor(url: string): ProviderShape {
  let host: string
  try {
    host = new URL(url).hostname
  } catch {
    return 'generic'
  }
  if (host === 'api.openai.com' || host.endsWith('.openai.azure.com')) return 'openai'
  if (host === 'api.anthropic.com') return 'anthropic'
  return 'generic'
}

const OPENAI: Record<number, { message: string; type: string; code: string | null }> = {
  429: { message: 'Rate limit reached for requests. Please try again later.', type: 'requests', code: 'rate_limit_exceeded' },
  500: { message: 'The server had an error while processing your request. Sorry about that!', type: 'server_error', code: null },
  502: { message: 'Bad gateway.', type: 'server_error', code: null },
  503: { message: 'The server is overloaded or not ready yet.', type: 'server_error', code: null },
  504: { message: 'Gateway timeout.', type: 'server_error', code: null },
  529: { message: 'The server is overloaded or not ready yet.', type: 'server_error', code: null },
}

const ANTHROPIC: Record<number, { type: string; message: string }> = {
  429: { type: 'rate_limit_error', message: 'Number of requests has exceeded your rate limit. Please try again later.' },
  500: { type: 'api_error', message: 'Internal server error' },
  502: { type: 'api_error', message: 'Bad gateway' },
  503: { type: 'api_error', message: 'Service unavailable' },
  504: { type: 'timeout_error', message: 'Request timed out' },
  529: { type: 'overloaded_error', message: 'Overloaded' },
}

/**
 * A provider-shaped error response. `retryAfterMs` adds `retry-after-ms` (exact) and `retry-after` (whole
 * seconds, rounded up, as HTTP requires); `requestId` fills the provider's request-id header and field.
 */
export function providerErrorResponse(
  provider: ProviderShape,
  status: number,
  options: { retryAfterMs?: number; requestId: string; rule: string },
): SyntheticResponse {
  const headers: HeaderPairs = [['content-type', 'application/json']]
  let body: unknown
  if (provider === 'openai') {
    const e = OPENAI[status] ?? { message: 'Unexpected error.', type: 'server_error', code: null }
    body = { error: { message: e.message, type: e.type, param: null, code: e.code } }
    headers.push(['x-request-id', options.requestId])
  } else if (provider === 'anthropic') {
    const e = ANTHROPIC[status] ?? { type: 'api_error', message: 'Internal server error' }
    body = { type: 'error', error: { type: e.type, message: e.message }, request_id: options.requestId }
    headers.push(['request-id', options.requestId])
  } else {
    body = { error: { status, message: STATUS_TEXT[status] ?? 'Error' } }
  }
  if (options.retryAfterMs !== undefined) {
    headers.push(['retry-after', String(Math.ceil(options.retryAfterMs / 1000))], ['retry-after-ms', String(options.retryAfterMs)])
  }
  // Says which rule made this response, for whoever reads the headers while debugging; SDKs ignore it.
  headers.push(['x-tool-replay-fault', options.rule])
  const bytes = new TextEncoder().encode(JSON.stringify(body))
  headers.push(['content-length', String(bytes.byteLength)])
  return { status, statusText: STATUS_TEXT[status] ?? 'Error', headers, body: bytes }
}
