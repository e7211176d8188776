/**
 * `llm.*` patches on Anthropic Messages: the `content` blocks and `stop_reason` of a message body, or a
 * stream's events (text_delta and input_json_delta fragments re-split like the recording, the tool_use
 * block's name in content_block_start, stop_reason in message_delta). No event is added or removed.
 */
import { arr, index, obj, str } from './json-access.ts'
import { type JsonPlan, type LlmEdit, PlanError, type StreamEvent, StreamPlan } from './patch-plan.ts'
import { splitLike } from './sse-segments.ts'

function noText(): PlanError {
  return new PlanError('the message has no text block to replace (it only calls tools); Tool Replay does not add content blocks')
}

function objectInput(e: Extract<LlmEdit, { part: 'arguments' }>): Record<string, unknown> {
  const v = obj(e.value)
  if (!v) throw new PlanError('an Anthropic tool_use input must be a JSON object, e.g. llm.tool_call[0].arguments={"city":"Oslo"}')
  return v
}

/** Edits of a `message` body. */
export function planAnthropicJson(body: Record<string, unknown>, e: LlmEdit): JsonPlan {
  const content = arr(body.content)
  if (e.field === 'finish') return [{ path: ['stop_reason'], value: e.finish }]
  if (e.field === 'output_text') {
    const texts = content.flatMap((b, i) => (str(obj(b)?.type) === 'text' ? [i] : []))
    if (texts.length === 0) throw noText()
    return texts.map((i, n) => ({ path: ['content', i, 'text'], value: n === 0 ? e.text : '' }))
  }
  if (e.part === 'name') return [{ path: ['content', e.wireIndex, 'name'], value: e.name }]
  return [{ path: ['content', e.wireIndex, 'input'], value: objectInput(e) }]
}

/** Edits of the events of a streamed message. */
export function planAnthropicStream(events: StreamEvent[], e: LlmEdit): StreamPlan {
  const plan = new StreamPlan()
  if (e.field === 'finish') {
    const deltas = events.filter((ev) => ev.type === 'message_delta' && obj(ev.data.delta) !== undefined)
    if (deltas.length === 0) throw new PlanError('the stream has no message_delta carrying a stop_reason (it ended early)')
    for (const ev of deltas) plan.set(ev.seg, ['delta', 'stop_reason'], e.finish)
    return plan
  }
  const starts = events.filter((ev) => ev.type === 'content_block_start')
  const blockOf = (ev: StreamEvent) => index(ev.data.index)
  const fragments = (b: number, deltaType: string, key: string) =>
    events.filter(
      (ev) =>
        ev.type === 'content_block_delta' && blockOf(ev) === b && str(obj(ev.data.delta)?.type) === deltaType && typeof obj(ev.data.delta)?.[key] === 'string',
    )
  if (e.field === 'output_text') {
    const texts = starts.filter((ev) => str(obj(ev.data.content_block)?.type) === 'text')
    if (texts.length === 0) throw noText()
    texts.forEach((start, n) => {
      const b = blockOf(start) as number
      const text = n === 0 ? e.text : ''
      const deltas = fragments(b, 'text_delta', 'text')
      if (deltas.length === 0) plan.set(start.seg, ['content_block', 'text'], text)
      const pieces = splitLike(
        text,
        deltas.map((ev) => obj(ev.data.delta)?.text as string),
      )
      deltas.forEach((ev, i) => {
        plan.set(ev.seg, ['delta', 'text'], pieces[i])
      })
    })
    return plan
  }
  const start = starts.find((ev) => blockOf(ev) === e.wireIndex)
  if (!start) throw new PlanError(`the stream has no content block ${e.wireIndex}`)
  if (e.part === 'name') {
    plan.set(start.seg, ['content_block', 'name'], e.name)
    return plan
  }
  const deltas = fragments(e.wireIndex, 'input_json_delta', 'partial_json')
  if (deltas.length === 0) {
    plan.set(start.seg, ['content_block', 'input'], objectInput(e))
    return plan
  }
  const pieces = splitLike(
    e.text,
    deltas.map((ev) => obj(ev.data.delta)?.partial_json as string),
  )
  deltas.forEach((ev, i) => {
    plan.set(ev.seg, ['delta', 'partial_json'], pieces[i])
  })
  return plan
}
