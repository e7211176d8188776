/**
 * OpenAI Responses API: the request's `instructions` and `input` items; the response object as JSON,
 * or reassembled from its `response.*` events (items by `output_index`, text and argument deltas joined,
 * reasoning summaries by `summary_index`); the final `response.completed` / `.incomplete` / `.failed`
 * snapshot wins where the stream has one.
 */
import { cloneJson } from '../json-codec.ts'
import { argumentsOf, contentText, toolCall } from './content.ts'
import { arr, index, num, obj, str } from './json-access.ts'
import type { LlmMessage, LlmRequestPart, LlmResponsePart, LlmStreamEvent, LlmToolCall, LlmUsage } from './llm-types.ts'

/** Reads a Responses request body. */
export function readResponsesRequest(req: Record<string, unknown>): LlmRequestPart {
  const input: LlmMessage[] = []
  const instructions = str(req.instructions)
  if (instructions) input.push({ role: 'system', text: instructions })
  if (typeof req.input === 'string') input.push({ role: 'user', text: req.input })
  else {
    arr(req.input).forEach((it, position) => {
      const item = obj(it)
      if (item) input.push(inputItem(item, position))
    })
  }
  const tools: string[] = []
  for (const t of arr(req.tools)) {
    const tool = obj(t)
    const name = str(tool?.name) ?? str(tool?.type)
    if (name !== undefined) tools.push(name)
  }
  const part: LlmRequestPart = { stream: req.stream === true, tools, input }
  const model = str(req.model)
  if (model !== undefined) part.model = model
  return part
}

function inputItem(item: Record<string, unknown>, position: number): LlmMessage {
  const type = str(item.type)
  if (type === 'function_call' || type === 'custom_tool_call') {
    const args = type === 'function_call' ? argumentsOf(item.arguments) : (str(item.input) ?? '')
    return { role: 'assistant', text: '', toolCalls: [toolCall(position, str(item.call_id), str(item.name) ?? '', args)] }
  }
  if (type === 'function_call_output' || type === 'custom_tool_call_output') {
    const m: LlmMessage = { role: 'tool', text: contentText(item.output) }
    const id = str(item.call_id)
    if (id !== undefined) m.toolCallId = id
    return m
  }
  if (type === undefined || type === 'message') return { role: str(item.role) ?? 'user', text: contentText(item.content) }
  // Reasoning items, item references, hosted tool calls: named by type, with whatever text they carry.
  return { role: type, text: contentText(item.summary ?? item.content) }
}

/** Reads a response object (`object: "response"`), from a JSON body or a stream's final snapshot. */
export function readResponsesResponse(body: Record<string, unknown>): LlmResponsePart {
  const part: LlmResponsePart = { outputText: '', reasoning: [], toolCalls: [], complete: true }
  const model = str(body.model)
  if (model) part.model = model
  const status = str(body.status)
  if (status !== undefined) part.finish = status
  const reason = str(obj(body.incomplete_details)?.reason)
  if (reason !== undefined) part.finishDetail = reason
  const error = obj(body.error)
  if (error) part.error = str(error.message) ?? str(error.code) ?? 'failed'
  readOutput(part, arr(body.output))
  const usage = obj(body.usage)
  if (usage) part.usage = readUsage(usage)
  return part
}

function readOutput(part: LlmResponsePart, output: unknown[]): void {
  const texts: string[] = []
  const refusals: string[] = []
  output.forEach((it, position) => {
    const item = obj(it)
    if (!item) return
    const type = str(item.type)
    if (type === 'message') {
      for (const c of arr(item.content)) {
        const content = obj(c)
        if (str(content?.type) === 'output_text') texts.push(str(content?.text) ?? '')
        else if (str(content?.type) === 'refusal') refusals.push(str(content?.refusal) ?? '')
      }
    } else if (type === 'function_call') {
      part.toolCalls.push(toolCall(position, str(item.call_id), str(item.name) ?? '', argumentsOf(item.arguments)))
    } else if (type === 'custom_tool_call') {
      part.toolCalls.push(toolCall(position, str(item.call_id), str(item.name) ?? '', str(item.input) ?? ''))
    } else if (type === 'reasoning') {
      for (const s of arr(item.summary)) {
        const text = str(obj(s)?.text)
        if (text) part.reasoning.push(text)
      }
      for (const c of arr(item.content)) {
        const text = str(obj(c)?.text)
        if (text) part.reasoning.push(text)
      }
    }
  })
  part.outputText = texts.join('')
  if (refusals.length > 0) part.refusal = refusals.join('')
}

/** OpenAI's usage object (Responses, and Realtime's response.done, which spells it `input_token_details`). */
export function readUsage(usage: Record<string, unknown>): LlmUsage {
  const u: LlmUsage = {}
  const set = (k: keyof LlmUsage, v: unknown) => {
    const n = num(v)
    if (n !== undefined) u[k] = n
  }
  set('input', usage.input_tokens)
  set('output', usage.output_tokens)
  set('total', usage.total_tokens)
  set('reasoning', obj(usage.output_tokens_details)?.reasoning_tokens)
  set('cachedInput', (obj(usage.input_tokens_details) ?? obj(usage.input_token_details))?.cached_tokens)
  set('cost', usage.cost)
  return u
}

const FINAL_EVENTS = new Set(['response.completed', 'response.incomplete', 'response.failed'])

/** Reassembles `response.*` events; the final snapshot, when there is one, is what the stream says. */
export function readResponsesEvents(events: LlmStreamEvent[]): LlmResponsePart {
  let snapshot: Record<string, unknown> | undefined
  let final: Record<string, unknown> | undefined
  let streamError: string | undefined
  const items = new Map<number, Record<string, unknown>>()
  for (const e of events) {
    const data = obj(e.data)
    if (!data) continue
    const type = str(data.type) ?? e.event ?? ''
    if (type === 'error') streamError = str(data.message) ?? str(obj(data.error)?.message) ?? 'error event'
    const response = obj(data.response)
    if (response && type.startsWith('response.') && !type.includes('.', 'response.'.length)) {
      if (FINAL_EVENTS.has(type)) final = response
      else snapshot = response
      continue
    }
    applyItemEvent(items, type, data)
  }
  const base = final ?? snapshot ?? {}
  const finalOutput = arr(final?.output)
  // A final snapshot with an empty output list (some servers omit it) falls back to the reassembled items.
  const output = finalOutput.length > 0 ? finalOutput : [...items.entries()].sort(([a], [b]) => a - b).map(([, item]) => item)
  const part = readResponsesResponse({ ...base, output })
  // Responses streams are indexed by output_index; keep those indexes when the items were reassembled.
  if (finalOutput.length === 0)
    reindex(
      part.toolCalls,
      [...items.keys()].sort((a, b) => a - b),
    )
  part.complete = final !== undefined
  if (streamError !== undefined) part.error = streamError
  return part
}

function reindex(calls: LlmToolCall[], wireIndexes: number[]): void {
  for (const c of calls) c.index = wireIndexes[c.index] ?? c.index
}

function applyItemEvent(items: Map<number, Record<string, unknown>>, type: string, data: Record<string, unknown>): void {
  const oi = index(data.output_index)
  if (oi === undefined) return
  if (type === 'response.output_item.added' || type === 'response.output_item.done') {
    const item = obj(data.item)
    if (item) items.set(oi, cloneJson(item))
    return
  }
  const item = items.get(oi)
  if (!item) return
  const ci = index(data.content_index)
  const si = index(data.summary_index)
  const delta = str(data.delta)
  switch (type) {
    case 'response.content_part.added':
    case 'response.content_part.done':
      if (ci !== undefined && obj(data.part)) slot(item, 'content', ci, cloneJson(obj(data.part) as Record<string, unknown>))
      return
    case 'response.output_text.delta':
    case 'response.reasoning_text.delta':
      if (ci !== undefined && delta !== undefined) appendText(slot(item, 'content', ci, { type: 'output_text', text: '' }), 'text', delta)
      return
    case 'response.output_text.done':
    case 'response.reasoning_text.done':
      if (ci !== undefined && str(data.text) !== undefined) slot(item, 'content', ci, { type: 'output_text', text: '' }).text = data.text
      return
    case 'response.refusal.delta':
      if (ci !== undefined && delta !== undefined) appendText(slot(item, 'content', ci, { type: 'refusal', refusal: '' }), 'refusal', delta)
      return
    case 'response.function_call_arguments.delta':
      if (delta !== undefined) appendText(item, 'arguments', delta)
      return
    case 'response.function_call_arguments.done':
      if (str(data.arguments) !== undefined) item.arguments = data.arguments
      return
    case 'response.custom_tool_call_input.delta':
      if (delta !== undefined) appendText(item, 'input', delta)
      return
    case 'response.reasoning_summary_part.added':
    case 'response.reasoning_summary_part.done':
      if (si !== undefined && obj(data.part)) slot(item, 'summary', si, cloneJson(obj(data.part) as Record<string, unknown>))
      return
    case 'response.reasoning_summary_text.delta':
      if (si !== undefined && delta !== undefined) appendText(slot(item, 'summary', si, { type: 'summary_text', text: '' }), 'text', delta)
      return
    case 'response.reasoning_summary_text.done':
      if (si !== undefined && str(data.text) !== undefined) slot(item, 'summary', si, { type: 'summary_text', text: '' }).text = data.text
      return
  }
}

/** The object at `item[key][i]`, created with `init` when absent. */
function slot(item: Record<string, unknown>, key: string, i: number, init: Record<string, unknown>): Record<string, unknown> {
  if (!Array.isArray(item[key])) item[key] = []
  const list = item[key] as unknown[]
  // Bounded: an absurd index in a damaged stream must not allocate a huge array.
  if (i > list.length + 1000) return init
  const existing = obj(list[i])
  if (existing) return existing
  list[i] = init
  return init
}

function appendText(target: Record<string, unknown>, key: string, delta: string): void {
  target[key] = (str(target[key]) ?? '') + delta
}
