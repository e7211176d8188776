/** Shared pieces of the per-API readers: text of content parts, tool calls, tool results. */
import { stringifyJson, tryParseJson } from '../json-codec.ts'
import { arr, obj, str } from './json-access.ts'
import type { LlmMessage, LlmToolCall, LlmToolResult } from './llm-types.ts'

const TEXT_PART_TYPES = new Set(['text', 'input_text', 'output_text', 'summary_text', 'reasoning_text'])

/**
 * The text of a message's content: a string as is; a list of parts as their texts joined by newlines,
 * with a placeholder ("[image]", "[input_audio]") for each part that is not text.
 */
export function contentText(content: unknown): string {
  if (typeof content === 'string') return content
  const parts: string[] = []
  for (const p of arr(content)) {
    if (typeof p === 'string') {
      parts.push(p)
      continue
    }
    const part = obj(p)
    if (!part) continue
    const type = str(part.type)
    const text = str(part.text)
    if (text !== undefined && (type === undefined || TEXT_PART_TYPES.has(type))) parts.push(text)
    else if (type === 'refusal' && str(part.refusal) !== undefined) parts.push(str(part.refusal) as string)
    else if (type !== undefined) parts.push(`[${type.replace(/^input_/, '').replace(/_url$/, '')}]`)
  }
  return parts.join('\n')
}

/** A tool call from its name and its arguments text (JSON expected, kept as sent when it is not). */
export function toolCall(index: number, id: string | undefined, name: string, argumentsText: string): LlmToolCall {
  const parsed = argumentsText.trim() === '' ? undefined : tryParseJson(argumentsText)
  const call: LlmToolCall = { index, name, arguments: parsed?.value, argumentsText, argumentsValid: parsed !== undefined }
  if (id !== undefined) call.id = id
  return call
}

/** A tool call whose arguments arrived as a JSON value (Anthropic `input`). */
export function toolCallFromValue(index: number, id: string | undefined, name: string, value: unknown): LlmToolCall {
  const call: LlmToolCall = { index, name, arguments: value, argumentsText: stringifyJson(value ?? {}), argumentsValid: true }
  if (id !== undefined) call.id = id
  return call
}

/** Chat-style tool calls (`[{id, type, function: {name, arguments}}]`, or `custom: {name, input}`). */
export function chatToolCalls(list: unknown): LlmToolCall[] {
  const out: LlmToolCall[] = []
  arr(list).forEach((t, i) => {
    const call = obj(t)
    if (!call) return
    const fn = obj(call.function)
    const custom = obj(call.custom)
    const name = str(fn?.name) ?? str(custom?.name) ?? ''
    const args = fn ? argumentsOf(fn.arguments) : (str(custom?.input) ?? '')
    out.push(toolCall(i, str(call.id), name, args))
  })
  return out
}

/** Arguments as text: a string as is, an object (some compatible servers send one) as JSON. */
export function argumentsOf(v: unknown): string {
  if (typeof v === 'string') return v
  if (v === undefined || v === null) return ''
  try {
    return stringifyJson(v)
  } catch {
    return ''
  }
}

/**
 * The tool results a request sends back: the tool messages after its last assistant turn, named from
 * the assistant turn's tool calls where the request has them.
 */
export function trailingToolResults(input: LlmMessage[]): LlmToolResult[] {
  let last = -1
  input.forEach((m, i) => {
    if (m.role === 'assistant') last = i
  })
  const names = new Map<string, string>()
  for (const m of input) for (const c of m.toolCalls ?? []) if (c.id !== undefined) names.set(c.id, c.name)
  const out: LlmToolResult[] = []
  for (const m of input.slice(last + 1)) {
    if (m.role !== 'tool') continue
    const r: LlmToolResult = { callId: m.toolCallId ?? '', output: m.text }
    const name = m.name ?? names.get(m.toolCallId ?? '')
    if (name !== undefined) {
      r.name = name
      m.name = name
    }
    if (m.isError) r.isError = true
    out.push(r)
  }
  return out
}
