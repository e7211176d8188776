/**
 * OpenAI Chat Completions (and OpenAI-compatible servers: vLLM, Ollama, Groq (`x_groq.usage`), OpenRouter, Azure, ...):
 * the request's messages and tools; the response as JSON, or as `chat.completion.chunk` events
 * reassembled (content deltas joined, tool calls by `index` with their argument fragments joined).
 * Only choice 0 is read (requests with `n` > 1 show their first choice).
 */
import { argumentsOf, chatToolCalls, contentText, toolCall } from './content.ts'
import { arr, index, num, obj, str } from './json-access.ts'
import type { LlmMessage, LlmRequestPart, LlmResponsePart, LlmStreamEvent, LlmUsage } from './llm-types.ts'

/** Reads a Chat Completions request body. */
export function readChatRequest(req: Record<string, unknown>): LlmRequestPart {
  const input: LlmMessage[] = []
  for (const m of arr(req.messages)) {
    const msg = obj(m)
    if (!msg) continue
    const role = str(msg.role) ?? 'unknown'
    const text = contentText(msg.content)
    if (role === 'tool' || role === 'function') {
      const t: LlmMessage = { role: 'tool', text }
      const id = str(msg.tool_call_id)
      if (id !== undefined) t.toolCallId = id
      const name = str(msg.name)
      if (name !== undefined) t.name = name
      input.push(t)
      continue
    }
    const out: LlmMessage = { role, text }
    const calls = chatToolCalls(msg.tool_calls)
    const legacy = obj(msg.function_call)
    if (legacy) calls.push(toolCall(calls.length, undefined, str(legacy.name) ?? '', argumentsOf(legacy.arguments)))
    if (calls.length > 0) out.toolCalls = calls
    input.push(out)
  }
  const tools: string[] = []
  for (const t of arr(req.tools)) {
    const tool = obj(t)
    const name = str(obj(tool?.function)?.name) ?? str(obj(tool?.custom)?.name) ?? str(tool?.name)
    if (name !== undefined) tools.push(name)
  }
  for (const f of arr(req.functions)) {
    const name = str(obj(f)?.name)
    if (name !== undefined) tools.push(name)
  }
  const part: LlmRequestPart = { stream: req.stream === true, tools, input }
  const model = str(req.model)
  if (model !== undefined) part.model = model
  return part
}

/** The choice with index 0 (or the first) of a response or chunk. */
export function firstChoice(body: Record<string, unknown>): { position: number; choice: Record<string, unknown> } | undefined {
  const choices = arr(body.choices)
  let position = choices.findIndex((c) => index(obj(c)?.index) === 0)
  if (position === -1 && choices.length > 0 && obj(choices[0])?.index === undefined) position = 0
  const choice = obj(choices[position])
  return choice ? { position, choice } : undefined
}

/** Reads a non-streamed `chat.completion`. */
export function readChatResponse(body: Record<string, unknown>): LlmResponsePart {
  const part: LlmResponsePart = { outputText: '', reasoning: [], toolCalls: [], complete: true }
  setModelAndUsage(part, body)
  const choice = firstChoice(body)?.choice
  const message = obj(choice?.message)
  if (message) {
    part.outputText = contentText(message.content)
    const reasoning = str(message.reasoning_content) ?? str(message.reasoning)
    if (reasoning) part.reasoning.push(reasoning)
    const refusal = str(message.refusal)
    if (refusal) part.refusal = refusal
    part.toolCalls = chatToolCalls(message.tool_calls)
    const legacy = obj(message.function_call)
    if (legacy) part.toolCalls.push(toolCall(part.toolCalls.length, undefined, str(legacy.name) ?? '', argumentsOf(legacy.arguments)))
  }
  const finish = str(choice?.finish_reason)
  if (finish !== undefined) part.finish = finish
  return part
}

interface CallSlot {
  id?: string
  name: string
  args: string
}

/** Reassembles `chat.completion.chunk` events. */
export function readChatEvents(events: LlmStreamEvent[]): LlmResponsePart {
  const part: LlmResponsePart = { outputText: '', reasoning: [], toolCalls: [], complete: false }
  let text = ''
  let reasoning = ''
  let refusal = ''
  const calls = new Map<number, CallSlot>()
  for (const e of events) {
    if (e.data === '[DONE]') {
      part.complete = true
      continue
    }
    const chunk = obj(e.data)
    if (!chunk) continue
    const error = obj(chunk.error)
    if (error) part.error = str(error.message) ?? 'error event'
    setModelAndUsage(part, chunk)
    const choice = firstChoice(chunk)?.choice
    if (!choice) continue
    const delta = obj(choice.delta)
    if (delta) {
      if (typeof delta.content === 'string') text += delta.content
      const r = str(delta.reasoning_content) ?? str(delta.reasoning)
      if (r !== undefined) reasoning += r
      if (typeof delta.refusal === 'string') refusal += delta.refusal
      arr(delta.tool_calls).forEach((t, position) => {
        const d = obj(t)
        if (!d) return
        const i = index(d.index) ?? position
        const slot = calls.get(i) ?? { name: '', args: '' }
        calls.set(i, slot)
        const id = str(d.id)
        if (id) slot.id = id
        const fn = obj(d.function) ?? obj(d.custom)
        // The SDK replaces the name with each non-empty one it sees; arguments are fragments to join.
        const name = str(fn?.name)
        if (name) slot.name = name
        const args = str(fn?.arguments) ?? str(fn?.input)
        if (args !== undefined) slot.args += args
      })
    }
    const finish = str(choice.finish_reason)
    if (finish !== undefined) {
      part.finish = finish
      part.complete = true
    }
  }
  part.outputText = text
  if (reasoning) part.reasoning.push(reasoning)
  if (refusal) part.refusal = refusal
  part.toolCalls = [...calls.entries()].sort(([a], [b]) => a - b).map(([i, s]) => toolCall(i, s.id, s.name, s.args))
  return part
}

function setModelAndUsage(part: LlmResponsePart, body: Record<string, unknown>): void {
  const model = str(body.model)
  if (model) part.model = model
  // Groq streams its usage in the final chunk's `x_groq.usage` (same fields as `usage`).
  const usage = obj(body.usage) ?? obj(obj(body.x_groq)?.usage)
  if (!usage) return
  const u: LlmUsage = {}
  const set = (k: keyof LlmUsage, v: unknown) => {
    const n = num(v)
    if (n !== undefined) u[k] = n
  }
  set('input', usage.prompt_tokens)
  set('output', usage.completion_tokens)
  set('total', usage.total_tokens)
  set('reasoning', obj(usage.completion_tokens_details)?.reasoning_tokens)
  set('cachedInput', obj(usage.prompt_tokens_details)?.cached_tokens)
  set('cost', usage.cost)
  part.usage = u
}
