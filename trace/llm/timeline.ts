/**
 * A trace read as a timeline of turns: model calls in LLM terms, other exchanges as one HTTP line.
 * `#3 model gpt-5 → tool_call get_weather {"city":"Oslo"}`, `#4 GET weather.test/forecast → 200`,
 * `#5 model ← tool_result get_weather "rain" → "Take an umbrella"`.
 */
import type { Exchange, ExchangeOrigin, Trace } from '../exchange.ts'
import { faultTag } from '../fault-label.ts'
import { stringifyJson } from '../json-codec.ts'
import type { LlmToolCall, LlmView } from './llm-types.ts'
import { llmView } from './llm-view.ts'
import { type McpView, mcpAsk, mcpNotes, mcpOutcome, mcpView } from './mcp.ts'

/** One exchange of a timeline. */
export interface TimelineTurn {
  seq: number
  /** model: a model call; tool: an MCP message (over stdio or Streamable HTTP); http: anything else. */
  kind: 'model' | 'tool' | 'http'
  method: string
  url: string
  status?: number
  /** A recorded network error: "ECONNRESET during response-body". */
  error?: string
  origin?: ExchangeOrigin
  patchId?: string
  /** An injected fault: "fault rate_limit, rule rl; not forwarded". */
  fault?: string
  /** The LLM view, for model turns. */
  llm?: LlmView
  /** The MCP view, for tool turns. */
  mcp?: McpView
  /** The agent this model turn runs as, once a handoff named it (OpenAI Agents SDK). */
  agent?: string
}

/** The timeline of a trace. Tool results are named from the tool calls of earlier turns where the request does not say. */
export function llmTimeline(trace: Trace): TimelineTurn[] {
  const names = new Map<string, string>()
  return trace.exchanges.map((x) => linkTurn(turnOf(trace, x), names))
}

/**
 * Completes a turn from the turns before it: tool results named after the tool calls that asked for them
 * (`names`, call id → tool name, carried across turns and pages), and the agent a handoff made it run as.
 */
export function linkTurn(turn: TimelineTurn, names: Map<string, string>): TimelineTurn {
  const v = turn.llm
  if (!v) return turn
  // A Realtime session's responses, in order: each one's tool results answer the calls of those before it.
  for (const r of v.responses ?? []) linkView(r, names)
  linkView(v, names)
  // A turn whose history holds a handoff runs as the agent the latest one named.
  const agent = v.input.findLast((m) => m.handoff !== undefined)?.handoff
  if (agent !== undefined) turn.agent = agent
  return turn
}

function linkView(v: LlmView, names: Map<string, string>): void {
  for (const m of v.input) if (m.role === 'tool' && m.name === undefined && m.toolCallId && names.has(m.toolCallId)) m.name = names.get(m.toolCallId)
  for (const r of v.toolResults) if (r.name === undefined && names.has(r.callId)) r.name = names.get(r.callId)
  for (const c of v.toolCalls) if (c.id !== undefined) names.set(c.id, c.name)
}

/** Model turns a timeline turn holds: a Realtime session's responses, one for any other model call. */
export function modelTurnCount(turn: Pick<TimelineTurn, 'llm'>): number {
  return turn.llm ? (turn.llm.responses?.length ?? 1) : 0
}

/** One exchange as a timeline turn. */
export function turnOf(trace: Pick<Trace, 'bodies' | 'meta'>, x: Exchange): TimelineTurn {
  const turn: TimelineTurn = { seq: x.seq, kind: 'http', method: x.request.method.toUpperCase(), url: x.request.url }
  if (x.outcome.kind === 'response') turn.status = x.outcome.response.status
  else turn.error = `${x.outcome.error.code} during ${x.outcome.error.phase}`
  if (x.origin) turn.origin = x.origin
  if (x.patchId) turn.patchId = x.patchId
  if (x.fault) turn.fault = faultTag(x.fault)
  const v = llmView(trace, x)
  if (v) {
    turn.kind = 'model'
    turn.llm = v
    return turn
  }
  const m = mcpView(trace, x)
  if (m) {
    turn.kind = 'tool'
    turn.mcp = m
  }
  return turn
}

/** `"text"` shortened to `max` characters, JSON-quoted so newlines and quotes stay visible. */
export function quoteText(text: string, max = 60): string {
  return JSON.stringify(clip(text, max))
}

/** A string shortened to `max` characters with an ellipsis. */
export function clip(text: string, max: number): string {
  const chars = Array.from(text)
  return chars.length > max ? `${chars.slice(0, max - 1).join('')}…` : text
}

/** `get_weather {"city":"Oslo"}`: a tool call's name and compact arguments. */
export function formatToolCall(c: LlmToolCall, max = 80): string {
  return `${c.name || '(no name)'} ${argumentsShown(c, max)}`
}

/** `handoff → Spanish agent (transfer_to_spanish_agent)` or `tool_call get_weather {...}`. */
function callPhrase(c: LlmToolCall, max: number): string {
  return c.handoff !== undefined ? `handoff → ${c.handoff} (${c.name})` : `tool_call ${formatToolCall(c, max)}`
}

function argumentsShown(c: LlmToolCall, max: number): string {
  if (c.argumentsValid) return clip(stringifyJson(c.arguments), max)
  return c.argumentsText === '' ? '(no arguments)' : `${quoteText(c.argumentsText, max)} (not JSON)`
}

/** What a model turn produced, in one phrase. */
export function outcomePhrase(v: LlmView): string {
  if (v.error !== undefined && v.outputText === '' && v.toolCalls.length === 0) return `${v.status ?? ''} ${v.error}`.trim()
  const parts: string[] = []
  if (v.outputText !== '') parts.push(quoteText(v.outputText))
  if (v.refusal) parts.push(`refusal ${quoteText(v.refusal)}`)
  if (v.toolCalls.length === 1) parts.push(callPhrase(v.toolCalls[0] as LlmToolCall, 80))
  else if (v.toolCalls.length > 1)
    parts.push(`tool_calls ${v.toolCalls.map((c) => (c.handoff !== undefined ? callPhrase(c, 40) : formatToolCall(c, 40))).join(', ')}`)
  return parts.length > 0 ? parts.join(' + ') : '(no output)'
}

const NATURAL_FINISH = new Set(['stop', 'tool_calls', 'function_call', 'completed', 'end_turn', 'tool_use', 'stop_sequence', 'STOP'])

/** `[finish length]`, `[stream cut]`, `[patched ID]`, `[fault ...]`: what a reader must not miss about a turn. */
function flags(turn: TimelineTurn): string {
  const out: string[] = []
  const v = turn.llm
  if (v?.finish !== undefined && !NATURAL_FINISH.has(v.finish)) out.push(`finish ${v.finish}${v.finishDetail ? ` (${v.finishDetail})` : ''}`)
  if (v?.incomplete) out.push(turn.error ? `stream cut: ${turn.error}` : 'stream cut')
  if (turn.origin === 'patched') out.push(`patched${turn.patchId ? ` ${turn.patchId}` : ''}`)
  if (turn.fault) out.push(turn.fault)
  return out.length > 0 ? ` [${out.join('; ')}]` : ''
}

/** One line of the timeline. The model name is printed when it differs from the previous model turn's. */
export function formatTurnLine(turn: TimelineTurn, previousModel?: string): string {
  const v = turn.llm
  if (turn.mcp) return formatToolLine(turn, turn.mcp)
  if (!v) {
    const outcome = turn.error ?? String(turn.status ?? '')
    return `#${turn.seq} ${turn.method} ${shortUrl(turn.url)} → ${outcome}${flags(turn)}`
  }
  if (v.responses) return formatSessionLines(turn, v, v.responses)
  let line = `#${turn.seq} model`
  if (v.model !== undefined && v.model !== previousModel) line += ` ${v.model}`
  if (turn.agent !== undefined) line += ` [${turn.agent}]`
  if (v.attempt !== undefined && v.attempt > 0) line += ` (retry ${v.attempt})`
  return `${line}${askPhrase(v)} → ${outcomePhrase(v)}${flags(turn)}`
}

/** ` ← tool_result get_weather "rain"`: the tool results a model call sends back. */
function askPhrase(v: LlmView): string {
  if (v.toolResults.length === 0) return ''
  return ` ← ${v.toolResults.map((r) => (r.handoff !== undefined ? `handoff to ${r.handoff}` : `tool_result ${r.name || r.callId} ${quoteText(r.output, 40)}`)).join(', ')}`
}

/**
 * A Realtime session: a line for the session, then one per response with what the client added before it.
 * `#0 realtime gpt-realtime (tools get_weather; instructions "Be brief."): 2 responses`
 * `   response[0] ← user "Weather in Paris?" → "Let me check…" + tool_call get_weather {"city":"Paris"}`
 */
function formatSessionLines(turn: TimelineTurn, v: LlmView, responses: LlmView[]): string {
  const about: string[] = []
  if (v.tools.length > 0) about.push(`tools ${clip(v.tools.join(', '), 60)}`)
  const instructions = v.input[0]?.role === 'system' ? v.input[0].text : undefined
  if (instructions !== undefined) about.push(`instructions ${quoteText(instructions, 40)}`)
  const head = `#${turn.seq} realtime${v.model !== undefined ? ` ${v.model}` : ''}${about.length > 0 ? ` (${about.join('; ')})` : ''}: ${responses.length} response${responses.length === 1 ? '' : 's'}${v.error !== undefined ? `, ${v.error}` : ''}${flags({ ...turn, llm: { ...v, incomplete: false } })}`
  const pad = ' '.repeat(String(turn.seq).length + 2)
  const lines = responses.map((r, i) => `${pad}response[${i}]${responseAsk(r)} → ${outcomePhrase(r)}${responseFlags(r)}`)
  return [head, ...lines].join('\n')
}

/** What the client added before a Realtime response: its items in order (tool results named by their call). */
function responseAsk(r: LlmView): string {
  const said = r.input.map((m) => {
    if (m.role === 'tool') return `tool_result ${m.name || m.toolCallId || '?'} ${quoteText(m.text, 40)}`
    const calls = (m.toolCalls ?? []).map((c) => `tool_call ${formatToolCall(c, 40)}`)
    return `${m.role} ${[m.text === '' ? '' : quoteText(m.text, 40), ...calls].filter((t) => t !== '').join(' + ')}`
  })
  return said.length > 0 ? ` ← ${said.join(', ')}` : ''
}

function responseFlags(r: LlmView): string {
  const out: string[] = []
  if (r.finish !== undefined && !NATURAL_FINISH.has(r.finish)) out.push(`finish ${r.finish}${r.finishDetail ? ` (${r.finishDetail})` : ''}`)
  if (r.incomplete) out.push('no response.done')
  if (r.audioBytes !== undefined) out.push(`audio ${r.audioBytes} bytes`)
  return out.length > 0 ? ` [${out.join('; ')}]` : ''
}

/** `#4 mcp filesystem tools/call write_file {"path":"a.txt"} → "Successfully wrote to a.txt"`. */
function formatToolLine(turn: TimelineTurn, m: McpView): string {
  const outcome = mcpOutcome(m)
  const notes = mcpNotes(m)
  const head = `#${turn.seq} mcp ${m.server} ${mcpAsk(m)}`
  return `${head}${outcome !== '' ? ` → ${outcome}` : ''}${notes.length > 0 ? ` (${notes.join(', ')})` : ''}${flags(turn)}`
}

/** The whole timeline as text: a header, then one line per exchange. */
export function formatTimeline(name: string, turns: TimelineTurn[]): string {
  const models = turns.reduce((n, t) => n + modelTurnCount(t), 0)
  const tools = turns.filter((t) => t.kind === 'tool').length
  const toolCount = tools > 0 ? `, ${tools} MCP message${tools === 1 ? '' : 's'}` : ''
  const lines = [`trace "${name}": ${turns.length} exchange${turns.length === 1 ? '' : 's'}, ${models} model turn${models === 1 ? '' : 's'}${toolCount}`]
  let previous: string | undefined
  for (const t of turns) {
    lines.push(formatTurnLine(t, previous))
    if (t.llm?.model !== undefined) previous = t.llm.model
  }
  return lines.join('\n')
}

/** host + path + query of a URL (the scheme adds nothing to a timeline). */
export function shortUrl(url: string): string {
  try {
    const u = new URL(url)
    const path = u.pathname === '/' && u.search === '' ? '' : `${u.pathname}${u.search}`
    return `${u.host}${path}`
  } catch {
    return url
  }
}
