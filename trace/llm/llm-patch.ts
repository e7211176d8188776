/**
 * Fork by meaning: `llm.output_text="..."`, `llm.tool_call[N].name=NAME`, `llm.tool_call[N].arguments=JSON`,
 * `llm.finish=VALUE` on a model turn. A JSON response is edited surgically (only the patched values'
 * bytes change); a streamed response is re-encoded as a consistent stream: the same events and chunks
 * as the recording, deltas re-split in the recording's proportions, every snapshot that repeats the
 * value (done events, the final response) changed with it, usage and ids kept.
 * @example
 * validateLlmPatch(trace, x, '#5 llm.output_text="manual_review"', action) // throws TR_INVALID_PATCH up front
 * const { chunks } = applyLlmPatch(trace, x, '#5 ...', action)
 */

import { bodyFromChunks } from '../body.ts'
import { ErrorCodes, ToolReplayError } from '../errors.ts'
import type { Exchange, Trace } from '../exchange.ts'
import { headerValue } from '../header-pairs.ts'
import { canonicalJson, editJson, parseJson, stringifyJson, tryParseJson } from '../json-codec.ts'
import { decodedResponse } from './exchange-bodies.ts'
import { obj } from './json-access.ts'
import type { LlmApi, LlmHttpApi, LlmView } from './llm-types.ts'
import { llmView } from './llm-view.ts'
import { planAnthropicJson, planAnthropicStream } from './patch-anthropic.ts'
import { planConverseJson, planConverseStream } from './patch-bedrock.ts'
import { planGeminiJson, planGeminiStream } from './patch-gemini.ts'
import { planOllamaJson, planOllamaStream } from './patch-ollama.ts'
import { planChatJson, planChatStream } from './patch-openai-chat.ts'
import { planResponsesJson, planResponsesStream } from './patch-openai-responses.ts'
import { type JsonPlan, type LlmEdit, type LlmPatchTarget, PlanError, type StreamEvent, type StreamPlan } from './patch-plan.ts'
import { chunkPerEvent, rechunkLike } from './sse-segments.ts'
import { type StreamBody, streamBody } from './stream-body.ts'

/** A parsed `llm.*` patch action. */
export interface LlmPatchAction {
  kind: 'llm'
  target: LlmPatchTarget
  value: unknown
}

const LLM_HELP =
  'LLM actions: llm.output_text="TEXT", llm.tool_call[N].name=NAME, llm.tool_call[N].arguments=JSON, llm.finish=VALUE (e.g. stop, length, tool_calls).'

function invalid(text: string, why: string): never {
  throw new ToolReplayError(ErrorCodes.INVALID_PATCH, `Invalid patch "${text}": ${why}. ${LLM_HELP}`, { details: { patch: text } })
}

/** Parses the action part of an `llm.*` patch (`text` is the whole spec, for messages). */
export function parseLlmPatchAction(text: string, action: string): LlmPatchAction {
  const m = /^llm\.(output_text|finish|tool_calls?\[(\d+)\]\.(name|arguments))=([\s\S]*)$/.exec(action)
  if (!m) invalid(text, `unknown LLM action "${action.split('=')[0]}"`)
  const [, field, n, part, raw] = m as RegExpExecArray
  const rawValue = (raw as string).trim()
  if (field === 'output_text') {
    const v = jsonValue(text, rawValue, 'llm.output_text="manual_review"')
    if (typeof v !== 'string') invalid(text, 'llm.output_text takes a JSON string (quotes included): llm.output_text="manual_review"')
    return { kind: 'llm', target: { field: 'output_text' }, value: v }
  }
  if (field === 'finish') return { kind: 'llm', target: { field: 'finish' }, value: word(text, rawValue, 'llm.finish=length') }
  const target: LlmPatchTarget = { field: 'tool_call', index: Number(n), part: part as 'name' | 'arguments' }
  if (part === 'name') return { kind: 'llm', target, value: word(text, rawValue, 'llm.tool_call[0].name=get_weather') }
  return { kind: 'llm', target, value: jsonValue(text, rawValue, 'llm.tool_call[0].arguments={"city":"Oslo"}') }
}

function jsonValue(text: string, raw: string, example: string): unknown {
  try {
    return parseJson(raw)
  } catch {
    return invalid(text, `the value ${JSON.stringify(raw)} is not JSON (e.g. ${example})`)
  }
}

/** A bare word (`length`, `get_weather`) or a JSON string. */
function word(text: string, raw: string, example: string): string {
  if (/^[A-Za-z0-9_.:-]+$/.test(raw)) return raw
  const v = tryParseJson(raw)?.value
  if (typeof v === 'string' && v !== '') return v
  return invalid(text, `the value ${JSON.stringify(raw)} is neither a bare name nor a JSON string (e.g. ${example})`)
}

/** The canonical text of an `llm.*` action: what lineage stores and the patch id hashes. */
export function canonicalLlmAction(a: LlmPatchAction): string {
  const t = a.target
  const name = t.field === 'tool_call' ? `tool_call[${t.index}].${t.part}` : t.field
  return `llm.${name}=${canonicalJson(a.value)}`
}

// Each API's finish values, and the common spellings of other APIs that mean the same.
const FINISH: Record<LlmHttpApi, { values: string[]; aliases: Record<string, string> }> = {
  'openai.chat': {
    values: ['stop', 'length', 'tool_calls', 'content_filter', 'function_call'],
    aliases: { end_turn: 'stop', completed: 'stop', max_tokens: 'length', max_output_tokens: 'length', tool_use: 'tool_calls' },
  },
  'openai.responses': {
    values: ['completed', 'incomplete'],
    aliases: {
      stop: 'completed',
      end_turn: 'completed',
      length: 'incomplete',
      max_tokens: 'incomplete',
      max_output_tokens: 'incomplete',
      content_filter: 'incomplete:content_filter',
    },
  },
  'anthropic.messages': {
    values: ['end_turn', 'max_tokens', 'stop_sequence', 'tool_use', 'pause_turn', 'refusal', 'model_context_window_exceeded'],
    aliases: { stop: 'end_turn', length: 'max_tokens', tool_calls: 'tool_use', content_filter: 'refusal' },
  },
  // google.genai FinishReason; a function call ends with STOP.
  'google.gemini': {
    values: ['STOP', 'MAX_TOKENS', 'SAFETY', 'RECITATION', 'LANGUAGE', 'OTHER', 'BLOCKLIST', 'PROHIBITED_CONTENT', 'SPII', 'MALFORMED_FUNCTION_CALL'],
    aliases: { stop: 'STOP', end_turn: 'STOP', tool_calls: 'STOP', length: 'MAX_TOKENS', max_tokens: 'MAX_TOKENS', content_filter: 'SAFETY' },
  },
  // Bedrock Converse StopReason.
  'aws.bedrock.converse': {
    values: ['end_turn', 'tool_use', 'max_tokens', 'stop_sequence', 'guardrail_intervened', 'content_filtered', 'model_context_window_exceeded'],
    aliases: { stop: 'end_turn', length: 'max_tokens', tool_calls: 'tool_use', content_filter: 'content_filtered' },
  },
  'ollama.chat': { values: ['stop', 'length', 'load', 'unload'], aliases: { end_turn: 'stop', tool_calls: 'stop', max_tokens: 'length' } },
  'ollama.generate': { values: ['stop', 'length', 'load', 'unload'], aliases: { end_turn: 'stop', max_tokens: 'length' } },
}

/** The finish a value means for an API: `{finish, detail}`, or undefined when the API has no such finish. */
function wireFinish(api: LlmHttpApi, value: string): { finish: string; detail?: string } | undefined {
  const spec = FINISH[api]
  const v = spec.values.includes(value) ? value : spec.aliases[value]
  if (v === undefined) return undefined
  if (api !== 'openai.responses') return { finish: v }
  if (v === 'completed') return { finish: 'completed' }
  return { finish: 'incomplete', detail: v.includes(':') ? (v.split(':')[1] as string) : 'max_output_tokens' }
}

function failResolve(text: string, trace: Pick<Trace, 'meta'>, x: Exchange, why: string): never {
  throw new ToolReplayError(
    ErrorCodes.INVALID_PATCH,
    `Failed to resolve patch "${text}" against trace "${trace.meta.name}": exchange #${x.seq} (${x.request.method} ${x.request.url}) ${why}`,
    { details: { patch: text, seq: x.seq } },
  )
}

/**
 * Checks an `llm.*` patch against the exchange it selects before anything is written, and resolves its
 * value for that exchange's API. Throws TR_INVALID_PATCH naming the exchange and what is wrong.
 */
export function resolveLlmEdit(trace: Pick<Trace, 'bodies' | 'meta'>, x: Exchange, text: string, a: LlmPatchAction): { view: LlmView; edit: LlmEdit } {
  if (x.outcome.kind !== 'response')
    failResolve(text, trace, x, `has a recorded error (${x.outcome.error.code}), not a model response. Use "response=CODE" first, or patch another exchange.`)
  const view = llmView(trace, x)
  if (!view) {
    failResolve(
      text,
      trace,
      x,
      'is not an LLM exchange: Tool Replay reads OpenAI Chat Completions and Responses, Anthropic Messages, Gemini generateContent, Bedrock Converse and Ollama chat/generate (a POST whose path and JSON body have their shape). Patch it with $.path=JSON or body=@FILE instead.',
    )
  }
  if (view.api === 'openai.realtime')
    failResolve(
      text,
      trace,
      x,
      'is an OpenAI Realtime session (a WebSocket exchange): llm.* patches change one HTTP model call. Name the response of the session instead: realtime.response[N].output_text="TEXT" or realtime.response[N].tool_call[M].arguments=JSON.',
    )
  if ((view.status ?? 200) >= 300)
    failResolve(
      text,
      trace,
      x,
      `is an error response (${view.status}${view.error ? `: ${view.error}` : ''}), not a model answer. Patch its status or body instead.`,
    )
  const t = a.target
  if (t.field === 'output_text') return { view, edit: { field: 'output_text', text: a.value as string } }
  if (t.field === 'finish') {
    const f = wireFinish(view.api, a.value as string)
    if (!f) {
      const spec = FINISH[view.api]
      failResolve(
        text,
        trace,
        x,
        `is ${view.api}, whose finish is one of ${[...spec.values, ...Object.keys(spec.aliases)].join(', ')}; "${String(a.value)}" is not.`,
      )
    }
    const edit: LlmEdit = { field: 'finish', finish: f.finish }
    if (f.detail !== undefined) edit.detail = f.detail
    return { view, edit }
  }
  const call = view.toolCalls[t.index]
  if (!call) {
    const list = view.toolCalls.map((c, i) => `tool_call[${i}] ${c.name}`).join(', ')
    failResolve(
      text,
      trace,
      x,
      `has ${view.toolCalls.length} tool call(s)${list ? ` (${list})` : ''}, so tool_call[${t.index}] does not exist. Tool Replay changes existing tool calls; it does not add them.`,
    )
  }
  if (t.part === 'name') return { view, edit: { field: 'tool_call', index: t.index, wireIndex: call.index, part: 'name', name: a.value as string } }
  // A JSON string is taken as the raw arguments text, so a fork can also hand the app malformed arguments.
  const argsText = typeof a.value === 'string' ? a.value : stringifyJson(a.value)
  const value = typeof a.value === 'string' ? tryParseJson(a.value)?.value : a.value
  return { view, edit: { field: 'tool_call', index: t.index, wireIndex: call.index, part: 'arguments', text: argsText, value } }
}

/** Validates an `llm.*` patch against its exchange up front (resolvePatches calls this): throws TR_INVALID_PATCH. */
export function validateLlmPatch(trace: Pick<Trace, 'bodies' | 'meta'>, x: Exchange, text: string, a: LlmPatchAction): void {
  const { view, edit } = resolveLlmEdit(trace, x, text, a)
  // Plan the edit too: a body that cannot carry it (no text part, a cut stream) fails before anything is written.
  try {
    plan(trace, x, view.api, edit)
  } catch (err) {
    if (err instanceof PlanError) failResolve(text, trace, x, `cannot take this patch: ${err.message}.`)
    throw err
  }
}

type Planned = { kind: 'json'; text: string; edits: JsonPlan } | { kind: 'stream'; stream: StreamBody; plan: StreamPlan }

const JSON_PLANS: Record<LlmHttpApi, (body: Record<string, unknown>, e: LlmEdit) => JsonPlan> = {
  'openai.chat': planChatJson,
  'openai.responses': planResponsesJson,
  'anthropic.messages': planAnthropicJson,
  'google.gemini': planGeminiJson,
  'aws.bedrock.converse': planConverseJson,
  'ollama.chat': planOllamaJson,
  'ollama.generate': planOllamaJson,
}

const STREAM_PLANS: Record<LlmHttpApi, (events: StreamEvent[], e: LlmEdit) => StreamPlan> = {
  'openai.chat': planChatStream,
  'openai.responses': planResponsesStream,
  'anthropic.messages': planAnthropicStream,
  'google.gemini': planGeminiStream,
  'aws.bedrock.converse': planConverseStream,
  'ollama.chat': planOllamaStream,
  'ollama.generate': planOllamaStream,
}

function plan(trace: Pick<Trace, 'bodies' | 'meta'>, x: Exchange, api: LlmApi, edit: LlmEdit): Planned {
  if (api === 'openai.realtime') throw new PlanError('it is a Realtime session, not one HTTP model call')
  const res = decodedResponse(trace, x)
  if (!res) throw new PlanError('its response body is not readable')
  const stream = streamBody(res)
  if (stream) return { kind: 'stream', stream, plan: STREAM_PLANS[api](stream.events, edit) }
  if (res.text === undefined) throw new PlanError('its response body is not readable text')
  const body = obj(res.json)
  if (!body) throw new PlanError('its response body is not a JSON object')
  return { kind: 'json', text: res.text, edits: JSON_PLANS[api](body, edit) }
}

/** The patched response body, cut into chunks like the recording, and whether it is now stored decoded. */
export interface LlmPatchResult {
  chunks: Array<{ bytes: Uint8Array; atMs: number }>
  /** True when the recorded body was compressed: the patched body is stored decoded (drop Content-Encoding). */
  decoded: boolean
}

/** Applies an `llm.*` patch to an exchange's response body, then reads it back to check it says what was asked. */
export function applyLlmPatch(trace: Pick<Trace, 'bodies' | 'meta'>, x: Exchange, text: string, a: LlmPatchAction): LlmPatchResult {
  const { view, edit } = resolveLlmEdit(trace, x, text, a)
  let planned: Planned
  try {
    planned = plan(trace, x, view.api, edit)
  } catch (err) {
    if (err instanceof PlanError) failResolve(text, trace, x, `cannot take this patch: ${err.message}.`)
    throw err
  }
  const res = x.outcome.kind === 'response' ? x.outcome.response : undefined
  const chunksBefore = res?.body.chunks ?? []
  const decoded = headerValue(res?.headers ?? [], 'content-encoding') !== undefined
  let result: LlmPatchResult
  if (planned.kind === 'json') {
    result = { chunks: [{ bytes: new TextEncoder().encode(editJson(planned.text, planned.edits)), atMs: chunksBefore[0]?.atMs ?? 0 }], decoded }
  } else {
    const { stream, plan: p } = planned
    const after = stream.raw.map((raw, i) => {
      const e = p.edits.get(i)
      return e ? stream.render(i, e) : raw
    })
    result = { chunks: decoded ? chunkPerEvent(after, chunksBefore) : rechunkLike(stream.raw, after, chunksBefore), decoded }
  }
  checkPatched(trace, x, text, edit, result)
  return result
}

/** Reads the patched body back through the LLM view: it must say exactly what the patch asked. */
function checkPatched(trace: Pick<Trace, 'bodies' | 'meta'>, x: Exchange, text: string, edit: LlmEdit, result: LlmPatchResult): void {
  const body = bodyFromChunks(result.chunks)
  const res = x.outcome.kind === 'response' ? x.outcome.response : undefined
  if (!res) return
  const headers = result.decoded ? res.headers.filter(([k]) => k.toLowerCase() !== 'content-encoding') : res.headers
  const patched: Exchange = { ...x, outcome: { kind: 'response', response: { ...res, headers, body: body.ref } } }
  const bodies = new Map(trace.bodies)
  bodies.set(body.ref.digest, body.bytes)
  const v = llmView({ meta: trace.meta, bodies }, patched)
  let ok = v !== undefined
  if (v && edit.field === 'output_text') ok = v.outputText === edit.text
  if (v && edit.field === 'finish') ok = v.finish === edit.finish && (edit.detail === undefined || v.finishDetail === edit.detail)
  if (v && edit.field === 'tool_call') {
    const c = v.toolCalls[edit.index]
    ok =
      c !== undefined &&
      (edit.part === 'name'
        ? c.name === edit.name
        : c.argumentsText === edit.text || (c.argumentsValid && canonicalJson(c.arguments) === canonicalJson(edit.value ?? null)))
  }
  if (!ok) {
    throw new ToolReplayError(
      ErrorCodes.INTERNAL,
      `Patch "${text}" on exchange #${x.seq} did not produce a response that reads back as asked. This is a bug in Tool Replay; please report it with the trace.`,
      { details: { patch: text, seq: x.seq } },
    )
  }
}
