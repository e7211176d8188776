/**
 * `llm.*` patches on Chat Completions: the JSON `choices[0].message`, or the chunks of a stream (content
 * deltas re-split like the recording, tool call fragments by `index`, `finish_reason`). Choice 0 only.
 */
import { arr, index, obj, str } from './json-access.ts'
import { firstChoice } from './openai-chat.ts'
import { type JsonPlan, type LlmEdit, PlanError, type StreamEvent, StreamPlan } from './patch-plan.ts'
import { splitLike } from './sse-segments.ts'

/** Edits of a `chat.completion` body. */
export function planChatJson(body: Record<string, unknown>, e: LlmEdit): JsonPlan {
  const first = firstChoice(body)
  if (!first) throw new PlanError('the response has no choices')
  const base = ['choices', first.position]
  if (e.field === 'output_text') return [{ path: [...base, 'message', 'content'], value: e.text }]
  if (e.field === 'finish') return [{ path: [...base, 'finish_reason'], value: e.finish }]
  const call = obj(arr(obj(first.choice.message)?.tool_calls)[e.wireIndex])
  if (!call) throw new PlanError('legacy `function_call` responses cannot be patched; patch the body with $.path=JSON')
  const fnKey = obj(call.custom) ? 'custom' : 'function'
  const path = [...base, 'message', 'tool_calls', e.wireIndex, fnKey]
  if (e.part === 'name') return [{ path: [...path, 'name'], value: e.name }]
  return [{ path: [...path, fnKey === 'custom' ? 'input' : 'arguments'], value: e.text }]
}

/** Edits of the chunks of a streamed chat completion; never adds or removes a chunk. */
export function planChatStream(events: StreamEvent[], e: LlmEdit): StreamPlan {
  const plan = new StreamPlan()
  const chunks = events.flatMap((ev) => {
    const first = firstChoice(ev.data)
    return first ? [{ ev, k: first.position, choice: first.choice, delta: obj(first.choice.delta) }] : []
  })
  if (e.field === 'output_text') {
    const deltas = chunks.filter((c) => typeof c.delta?.content === 'string')
    if (deltas.length === 0) {
      // A reply that only called tools: the text goes into the first chunk's delta (content was null).
      const c = chunks.find((x) => x.delta !== undefined)
      if (!c) throw new PlanError('the stream has no delta to carry text')
      plan.set(c.ev.seg, ['choices', c.k, 'delta', 'content'], e.text)
      return plan
    }
    const pieces = splitLike(
      e.text,
      deltas.map((c) => c.delta?.content as string),
    )
    deltas.forEach((c, i) => {
      plan.set(c.ev.seg, ['choices', c.k, 'delta', 'content'], pieces[i])
    })
    return plan
  }
  if (e.field === 'finish') {
    const ends = chunks.filter((c) => typeof c.choice.finish_reason === 'string')
    if (ends.length === 0) throw new PlanError('the stream has no finish_reason to replace (it ended early)')
    for (const c of ends) plan.set(c.ev.seg, ['choices', c.k, 'finish_reason'], e.finish)
    return plan
  }
  const parts: Array<{ seg: number; path: Array<string | number>; fn: Record<string, unknown>; custom: boolean }> = []
  for (const c of chunks) {
    arr(c.delta?.tool_calls).forEach((t, j) => {
      const d = obj(t)
      if (!d || (index(d.index) ?? j) !== e.wireIndex) return
      const custom = obj(d.custom) !== undefined
      const fn = obj(d.function) ?? obj(d.custom)
      if (fn) parts.push({ seg: c.ev.seg, path: ['choices', c.k, 'delta', 'tool_calls', j, custom ? 'custom' : 'function'], fn, custom })
    })
  }
  if (parts.length === 0) throw new PlanError(`the stream has no fragments of tool call index ${e.wireIndex}`)
  if (e.part === 'name') {
    // The SDK keeps the last non-empty name it sees: every fragment that names the call gets the new name.
    const named = parts.filter((p) => str(p.fn.name))
    for (const p of named.length > 0 ? named : parts.slice(0, 1)) plan.set(p.seg, [...p.path, 'name'], e.name)
    return plan
  }
  const key = (p: (typeof parts)[number]) => (p.custom ? 'input' : 'arguments')
  const fragments = parts.filter((p) => typeof p.fn[key(p)] === 'string')
  if (fragments.length === 0) {
    const p = parts[0] as (typeof parts)[number]
    plan.set(p.seg, [...p.path, key(p)], e.text)
    return plan
  }
  const pieces = splitLike(
    e.text,
    fragments.map((p) => p.fn[key(p)] as string),
  )
  fragments.forEach((p, i) => {
    plan.set(p.seg, [...p.path, key(p)], pieces[i])
  })
  return plan
}
