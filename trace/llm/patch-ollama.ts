/**
 * `llm.*` patches on Ollama's native API: `message.content` (chat) or `response` (generate), the N-th
 * `message.tool_calls[].function` and `done_reason`, in a JSON body or across the lines of an NDJSON stream
 * (text re-split over the recorded pieces). No line is added or removed.
 */
import { arr, obj } from './json-access.ts'
import { type JsonPlan, type LlmEdit, PlanError, type StreamEvent, StreamPlan } from './patch-plan.ts'
import { splitLike } from './sse-segments.ts'

type Edits = Array<{ seg: number; path: Array<string | number>; value: unknown }>

function plan(lines: StreamEvent[], e: LlmEdit): Edits {
  if (e.field === 'finish') {
    const done = lines.filter((l) => l.data.done === true)
    if (done.length === 0) throw new PlanError('the response has no final `done` line carrying a done_reason (it ended early)')
    return done.map((l) => ({ seg: l.seg, path: ['done_reason'], value: e.finish }))
  }
  if (e.field === 'output_text') {
    const pieces = lines.flatMap((l) => {
      const message = obj(l.data.message)
      if (typeof message?.content === 'string') return [{ seg: l.seg, path: ['message', 'content'], text: message.content }]
      return typeof l.data.response === 'string' ? [{ seg: l.seg, path: ['response'], text: l.data.response }] : []
    })
    if (pieces.length === 0) throw new PlanError('the response has no content to replace')
    const texts = splitLike(
      e.text,
      pieces.map((p) => p.text),
    )
    return pieces.map((p, i) => ({ seg: p.seg, path: p.path, value: texts[i] }))
  }
  const calls = lines.flatMap((l) => arr(obj(l.data.message)?.tool_calls).map((_, j) => ({ seg: l.seg, path: ['message', 'tool_calls', j, 'function'] })))
  const call = calls[e.wireIndex]
  if (!call) throw new PlanError(`the response has no tool call ${e.wireIndex}`)
  if (e.part === 'name') return [{ seg: call.seg, path: [...call.path, 'name'], value: e.name }]
  const args = obj(e.value)
  if (!args) throw new PlanError('Ollama tool call arguments are a JSON object, e.g. llm.tool_call[0].arguments={"city":"Oslo"}')
  return [{ seg: call.seg, path: [...call.path, 'arguments'], value: args }]
}

/** Edits of a non-streamed `/api/chat` or `/api/generate` body. */
export function planOllamaJson(body: Record<string, unknown>, e: LlmEdit): JsonPlan {
  return plan([{ seg: 0, type: '', data: body }], e).map(({ path, value }) => ({ path, value }))
}

/** Edits of the lines of an NDJSON stream. */
export function planOllamaStream(lines: StreamEvent[], e: LlmEdit): StreamPlan {
  const out = new StreamPlan()
  for (const x of plan(lines, e)) out.set(x.seg, x.path, x.value)
  return out
}
