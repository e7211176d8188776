/**
 * `llm.*` patches on Bedrock Converse: the JSON `output.message.content` blocks and `stopReason`, or the
 * events of a ConverseStream (text deltas re-split like the recording, the tool use's name in its
 * contentBlockStart and its `input` fragments in contentBlockDelta, `stopReason` in messageStop). The event
 * stream frames are re-encoded by the caller; no frame is added or removed.
 */
import { arr, index, obj, str } from './json-access.ts'
import { type JsonPlan, type LlmEdit, PlanError, type StreamEvent, StreamPlan } from './patch-plan.ts'
import { splitLike } from './sse-segments.ts'

function noText(): PlanError {
  return new PlanError('the message has no text block to replace (it only uses tools); Tool Replay does not add content blocks')
}

function objectInput(e: Extract<LlmEdit, { part: 'arguments' }>): Record<string, unknown> {
  const v = obj(e.value)
  if (!v) throw new PlanError('a Bedrock toolUse input must be a JSON object, e.g. llm.tool_call[0].arguments={"city":"Oslo"}')
  return v
}

/** Edits of a Converse response body. */
export function planConverseJson(body: Record<string, unknown>, e: LlmEdit): JsonPlan {
  if (e.field === 'finish') return [{ path: ['stopReason'], value: e.finish }]
  const base = ['output', 'message', 'content']
  const content = arr(obj(obj(body.output)?.message)?.content)
  if (e.field === 'output_text') {
    const texts = content.flatMap((b, i) => (str(obj(b)?.text) !== undefined ? [i] : []))
    if (texts.length === 0) throw noText()
    return texts.map((i, n) => ({ path: [...base, i, 'text'], value: n === 0 ? e.text : '' }))
  }
  if (!obj(obj(content[e.wireIndex])?.toolUse)) throw new PlanError(`content block ${e.wireIndex} is not a toolUse`)
  if (e.part === 'name') return [{ path: [...base, e.wireIndex, 'toolUse', 'name'], value: e.name }]
  return [{ path: [...base, e.wireIndex, 'toolUse', 'input'], value: objectInput(e) }]
}

/** Edits of the events of a ConverseStream. */
export function planConverseStream(events: StreamEvent[], e: LlmEdit): StreamPlan {
  const plan = new StreamPlan()
  if (e.field === 'finish') {
    const stops = events.filter((ev) => ev.type === 'messageStop')
    if (stops.length === 0) throw new PlanError('the stream has no messageStop carrying a stopReason (it ended early)')
    for (const ev of stops) plan.set(ev.seg, ['stopReason'], e.finish)
    return plan
  }
  const deltas = (key: 'text' | 'toolUse', block?: number) =>
    events.filter(
      (ev) => ev.type === 'contentBlockDelta' && obj(ev.data.delta)?.[key] !== undefined && (block === undefined || index(ev.data.contentBlockIndex) === block),
    )
  if (e.field === 'output_text') {
    const texts = deltas('text').filter((ev) => typeof obj(ev.data.delta)?.text === 'string')
    if (texts.length === 0) throw noText()
    const pieces = splitLike(
      e.text,
      texts.map((ev) => obj(ev.data.delta)?.text as string),
    )
    texts.forEach((ev, i) => {
      plan.set(ev.seg, ['delta', 'text'], pieces[i])
    })
    return plan
  }
  if (e.part === 'name') {
    const start = events.find((ev) => ev.type === 'contentBlockStart' && index(ev.data.contentBlockIndex) === e.wireIndex && obj(obj(ev.data.start)?.toolUse))
    if (!start) throw new PlanError(`the stream has no contentBlockStart for tool use block ${e.wireIndex}`)
    plan.set(start.seg, ['start', 'toolUse', 'name'], e.name)
    return plan
  }
  objectInput(e)
  const fragments = deltas('toolUse', e.wireIndex).filter((ev) => typeof obj(obj(ev.data.delta)?.toolUse)?.input === 'string')
  if (fragments.length === 0) throw new PlanError(`the stream has no input fragments for tool use block ${e.wireIndex}`)
  const pieces = splitLike(
    e.text,
    fragments.map((ev) => obj(obj(ev.data.delta)?.toolUse)?.input as string),
  )
  fragments.forEach((ev, i) => {
    plan.set(ev.seg, ['delta', 'toolUse', 'input'], pieces[i])
  })
  return plan
}
