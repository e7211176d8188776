/**
 * Which model API an exchange speaks, from the request path and the body shapes, never from the host:
 * OpenAI-compatible servers (local or hosted) are read like OpenAI.
 */
import { isConversePath } from './bedrock-converse.ts'
import { geminiModelFromPath } from './gemini.ts'
import { arr, obj, str } from './json-access.ts'
import type { LlmHttpApi, LlmStreamEvent } from './llm-types.ts'

/** The API of a POST with this path, request body and response; undefined when it is none of them. */
export function detectLlmApi(
  path: string,
  req: Record<string, unknown>,
  response: { json?: unknown; events?: LlmStreamEvent[] } | undefined,
): LlmHttpApi | undefined {
  const p = path.replace(/\/+$/, '')
  const hasMessages = Array.isArray(req.messages)
  if (/\/chat\/completions$/.test(p) && hasMessages) return 'openai.chat'
  if (/\/responses$/.test(p) && (req.input !== undefined || typeof req.model === 'string')) return 'openai.responses'
  // Anthropic requires model, messages and max_tokens: all three keep other "/messages" APIs out.
  if (/\/messages$/.test(p) && hasMessages && typeof req.model === 'string' && req.max_tokens !== undefined) return 'anthropic.messages'
  // Gemini and Bedrock name the model in the path; the body must still have the API's shape.
  if (geminiModelFromPath(p) !== undefined && Array.isArray(req.contents)) return 'google.gemini'
  if (isConversePath(p) && (hasMessages || Array.isArray(req.system))) return 'aws.bedrock.converse'
  // Ollama's native paths (any host: it runs locally, in containers, behind gateways).
  if (/\/api\/chat$/.test(p) && hasMessages && typeof req.model === 'string') return 'ollama.chat'
  if (/\/api\/generate$/.test(p) && typeof req.prompt === 'string' && typeof req.model === 'string') return 'ollama.generate'
  // Gateways with their own paths: the response must say which API it is.
  const shape = responseShape(response)
  if (shape === 'openai.chat' && hasMessages) return shape
  if (shape === 'openai.responses' && req.input !== undefined) return shape
  if (shape === 'anthropic.messages' && hasMessages) return shape
  if (shape === 'google.gemini' && Array.isArray(req.contents)) return shape
  if (shape === 'ollama.chat' && hasMessages) return shape
  return undefined
}

function responseShape(response: { json?: unknown; events?: LlmStreamEvent[] } | undefined): LlmHttpApi | undefined {
  if (!response) return undefined
  const body = obj(response.json)
  if (body) {
    if (body.object === 'chat.completion') return 'openai.chat'
    if (body.object === 'response') return 'openai.responses'
    if (body.type === 'message' && body.role === 'assistant' && Array.isArray(body.content)) return 'anthropic.messages'
    if (Array.isArray(body.candidates) && (body.usageMetadata !== undefined || body.modelVersion !== undefined)) return 'google.gemini'
    if (obj(body.message) && typeof body.done === 'boolean' && typeof body.model === 'string') return 'ollama.chat'
    return undefined
  }
  const first = arr(response.events)
    .map((e) => obj((e as LlmStreamEvent).data))
    .find((d) => d !== undefined)
  if (!first) return undefined
  if (first.object === 'chat.completion.chunk') return 'openai.chat'
  const type = str(first.type) ?? ''
  if (type.startsWith('response.')) return 'openai.responses'
  if (type === 'message_start') return 'anthropic.messages'
  if (Array.isArray(first.candidates) && (first.usageMetadata !== undefined || first.modelVersion !== undefined)) return 'google.gemini'
  if (obj(first.message) && typeof first.done === 'boolean' && typeof first.model === 'string') return 'ollama.chat'
  return undefined
}
