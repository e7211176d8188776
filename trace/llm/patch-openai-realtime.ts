/**
 * Fork by meaning on an OpenAI Realtime session (a WebSocket exchange): `realtime.response[N].output_text="..."`,
 * `realtime.response[N].tool_call[M].arguments=JSON`, `realtime.response[N].tool_call[M].name=NAME`. Every
 * recorded server event that carries the patched value changes with it, so what the SDK accumulates and what it
 * is told at the end agree: text (and audio transcript) deltas re-split like the recording, the `.done` events,
 * `content_part.done`, `output_item.done`, the `response.done` snapshot and the conversation items the server
 * echoed; argument deltas, `function_call_arguments.done` and every item that repeats them. Only the edited
 * values' bytes change (event ids, order and timing stay); no event is added or removed.
 * @note Audio is not re-synthesized: a forked transcript no longer matches the recorded audio bytes.
 * @example
 * // tr-proxy fork voice --as voice-oslo --patch '#0 realtime.response[0].tool_call[0].arguments={"city":"Oslo"}'
 */
import { bodyFromChunks } from '../body.ts'
import { ErrorCodes, ToolReplayError } from '../errors.ts'
import type { Exchange, Trace, WebSocketMessage } from '../exchange.ts'
import { canonicalJson, editJson, type JsonEdit, stringifyJson } from '../json-codec.ts'
import { decodedText } from './exchange-bodies.ts'
import { arr, index, obj, str } from './json-access.ts'
import { canonicalLlmAction, type LlmPatchAction, parseLlmPatchAction } from './llm-patch.ts'
import type { LlmToolCall, LlmView } from './llm-types.ts'
import { isRealtimeSession, type RealtimeEvent, readRealtimeResponses, realtimeEvents } from './openai-realtime.ts'
import { splitLike } from './sse-segments.ts'

/** A parsed `realtime.*` patch action: which response of the session, and what to change in it. */
export interface RealtimePatchAction {
  kind: 'realtime'
  response: number
  target: LlmPatchAction['target']
  value: unknown
}

const HELP =
  'Realtime actions: realtime.response[N].output_text="TEXT", realtime.response[N].tool_call[M].arguments=JSON, realtime.response[N].tool_call[M].name=NAME (N counts the responses of the session, as `tr-proxy show` lists them)'

/** Parses the action part of a `realtime.*` patch (`text` is the whole spec, for messages). */
export function parseRealtimePatchAction(text: string, action: string): RealtimePatchAction {
  const m = /^realtime\.response\[(\d+)\]\.(.*)$/s.exec(action)
  if (!m)
    throw new ToolReplayError(ErrorCodes.INVALID_PATCH, `Invalid patch "${text}": "${action.split('=')[0]}" names no response. ${HELP}.`, {
      details: { patch: text },
    })
  const inner = parseLlmPatchAction(text, `llm.${m[2] as string}`)
  if (inner.target.field === 'finish')
    throw new ToolReplayError(ErrorCodes.INVALID_PATCH, `Invalid patch "${text}": a Realtime response's finish cannot be patched. ${HELP}.`, {
      details: { patch: text },
    })
  return { kind: 'realtime', response: Number(m[1]), target: inner.target, value: inner.value }
}

/** The canonical text of a `realtime.*` action (what lineage stores and the patch id hashes). */
export function canonicalRealtimeAction(a: RealtimePatchAction): string {
  return `realtime.response[${a.response}].${canonicalLlmAction({ kind: 'llm', target: a.target, value: a.value }).slice('llm.'.length)}`
}

function failResolve(text: string, trace: Pick<Trace, 'meta'>, x: Exchange, why: string): never {
  throw new ToolReplayError(
    ErrorCodes.INVALID_PATCH,
    `Failed to resolve patch "${text}" against trace "${trace.meta.name}": exchange #${x.seq} (${x.request.method} ${x.request.url}) ${why}`,
    { details: { patch: text, seq: x.seq } },
  )
}

/** The edits per message position, planned from the session's events. */
type Plan = Map<number, JsonEdit[]>

interface Resolved {
  events: RealtimeEvent[]
  responses: RealtimeEvent[][]
  view: LlmView
}

function resolve(trace: Pick<Trace, 'bodies' | 'meta'>, x: Exchange, text: string, a: RealtimePatchAction): Resolved {
  if (!x.websocket)
    failResolve(text, trace, x, 'is not a WebSocket session; realtime.* patches change an OpenAI Realtime session. Use llm.* for an HTTP model call.')
  const events = realtimeEvents(trace, x)
  if (!isRealtimeSession(x.request.url, events))
    failResolve(text, trace, x, 'is a WebSocket session that does not speak the OpenAI Realtime API (no session.created, no Realtime events).')
  const read = readRealtimeResponses(x.request.url, events)
  const n = read.events.length
  const view = read.view.responses?.[a.response]
  if (!view) failResolve(text, trace, x, `has ${n} response(s) (response[0]-response[${Math.max(0, n - 1)}]), so response[${a.response}] does not exist.`)
  return { events, responses: read.events, view }
}

/** Plans the patch, throwing TR_INVALID_PATCH when the session cannot take it. */
function planFor(trace: Pick<Trace, 'bodies' | 'meta'>, x: Exchange, text: string, a: RealtimePatchAction): Plan {
  const r = resolve(trace, x, text, a)
  const mine = r.responses[a.response] as RealtimeEvent[]
  const t = a.target
  if (t.field === 'output_text') {
    const plan = planText(r.events, mine, a.value as string)
    if (plan.size === 0)
      failResolve(
        text,
        trace,
        x,
        `cannot take this patch: response[${a.response}] has no text or transcript to replace (it only calls tools); Tool Replay does not add output items.`,
      )
    return plan
  }
  if (t.field !== 'tool_call') failResolve(text, trace, x, 'cannot take this patch')
  const call = r.view.toolCalls[t.index]
  if (!call) {
    const list = r.view.toolCalls.map((c, i) => `tool_call[${i}] ${c.name}`).join(', ')
    failResolve(
      text,
      trace,
      x,
      `has ${r.view.toolCalls.length} tool call(s) in response[${a.response}]${list ? ` (${list})` : ''}, so tool_call[${t.index}] does not exist. Tool Replay changes existing tool calls; it does not add them.`,
    )
  }
  const value = t.part === 'name' ? (a.value as string) : typeof a.value === 'string' ? a.value : stringifyJson(a.value)
  return planCall(r.events, mine, call, t.part, value)
}

function add(plan: Plan, e: RealtimeEvent, path: Array<string | number>, value: unknown): void {
  const list = plan.get(e.message) ?? []
  list.push({ path, value })
  plan.set(e.message, list)
}

const TEXT_DELTA: Record<string, 'text' | 'transcript'> = {
  'response.output_text.delta': 'text',
  'response.text.delta': 'text',
  'response.output_audio_transcript.delta': 'transcript',
  'response.audio_transcript.delta': 'transcript',
}
const TEXT_DONE: Record<string, 'text' | 'transcript'> = {
  'response.output_text.done': 'text',
  'response.text.done': 'text',
  'response.output_audio_transcript.done': 'transcript',
  'response.audio_transcript.done': 'transcript',
}

/** The key the session reader files a text part under (trace/llm/openai-realtime.ts). */
function partKey(d: Record<string, unknown>): string {
  return `${index(d.output_index) ?? ''}:${index(d.content_index) ?? 0}`
}

/** The text-bearing field of a content part ("text" or "transcript"), if it has one. */
function partField(part: Record<string, unknown> | undefined): 'text' | 'transcript' | undefined {
  if (typeof part?.text === 'string') return 'text'
  if (typeof part?.transcript === 'string') return 'transcript'
  return undefined
}

/**
 * Edits of a message item's content parts at `base`: the first part with text gets `text`, later ones ''; parts
 * recorded empty (an `added` item before its deltas) stay empty.
 */
function itemText(
  plan: Plan,
  e: RealtimeEvent,
  item: Record<string, unknown> | undefined,
  base: Array<string | number>,
  text: string,
  first: { done: boolean },
): void {
  if (!item || (str(item.type) !== undefined && str(item.type) !== 'message')) return
  arr(item.content).forEach((p, c) => {
    const field = partField(obj(p))
    if (!field || obj(p)?.[field] === '') return
    add(plan, e, [...base, 'content', c, field], first.done ? '' : text)
    first.done = true
  })
}

function planText(all: readonly RealtimeEvent[], mine: readonly RealtimeEvent[], text: string): Plan {
  const plan: Plan = new Map()
  const keys: string[] = []
  const items = new Set<string>()
  for (const e of mine) {
    if (TEXT_DELTA[e.type] === undefined && TEXT_DONE[e.type] === undefined) continue
    if (!keys.includes(partKey(e.data))) keys.push(partKey(e.data))
    const item = str(e.data.item_id)
    if (item !== undefined) items.add(item)
  }
  const textOf = (key: string) => (key === keys[0] || keys.length === 0 ? text : '')
  for (const key of keys) {
    const deltas = mine.filter((e) => TEXT_DELTA[e.type] !== undefined && partKey(e.data) === key)
    const pieces = splitLike(
      textOf(key),
      deltas.map((e) => str(e.data.delta) ?? ''),
    )
    deltas.forEach((e, i) => {
      add(plan, e, ['delta'], pieces[i])
    })
  }
  for (const e of mine) {
    const done = TEXT_DONE[e.type]
    if (done !== undefined) add(plan, e, [done], textOf(partKey(e.data)))
    if (e.type === 'response.content_part.done') {
      const field = partField(obj(e.data.part))
      if (field) add(plan, e, ['part', field], textOf(partKey(e.data)))
    }
    if (e.type === 'response.output_item.done') itemText(plan, e, obj(e.data.item), ['item'], text, { done: false })
    if (e.type === 'response.done') {
      const first = { done: false }
      arr(obj(e.data.response)?.output).forEach((it, p) => {
        itemText(plan, e, obj(it), ['response', 'output', p], text, first)
      })
    }
  }
  // The items the server echoed into the conversation (conversation.item.done and its kin) say the same.
  for (const e of all) {
    const item = obj(e.data.item)
    if (e.from === 'server' && e.type.startsWith('conversation.item.') && items.has(str(item?.id) ?? ''))
      itemText(plan, e, item, ['item'], text, { done: false })
  }
  return plan
}

function planCall(all: readonly RealtimeEvent[], mine: readonly RealtimeEvent[], call: LlmToolCall, part: 'name' | 'arguments', value: string): Plan {
  const plan: Plan = new Map()
  // The call's item ids, learned from the events that name its call_id; without a call_id, its output index.
  const items = new Set<string>()
  for (const e of mine) {
    const item = obj(e.data.item)
    if (call.id === undefined || (e.data.call_id !== call.id && item?.call_id !== call.id)) continue
    const id = str(e.data.item_id) ?? str(item?.id)
    if (id !== undefined) items.add(id)
  }
  const recorded = part === 'name' ? call.name : call.argumentsText
  const isCall = (d: Record<string, unknown>, at: number | undefined): boolean =>
    call.id !== undefined ? d.call_id === call.id || items.has(str(d.item_id) ?? str(d.id) ?? '') : at === call.index
  const deltas = mine.filter((e) => e.type === 'response.function_call_arguments.delta' && isCall(e.data, index(e.data.output_index)))
  if (part === 'arguments') {
    const pieces = splitLike(
      value,
      deltas.map((e) => str(e.data.delta) ?? ''),
    )
    deltas.forEach((e, i) => {
      add(plan, e, ['delta'], pieces[i])
    })
  }
  /**
   * An event or item that carries the call's whole name or arguments: changed. One that carries a part (an
   * `added` item's empty arguments, which the deltas then fill) is left as recorded.
   */
  const carry = (e: RealtimeEvent, d: Record<string, unknown> | undefined, base: Array<string | number>, at: number | undefined) => {
    if (d && isCall(d, at) && d[part] === recorded) add(plan, e, [...base, part], value)
  }
  for (const e of mine) {
    const at = index(e.data.output_index)
    if (e.type === 'response.function_call_arguments.done') carry(e, e.data, [], at)
    if (e.type === 'response.output_item.added' || e.type === 'response.output_item.done') carry(e, obj(e.data.item), ['item'], at)
    if (e.type === 'response.done')
      arr(obj(e.data.response)?.output).forEach((it, p) => {
        carry(e, obj(it), ['response', 'output', p], p)
      })
  }
  for (const e of all) {
    const item = obj(e.data.item)
    if (e.from === 'server' && e.type.startsWith('conversation.item.') && str(item?.type) === 'function_call') carry(e, item, ['item'], undefined)
  }
  return plan
}

/** Validates a `realtime.*` patch against its exchange up front (resolvePatches calls this): throws TR_INVALID_PATCH. */
export function validateRealtimePatch(trace: Pick<Trace, 'bodies' | 'meta'>, x: Exchange, text: string, a: RealtimePatchAction): void {
  planFor(trace, x, text, a)
}

/**
 * Applies a `realtime.*` patch: the edited messages get new bodies (added to `trace.bodies`), cut into as many
 * frames as recorded; then the session is read back to check it says what the patch asked.
 */
export function applyRealtimePatch(trace: Pick<Trace, 'bodies' | 'meta'>, x: Exchange, text: string, a: RealtimePatchAction): void {
  const plan = planFor(trace, x, text, a)
  const messages = (x.websocket as NonNullable<Exchange['websocket']>).messages
  for (const [i, edits] of plan) {
    const m = messages[i] as WebSocketMessage
    const before = decodedText(trace, m.body, []) as string
    const after = new TextEncoder().encode(editJson(before, edits))
    const body = bodyFromChunks(framesLike(after, m))
    trace.bodies.set(body.ref.digest, body.bytes)
    messages[i] = { ...m, body: body.ref }
  }
  const view = readRealtimeResponses(x.request.url, realtimeEvents(trace, x)).view.responses?.[a.response]
  const t = a.target
  let ok = view !== undefined
  if (view && t.field === 'output_text') ok = view.outputText === a.value
  if (view && t.field === 'tool_call') {
    const c = view.toolCalls[t.index]
    ok =
      c !== undefined &&
      (t.part === 'name'
        ? c.name === a.value
        : typeof a.value === 'string'
          ? c.argumentsText === a.value
          : canonicalJson(c.arguments) === canonicalJson(a.value))
  }
  if (!ok)
    throw new ToolReplayError(
      ErrorCodes.INTERNAL,
      `Patch "${text}" on exchange #${x.seq} did not produce a session that reads back as asked. This is a bug in Tool Replay; please report it with the trace.`,
      { details: { patch: text, seq: x.seq } },
    )
}

/** New message bytes cut into as many frames as the recorded message had, in proportion to their sizes. */
function framesLike(bytes: Uint8Array, m: WebSocketMessage): Array<{ bytes: Uint8Array; atMs: number }> {
  const chunks = m.body.chunks
  if (chunks.length <= 1) return [{ bytes, atMs: chunks[0]?.atMs ?? m.atMs }]
  const total = chunks.reduce((n, c) => n + c.size, 0) || 1
  const out: Array<{ bytes: Uint8Array; atMs: number }> = []
  let from = 0
  let cum = 0
  chunks.forEach((c, i) => {
    cum += c.size
    const to = i === chunks.length - 1 ? bytes.byteLength : Math.round((cum / total) * bytes.byteLength)
    out.push({ bytes: bytes.subarray(from, Math.max(from, to)), atMs: c.atMs })
    from = Math.max(from, to)
  })
  return out
}
