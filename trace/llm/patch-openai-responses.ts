/**
 * `llm.*` patches on the Responses API: the response object's `output` items and `status`, or a stream's
 * events. In a stream every place that carries the patched value changes together, so the SDK's
 * accumulated snapshot and the final `response.completed` agree: text deltas (re-split like the
 * recording) and `output_text.done`, `content_part.done`, `output_item.done` and the lifecycle snapshots;
 * argument deltas and `function_call_arguments.done`; the final event's type and `status`. No event is
 * added or removed, so `sequence_number`s stay as recorded.
 */
import { arr, index, obj, str } from './json-access.ts'
import { type JsonPlan, type LlmEdit, PlanError, type StreamEvent, StreamPlan } from './patch-plan.ts'
import { splitLike } from './sse-segments.ts'

type Path = Array<string | number>

/** Text parts (output item position, content index) of an output list, in order. */
function textParts(output: unknown[]): Array<{ p: number; c: number }> {
  const out: Array<{ p: number; c: number }> = []
  output.forEach((it, p) => {
    const item = obj(it)
    if (str(item?.type) !== 'message') return
    arr(item?.content).forEach((part, c) => {
      if (str(obj(part)?.type) === 'output_text') out.push({ p, c })
    })
  })
  return out
}

/** Edits of an output list at `base` (a JSON body, or a lifecycle event's `response`). */
function outputEdits(response: Record<string, unknown>, base: Path, e: LlmEdit, callMatch?: (item: Record<string, unknown>) => boolean): JsonPlan {
  const output = arr(response.output)
  const edits: JsonPlan = []
  if (e.field === 'output_text') {
    textParts(output).forEach(({ p, c }, i) => {
      edits.push({ path: [...base, 'output', p, 'content', c, 'text'], value: i === 0 ? e.text : '' })
    })
    if (typeof response.output_text === 'string') edits.push({ path: [...base, 'output_text'], value: e.text })
    return edits
  }
  if (e.field === 'finish') {
    edits.push({ path: [...base, 'status'], value: e.finish })
    edits.push({ path: [...base, 'incomplete_details'], value: e.detail === undefined ? null : { reason: e.detail } })
    return edits
  }
  const p = callMatch ? output.findIndex((it) => obj(it) !== undefined && callMatch(obj(it) as Record<string, unknown>)) : e.wireIndex
  const item = obj(output[p])
  if (!item) return edits
  if (e.part === 'name') edits.push({ path: [...base, 'output', p, 'name'], value: e.name })
  else edits.push({ path: [...base, 'output', p, str(item.type) === 'custom_tool_call' ? 'input' : 'arguments'], value: e.text })
  return edits
}

/** Edits of a response object body. */
export function planResponsesJson(body: Record<string, unknown>, e: LlmEdit): JsonPlan {
  if (e.field === 'output_text' && textParts(arr(body.output)).length === 0) throw noText()
  return outputEdits(body, [], e)
}

function noText(): PlanError {
  return new PlanError('the response has no output_text part to replace (it only calls tools or reasons); Tool Replay does not add output items')
}

const LIFECYCLE = /^response\.(created|in_progress|queued|completed|incomplete|failed)$/
const FINAL = /^response\.(completed|incomplete|failed)$/

/** Edits of the events of a streamed response. */
export function planResponsesStream(events: StreamEvent[], e: LlmEdit): StreamPlan {
  const plan = new StreamPlan()
  if (e.field === 'finish') {
    const last = events.filter((ev) => FINAL.test(ev.type)).at(-1)
    if (!last) throw new PlanError('the stream has no final response event to replace (it ended early)')
    const type = `response.${e.finish}`
    plan.rename(last.seg, type)
    plan.set(last.seg, ['type'], type)
    for (const edit of outputEdits(obj(last.data.response) ?? {}, ['response'], e)) plan.set(last.seg, edit.path as Path, 'value' in edit ? edit.value : null)
    return plan
  }
  if (e.field === 'output_text') return planStreamText(events, e.text, plan)
  return planStreamToolCall(events, e, plan)
}

function planStreamText(events: StreamEvent[], text: string, plan: StreamPlan): StreamPlan {
  // Text parts as (output_index, content_index), in order; the first gets the text, the others become empty.
  const keys: string[] = []
  const note = (o: number | undefined, c: number | undefined) => {
    if (o === undefined || c === undefined) return
    const k = `${o}/${c}`
    if (!keys.includes(k)) keys.push(k)
  }
  for (const ev of events) {
    const isText =
      ev.type.startsWith('response.output_text.') || (ev.type.startsWith('response.content_part.') && str(obj(ev.data.part)?.type) === 'output_text')
    if (isText) note(index(ev.data.output_index), index(ev.data.content_index))
  }
  if (keys.length === 0) throw noText()
  keys.sort((x, y) => {
    const [a0, a1] = x.split('/').map(Number) as [number, number]
    const [b0, b1] = y.split('/').map(Number) as [number, number]
    return a0 - b0 || a1 - b1
  })
  const textOf = (k: string) => (k === keys[0] ? text : '')
  for (const k of keys) {
    const [o, c] = k.split('/').map(Number)
    const deltas = events.filter((ev) => ev.type === 'response.output_text.delta' && index(ev.data.output_index) === o && index(ev.data.content_index) === c)
    const pieces = splitLike(
      textOf(k),
      deltas.map((ev) => str(ev.data.delta) ?? ''),
    )
    deltas.forEach((ev, i) => {
      plan.set(ev.seg, ['delta'], pieces[i])
    })
    for (const ev of events) {
      if (index(ev.data.output_index) !== o) continue
      if (ev.type === 'response.output_text.done' && index(ev.data.content_index) === c) plan.set(ev.seg, ['text'], textOf(k))
      if (ev.type === 'response.content_part.done' && index(ev.data.content_index) === c) plan.set(ev.seg, ['part', 'text'], textOf(k))
      if (ev.type === 'response.output_item.done' && str(obj(arr(obj(ev.data.item)?.content)[c as number])?.type) === 'output_text')
        plan.set(ev.seg, ['item', 'content', c as number, 'text'], textOf(k))
    }
  }
  for (const ev of events) {
    if (!LIFECYCLE.test(ev.type)) continue
    const response = obj(ev.data.response)
    if (!response) continue
    for (const edit of outputEdits(response, ['response'], { field: 'output_text', text }))
      plan.set(ev.seg, edit.path as Path, 'value' in edit ? edit.value : null)
  }
  return plan
}

function planStreamToolCall(events: StreamEvent[], e: Extract<LlmEdit, { field: 'tool_call' }>, plan: StreamPlan): StreamPlan {
  const o = e.wireIndex
  const added = events.find((ev) => ev.type === 'response.output_item.added' && index(ev.data.output_index) === o)
  const item = obj(added?.data.item) ?? obj(events.find((ev) => ev.type === 'response.output_item.done' && index(ev.data.output_index) === o)?.data.item)
  if (!item) throw new PlanError(`the stream has no output item at output_index ${o}`)
  const custom = str(item.type) === 'custom_tool_call'
  const id = str(item.id)
  const callId = str(item.call_id)
  const matches = (it: Record<string, unknown>) => (id !== undefined && it.id === id) || (callId !== undefined && it.call_id === callId)
  const itemKey = custom ? 'input' : 'arguments'
  const deltaType = custom ? 'response.custom_tool_call_input.delta' : 'response.function_call_arguments.delta'
  const doneType = custom ? 'response.custom_tool_call_input.done' : 'response.function_call_arguments.done'
  const at = (ev: StreamEvent) => index(ev.data.output_index) === o
  if (e.part === 'name') {
    for (const ev of events) {
      if ((ev.type === 'response.output_item.added' || ev.type === 'response.output_item.done') && at(ev)) plan.set(ev.seg, ['item', 'name'], e.name)
      if (ev.type === doneType && at(ev) && 'name' in ev.data) plan.set(ev.seg, ['name'], e.name)
    }
  } else {
    const deltas = events.filter((ev) => ev.type === deltaType && at(ev))
    const pieces = splitLike(
      e.text,
      deltas.map((ev) => str(ev.data.delta) ?? ''),
    )
    deltas.forEach((ev, i) => {
      plan.set(ev.seg, ['delta'], pieces[i])
    })
    for (const ev of events) {
      if (ev.type === doneType && at(ev)) plan.set(ev.seg, [itemKey], e.text)
      if (ev.type === 'response.output_item.done' && at(ev)) plan.set(ev.seg, ['item', itemKey], e.text)
      // No deltas at all: the arguments arrive whole in the added item.
      if (deltas.length === 0 && ev.type === 'response.output_item.added' && at(ev)) plan.set(ev.seg, ['item', itemKey], e.text)
    }
  }
  for (const ev of events) {
    if (!LIFECYCLE.test(ev.type)) continue
    const response = obj(ev.data.response)
    if (!response) continue
    for (const edit of outputEdits(response, ['response'], e, matches)) plan.set(ev.seg, edit.path as Path, 'value' in edit ? edit.value : null)
  }
  return plan
}
