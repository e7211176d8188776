/**
 * Ollama's native API (`POST /api/chat`, `POST /api/generate`, as the `ollama` npm client calls them): the
 * request's messages (or prompt and system), tools and tool results (`role: "tool"`, `tool_name`); the
 * response as one JSON object (`stream: false`) or as NDJSON lines (`application/x-ndjson`, the default),
 * each carrying a piece of `message.content` / `response`, the last one `done: true` with `done_reason` and
 * the token counts (`prompt_eval_count`, `eval_count`). A line `{"error": ...}` is a stream error.
 */
import { argumentsOf, toolCall } from './content.ts'
import { arr, index, num, obj, str } from './json-access.ts'
import type { LlmMessage, LlmRequestPart, LlmResponsePart, LlmStreamEvent, LlmToolCall, LlmUsage } from './llm-types.ts'

function calls(list: unknown, start = 0): LlmToolCall[] {
  const out: LlmToolCall[] = []
  for (const t of arr(list)) {
    const call = obj(t)
    const fn = obj(call?.function)
    if (!fn) continue
    out.push(toolCall(index(fn.index) ?? start + out.length, str(call?.id), str(fn.name) ?? '', argumentsOf(fn.arguments)))
  }
  return out
}

function images(m: Record<string, unknown>): string {
  return arr(m.images)
    .map(() => '[image]')
    .join('\n')
}

/** Reads an `/api/chat` request body. Ollama streams unless `stream` is false. */
export function readOllamaChatRequest(req: Record<string, unknown>): LlmRequestPart {
  const input: LlmMessage[] = []
  for (const m of arr(req.messages)) {
    const msg = obj(m)
    if (!msg) continue
    const role = str(msg.role) ?? 'unknown'
    const text = [str(msg.content) ?? '', images(msg)].filter((t) => t !== '').join('\n')
    const out: LlmMessage = { role, text }
    if (role === 'tool') {
      const name = str(msg.tool_name) ?? str(msg.name)
      if (name !== undefined) out.name = name
      const id = str(msg.tool_call_id)
      if (id !== undefined) out.toolCallId = id
    }
    const list = calls(msg.tool_calls)
    if (list.length > 0) out.toolCalls = list
    input.push(out)
  }
  return { stream: req.stream !== false, tools: toolNames(req.tools), input, ...model(req) }
}

/** Reads an `/api/generate` request body: system (when given) and the prompt. */
export function readOllamaGenerateRequest(req: Record<string, unknown>): LlmRequestPart {
  const input: LlmMessage[] = []
  const system = str(req.system)
  if (system) input.push({ role: 'system', text: system })
  input.push({ role: 'user', text: [str(req.prompt) ?? '', images(req)].filter((t) => t !== '').join('\n') })
  return { stream: req.stream !== false, tools: [], input, ...model(req) }
}

function model(req: Record<string, unknown>): { model?: string } {
  const m = str(req.model)
  return m === undefined ? {} : { model: m }
}

function toolNames(list: unknown): string[] {
  const out: string[] = []
  for (const t of arr(list)) {
    const name = str(obj(obj(t)?.function)?.name)
    if (name !== undefined) out.push(name)
  }
  return out
}

interface Acc {
  part: LlmResponsePart
  text: string
  thinking: string
}

function readLine(acc: Acc, body: Record<string, unknown>): void {
  const { part } = acc
  const error = body.error
  if (error !== undefined) {
    part.error = str(error) ?? str(obj(error)?.message) ?? 'error'
    return
  }
  const m = str(body.model)
  if (m) part.model = m
  const message = obj(body.message)
  acc.text += str(message?.content) ?? str(body.response) ?? ''
  acc.thinking += str(message?.thinking) ?? str(body.thinking) ?? ''
  part.toolCalls.push(...calls(message?.tool_calls, part.toolCalls.length))
  if (body.done === true) {
    part.complete = true
    const reason = str(body.done_reason)
    if (reason !== undefined) part.finish = reason
    const u: LlmUsage = {}
    const input = num(body.prompt_eval_count)
    const output = num(body.eval_count)
    if (input !== undefined) u.input = input
    if (output !== undefined) u.output = output
    if (input !== undefined && output !== undefined) u.total = input + output
    if (Object.keys(u).length > 0) part.usage = u
  }
}

function finish(acc: Acc): LlmResponsePart {
  acc.part.outputText = acc.text
  if (acc.thinking) acc.part.reasoning.push(acc.thinking)
  return acc.part
}

/** Reads a non-streamed `/api/chat` or `/api/generate` response. */
export function readOllamaResponse(body: Record<string, unknown>): LlmResponsePart {
  const acc: Acc = { part: { outputText: '', reasoning: [], toolCalls: [], complete: false }, text: '', thinking: '' }
  readLine(acc, body)
  // A JSON answer is whole even when a gateway left out `done`.
  if (body.done === undefined && body.error === undefined) acc.part.complete = true
  return finish(acc)
}

/** Reassembles NDJSON lines: content pieces joined, tool calls in order, the final line's reason and counts. */
export function readOllamaEvents(events: LlmStreamEvent[]): LlmResponsePart {
  const acc: Acc = { part: { outputText: '', reasoning: [], toolCalls: [], complete: false }, text: '', thinking: '' }
  for (const e of events) {
    const body = obj(e.data)
    if (body) readLine(acc, body)
  }
  return finish(acc)
}
