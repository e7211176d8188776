/**
 * A deterministic stand-in for the model behind OpenAI's Chat Completions API, for the approval agent.
 * It answers like a tool-calling model would: no tool result yet → `check_refund` for the order named in
 * the ticket; after the refund service's answer → `decide_refund` (approve the refundable amount when the
 * ticket reports damage and the policy allows it, otherwise decline).
 *
 * The response is shaped like a recorded api.openai.com answer (e2e/fixtures/openai/
 * chat-completions-nonstream-gpt5nano.json: the same fields, pretty-printed with two spaces, a dated model
 * name); the tool call message follows the `openai` SDK's ChatCompletionMessage type (content null, tool_calls,
 * finish_reason "tool_calls"). Ids are random, as the API's are. No network here: fake-services.ts serves it.
 */
import { randomBytes } from 'node:crypto'

/** What the fake answers: an HTTP status and a JSON body. */
export interface ModelAnswer {
  status: number
  body: string
}

/** The dated model name the API reports for a requested alias. */
const SNAPSHOTS: Record<string, string> = { 'gpt-4.1-mini': 'gpt-4.1-mini-2025-04-14' }

interface ChatMessage {
  role: string
  content?: unknown
  tool_call_id?: string
}

/** Answers one Chat Completions request body (already parsed). */
export function answerChatCompletion(request: Record<string, unknown>): ModelAnswer {
  const model = typeof request.model === 'string' ? request.model : ''
  const snapshot = SNAPSHOTS[model]
  if (!snapshot) return apiError(404, `The model \`${model}\` does not exist or you do not have access to it.`, 'invalid_request_error', 'model_not_found')
  const messages = Array.isArray(request.messages) ? (request.messages as ChatMessage[]) : []
  const tools = Array.isArray(request.tools) ? (request.tools as Array<{ function?: { name?: string } }>).map((t) => t.function?.name) : []
  if (!tools.includes('check_refund') || !tools.includes('decide_refund'))
    return apiError(400, 'This fake model only plays the refund approval agent: offer it check_refund and decide_refund.', 'invalid_request_error', null)
  const ticket = messages.filter((m) => m.role === 'user').at(-1)
  const toolResult = messages.filter((m) => m.role === 'tool').at(-1)
  const ticketText = typeof ticket?.content === 'string' ? ticket.content : ''
  const promptTokens = Math.ceil(JSON.stringify(request).length / 4)
  if (!toolResult) {
    const orderId = /\b[A-Z]-\d+\b/.exec(ticketText)?.[0] ?? 'unknown'
    return completion(snapshot, promptTokens, 'check_refund', { order_id: orderId })
  }
  return completion(snapshot, promptTokens, 'decide_refund', decide(ticketText, typeof toolResult.content === 'string' ? toolResult.content : ''))
}

/** The "model's" judgement: approve what is refundable when the customer reports damage. */
function decide(ticket: string, checkText: string): Record<string, unknown> {
  let check: { refundable_cents?: unknown; policy?: unknown }
  try {
    check = JSON.parse(checkText)
  } catch {
    return { decision: 'decline', amount_usd: 0, reason: 'The refund service gave no usable answer.' }
  }
  const refundable = typeof check.refundable_cents === 'number' ? check.refundable_cents : 0
  if (refundable > 0 && /\b(cracked|broken|damaged)\b/i.test(ticket))
    return { decision: 'approve', amount_usd: refundable / 100, reason: 'Arrived damaged (cracked jar); within the 30-day policy.' }
  return { decision: 'decline', amount_usd: 0, reason: 'Nothing refundable under the policy for this ticket.' }
}

function completion(model: string, promptTokens: number, tool: string, args: Record<string, unknown>): ModelAnswer {
  const argumentsText = JSON.stringify(args)
  const completionTokens = Math.ceil(argumentsText.length / 4) + 8
  const body = {
    id: `chatcmpl-${token(29)}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: `call_${token(24)}`, type: 'function', function: { name: tool, arguments: argumentsText } }],
          refusal: null,
          annotations: [],
        },
        logprobs: null,
        finish_reason: 'tool_calls',
      },
    ],
    usage: {
      prompt_tokens: promptTokens,
      completion_tokens: completionTokens,
      total_tokens: promptTokens + completionTokens,
      prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
    },
    service_tier: 'default',
    system_fingerprint: 'fp_6f2eabb9a5',
  }
  return { status: 200, body: JSON.stringify(body, null, 2) }
}

/** An error body shaped like the API's (see e2e/fixtures/openai/chat-completions-error-400-invalid-image-url.json). */
export function apiError(status: number, message: string, type: string, code: string | null): ModelAnswer {
  return { status, body: JSON.stringify({ error: { message, type, param: null, code } }, null, 2) }
}

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'

function token(length: number): string {
  return Array.from(randomBytes(length), (b) => ALPHABET[b % ALPHABET.length]).join('')
}
