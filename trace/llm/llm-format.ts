/** One model turn printed for a reader (`tr-proxy show TRACE --exchange N`), and a bounded copy for JSON output. */
import type { LlmMessage, LlmUsage, LlmView } from './llm-types.ts'
import { clip, formatToolCall, quoteText, type TimelineTurn } from './timeline.ts'

const API_NAMES: Record<LlmView['api'], string> = {
  'openai.chat': 'OpenAI Chat Completions',
  'openai.responses': 'OpenAI Responses',
  'openai.realtime': 'OpenAI Realtime',
  'anthropic.messages': 'Anthropic Messages',
  'google.gemini': 'Google Gemini generateContent',
  'aws.bedrock.converse': 'AWS Bedrock Converse',
  'ollama.chat': 'Ollama chat',
  'ollama.generate': 'Ollama generate',
}

/** Longest input message text shown, in characters; longer ones are cut with their length noted. */
export const INPUT_TEXT_LIMIT = 2000

/** A model turn in full: request line, model, input messages, tool results, output, finish, usage. */
export function formatModelTurn(turn: TimelineTurn): string {
  const v = turn.llm as LlmView
  if (v.responses) return formatSession(turn, v, v.responses)
  const shape = v.stream ? `streamed${v.events !== undefined ? ` in ${v.events} events` : ''}` : 'JSON'
  const lines = [
    `#${turn.seq} model turn (${API_NAMES[v.api]}, ${shape})${turn.origin === 'patched' ? ` [patched${turn.patchId ? ` ${turn.patchId}` : ''}]` : ''}`,
  ]
  lines.push(`${turn.method} ${turn.url} → ${turn.error ?? turn.status ?? ''}`)
  if (v.model !== undefined)
    lines.push(`model: ${v.model}${v.requestModel !== undefined && v.requestModel !== v.model ? ` (asked for ${v.requestModel})` : ''}`)
  if (v.attempt !== undefined) {
    const header = v.api === 'aws.bedrock.converse' ? `amz-sdk-request: attempt=${v.attempt + 1}` : `x-stainless-retry-count: ${v.attempt}`
    lines.push(`attempt: ${v.attempt === 0 ? 'first try' : `retry ${v.attempt}`} (${header})`)
  }
  if (v.tools.length > 0) lines.push(`tools offered: ${v.tools.join(', ')}`)
  lines.push('', `input (${v.input.length} message${v.input.length === 1 ? '' : 's'}):`)
  v.input.forEach((m, i) => {
    lines.push(`  [${i}] ${messageLine(m)}`)
  })
  if (v.toolResults.length > 0) {
    lines.push('', 'tool results sent back:')
    for (const r of v.toolResults)
      lines.push(
        `  ${r.name ?? '?'}${r.callId ? ` (${r.callId})` : ''}${r.isError ? ' error' : ''}${r.handoff ? ` handoff to ${r.handoff}` : ''}: ${quoteText(r.output, 200)}`,
      )
  }
  lines.push('', 'output:')
  for (const r of v.reasoning) lines.push(`  reasoning: ${indent(r)}`)
  if (v.outputText !== '') lines.push(`  text: ${indent(v.outputText)}`)
  if (v.refusal) lines.push(`  refusal: ${indent(v.refusal)}`)
  v.toolCalls.forEach((c, i) => {
    lines.push(`  tool_call[${i}] ${formatToolCall(c, 400)}${c.id !== undefined ? ` (id ${c.id})` : ''}${c.handoff ? ` handoff to ${c.handoff}` : ''}`)
  })
  if (v.outputText === '' && v.toolCalls.length === 0 && !v.refusal) lines.push('  (none)')
  if (v.error !== undefined) lines.push(`error: ${v.error}`)
  if (v.incomplete) lines.push('stream: ended before its final event')
  if (v.finish !== undefined) lines.push(`finish: ${v.finish}${v.finishDetail ? ` (${v.finishDetail})` : ''}`)
  if (v.usage) lines.push(`usage: ${formatUsage(v.usage)}`)
  lines.push('', `(--view http shows the raw exchange)`)
  return lines.join('\n')
}

/** A Realtime session in full: the session's model, tools and instructions, then each response with its input and output. */
function formatSession(turn: TimelineTurn, v: LlmView, responses: LlmView[]): string {
  const lines = [
    `#${turn.seq} realtime session (${API_NAMES[v.api]}, ${v.events ?? 0} server events, ${responses.length} response${responses.length === 1 ? '' : 's'})`,
  ]
  lines.push(`${turn.method} ${turn.url} → ${turn.error ?? turn.status ?? ''}`)
  if (v.model !== undefined)
    lines.push(`model: ${v.model}${v.requestModel !== undefined && v.requestModel !== v.model ? ` (asked for ${v.requestModel})` : ''}`)
  if (v.tools.length > 0) lines.push(`tools offered: ${v.tools.join(', ')}`)
  if (v.input[0]?.role === 'system') lines.push(`instructions: ${quoteText(v.input[0].text, 400)}`)
  responses.forEach((r, i) => {
    lines.push('', `response[${i}] (${r.events ?? 0} events):`)
    for (const m of r.input) lines.push(`  input: ${messageLine(m)}`)
    if (r.outputText !== '') lines.push(`  text: ${indent(r.outputText)}`)
    r.toolCalls.forEach((c, n) => {
      lines.push(`  tool_call[${n}] ${formatToolCall(c, 400)}${c.id !== undefined ? ` (id ${c.id})` : ''}`)
    })
    if (r.audioBytes !== undefined) lines.push(`  audio: ${r.audioBytes} bytes (not shown)`)
    if (r.outputText === '' && r.toolCalls.length === 0) lines.push('  (no output)')
    if (r.error !== undefined) lines.push(`  error: ${r.error}`)
    if (r.incomplete) lines.push('  no response.done: the response did not finish')
    if (r.finish !== undefined) lines.push(`  finish: ${r.finish}${r.finishDetail ? ` (${r.finishDetail})` : ''}`)
    if (r.usage) lines.push(`  usage: ${formatUsage(r.usage)}`)
  })
  for (const r of v.toolResults) lines.push('', `tool result sent after the last response: ${r.name ?? '?'}: ${quoteText(r.output, 200)}`)
  if (v.error !== undefined) lines.push('', `error: ${v.error}`)
  if (v.usage) lines.push('', `usage (session): ${formatUsage(v.usage)}`)
  lines.push('', `(--view http shows the raw exchange; every message is in the trace)`)
  return lines.join('\n')
}

function messageLine(m: LlmMessage): string {
  const calls = (m.toolCalls ?? []).map((c) => `tool_call ${formatToolCall(c)}`)
  if (m.role === 'tool') return `tool ${m.name ?? '?'}${m.toolCallId ? ` (${m.toolCallId})` : ''}${m.isError ? ' error' : ''}: ${quoteText(m.text, 200)}`
  const text = m.text === '' ? [] : [quoteText(m.text, 200)]
  return `${m.role}: ${[...text, ...calls].join(' + ') || '(empty)'}`
}

function indent(text: string): string {
  return text.includes('\n') ? `\n${text.replace(/^/gm, '    ')}` : text
}

/** "input 61, output 83 (reasoning 64), total 144, cached input 0". */
export function formatUsage(u: LlmUsage): string {
  const parts: string[] = []
  if (u.input !== undefined) parts.push(`input ${u.input}`)
  if (u.output !== undefined) parts.push(`output ${u.output}${u.reasoning !== undefined ? ` (reasoning ${u.reasoning})` : ''}`)
  if (u.total !== undefined) parts.push(`total ${u.total}`)
  if (u.cachedInput !== undefined) parts.push(`cached input ${u.cachedInput}`)
  if (u.cost !== undefined) parts.push(`cost ${u.cost}`)
  return parts.join(', ')
}

/** A copy of a view for JSON output: input message texts and tool results cut at `limit` characters (noted in `truncatedFrom`). */
export function presentLlmView(v: LlmView, limit = INPUT_TEXT_LIMIT): LlmView {
  const cut = <T extends { truncatedFrom?: number }>(item: T, key: 'text' | 'output'): T => {
    const text = (item as unknown as Record<string, string>)[key] as string
    if (text.length <= limit) return item
    return { ...item, [key]: clip(text, limit), truncatedFrom: text.length }
  }
  const out: LlmView = { ...v, input: v.input.map((m) => cut(m, 'text')), toolResults: v.toolResults.map((r) => cut(r, 'output')) }
  if (v.responses) out.responses = v.responses.map((r) => presentLlmView(r, limit))
  return out
}
