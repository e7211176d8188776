/**
 * Anthropic Messages: the request's `system` and `messages` (tool_use / tool_result blocks as tool calls
 * and tool results); the response as a `message` JSON, or reassembled from its events (message_start,
 * content_block_start, content_block_delta with text_delta / input_json_delta / thinking_delta,
 * content_block_stop, message_delta, message_stop; ping ignored).
 */
import { cloneJson } from '../json-codec.ts'
import { contentText, toolCall, toolCallFromValue } from './content.ts'
import { arr, index, num, obj, str } from './json-access.ts'
import type { LlmMessage, LlmRequestPart, LlmResponsePart, LlmStreamEvent, LlmToolCall, LlmUsage } from './llm-types.ts'

/** Reads a Messages request body. */
export function readAnthropicRequest(req: Record<string, unknown>): LlmRequestPart {
  const input: LlmMessage[] = []
  const system = contentText(req.system)
  if (system) input.push({ role: 'system', text: system })
  for (const m of arr(req.messages)) {
    const msg = obj(m)
    if (!msg) continue
    const role = str(msg.role) ?? 'unknown'
    if (typeof msg.content === 'string') {
      input.push({ role, text: msg.content })
      continue
    }
    const texts: unknown[] = []
    const calls: LlmToolCall[] = []
    const results: LlmMessage[] = []
    arr(msg.content).forEach((b, position) => {
      const block = obj(b)
      if (!block) return
      const type = str(block.type)
      if (type === 'tool_use') calls.push(toolCallFromValue(position, str(block.id), str(block.name) ?? '', block.input))
      else if (type === 'tool_result') {
        const r: LlmMessage = { role: 'tool', text: contentText(block.content) }
        const id = str(block.tool_use_id)
        if (id !== undefined) r.toolCallId = id
        if (block.is_error === true) r.isError = true
        results.push(r)
      } else if (type !== 'thinking' && type !== 'redacted_thinking') texts.push(block)
    })
    // Tool results travel in a user message; they are listed as their own "tool" messages, like OpenAI's.
    input.push(...results)
    const text = contentText(texts)
    if (text !== '' || calls.length > 0 || results.length === 0) {
      const out: LlmMessage = { role, text }
      if (calls.length > 0) out.toolCalls = calls
      input.push(out)
    }
  }
  const tools: string[] = []
  for (const t of arr(req.tools)) {
    const name = str(obj(t)?.name)
    if (name !== undefined) tools.push(name)
  }
  const part: LlmRequestPart = { stream: req.stream === true, tools, input }
  const model = str(req.model)
  if (model !== undefined) part.model = model
  return part
}

/** Reads a `message` object (a JSON body, or a stream reassembled into one). */
export function readAnthropicResponse(body: Record<string, unknown>): LlmResponsePart {
  const part: LlmResponsePart = { outputText: '', reasoning: [], toolCalls: [], complete: true }
  const model = str(body.model)
  if (model) part.model = model
  const finish = str(body.stop_reason)
  if (finish !== undefined) part.finish = finish
  const texts: string[] = []
  arr(body.content).forEach((b, position) => {
    const block = obj(b)
    if (!block) return
    const type = str(block.type)
    if (type === 'text') texts.push(str(block.text) ?? '')
    else if (type === 'thinking') {
      const t = str(block.thinking)
      if (t) part.reasoning.push(t)
    } else if (type === 'redacted_thinking') part.reasoning.push('[redacted thinking]')
    else if (type === 'tool_use') part.toolCalls.push(readToolUse(block, position))
  })
  part.outputText = texts.join('')
  const usage = obj(body.usage)
  if (usage) part.usage = readUsage(usage)
  return part
}

function readToolUse(block: Record<string, unknown>, position: number): LlmToolCall {
  // A reassembled stream keeps the joined input_json_delta fragments as sent.
  const partial = str(block[PARTIAL_JSON])
  // No fragments (a tool without arguments) leaves content_block_start's `input`, as the SDK does.
  if (partial !== undefined && partial !== '') return toolCall(position, str(block.id), str(block.name) ?? '', partial)
  return toolCallFromValue(position, str(block.id), str(block.name) ?? '', block.input)
}

// Where reassembly keeps a tool_use block's joined input_json_delta text (never a key of the wire format).
const PARTIAL_JSON = '\u0000partial_json'

function readUsage(usage: Record<string, unknown>): LlmUsage {
  const u: LlmUsage = {}
  const input = num(usage.input_tokens)
  const output = num(usage.output_tokens)
  if (input !== undefined) u.input = input
  if (output !== undefined) u.output = output
  if (input !== undefined && output !== undefined) u.total = input + output
  const cached = num(usage.cache_read_input_tokens)
  if (cached !== undefined) u.cachedInput = cached
  return u
}

/** Reassembles Messages stream events into a message and reads it. */
export function readAnthropicEvents(events: LlmStreamEvent[]): LlmResponsePart {
  let message: Record<string, unknown> = {}
  const blocks = new Map<number, Record<string, unknown>>()
  let usage: Record<string, unknown> = {}
  let complete = false
  let error: string | undefined
  for (const e of events) {
    const data = obj(e.data)
    if (!data) continue
    const type = str(data.type) ?? e.event
    if (type === 'message_start') {
      message = cloneJson(obj(data.message) ?? {})
      usage = { ...(obj(message.usage) ?? {}) }
    } else if (type === 'content_block_start') {
      const i = index(data.index)
      const block = obj(data.content_block)
      if (i !== undefined && block) blocks.set(i, cloneJson(block))
    } else if (type === 'content_block_delta') applyDelta(blocks.get(index(data.index) ?? -1), obj(data.delta))
    else if (type === 'message_delta') {
      const delta = obj(data.delta)
      if (delta && str(delta.stop_reason) !== undefined) message.stop_reason = delta.stop_reason
      // message_delta usage counts are cumulative: they replace message_start's where given.
      for (const [k, v] of Object.entries(obj(data.usage) ?? {})) if (v !== null && v !== undefined) usage[k] = v
    } else if (type === 'message_stop') complete = true
    else if (type === 'error') error = str(obj(data.error)?.message) ?? 'error event'
  }
  const content = [...blocks.entries()].sort(([a], [b]) => a - b).map(([, b]) => b)
  const part = readAnthropicResponse({ ...message, content, usage })
  // Tool calls keep their content block index, the index the stream's events use.
  const indexes = [...blocks.keys()].sort((a, b) => a - b)
  for (const c of part.toolCalls) c.index = indexes[c.index] ?? c.index
  part.complete = complete
  if (error !== undefined) part.error = error
  return part
}

function applyDelta(block: Record<string, unknown> | undefined, delta: Record<string, unknown> | undefined): void {
  if (!block || !delta) return
  const type = str(delta.type)
  if (type === 'text_delta') block.text = (str(block.text) ?? '') + (str(delta.text) ?? '')
  else if (type === 'thinking_delta') block.thinking = (str(block.thinking) ?? '') + (str(delta.thinking) ?? '')
  else if (type === 'input_json_delta') block[PARTIAL_JSON] = (str(block[PARTIAL_JSON]) ?? '') + (str(delta.partial_json) ?? '')
}
