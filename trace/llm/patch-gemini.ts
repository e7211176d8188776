/**
 * `llm.*` patches on Gemini generateContent: candidate 0's text parts, `functionCall` parts (the N-th call in
 * order, as the SDK's `functionCalls` lists them) and `finishReason`, in a JSON body or across the chunks of
 * an `alt=sse` stream (text re-split over the recorded text parts). No part or chunk is added or removed.
 */

import { firstCandidate } from './gemini.ts'
import { arr, obj, str } from './json-access.ts'
import { type JsonPlan, type LlmEdit, PlanError, type StreamEvent, StreamPlan } from './patch-plan.ts'
import { splitLike } from './sse-segments.ts'

interface PartRef {
  /** Stream event segment (0 for a JSON body). */
  seg: number
  path: Array<string | number>
  part: Record<string, unknown>
}

function partsOf(body: Record<string, unknown>, seg: number): PartRef[] {
  const first = firstCandidate(body)
  if (!first) return []
  const base = ['candidates', first.position, 'content', 'parts']
  return arr(obj(first.candidate.content)?.parts).flatMap((p, i) => {
    const part = obj(p)
    return part ? [{ seg, path: [...base, i], part }] : []
  })
}

function objectArgs(e: Extract<LlmEdit, { part: 'arguments' }>): Record<string, unknown> {
  const v = obj(e.value)
  if (!v) throw new PlanError('Gemini function call args must be a JSON object, e.g. llm.tool_call[0].arguments={"city":"Oslo"}')
  return v
}

type Edits = Array<{ seg: number; path: Array<string | number>; value: unknown }>

function planParts(parts: PartRef[], finishes: Array<{ seg: number; path: Array<string | number> }>, e: LlmEdit): Edits {
  if (e.field === 'finish') {
    if (finishes.length === 0) throw new PlanError('the response has no finishReason to replace (it ended early)')
    return finishes.map((f) => ({ ...f, value: e.finish }))
  }
  if (e.field === 'output_text') {
    const texts = parts.filter((p) => typeof p.part.text === 'string' && p.part.thought !== true)
    if (texts.length === 0) throw new PlanError('the response has no text part to replace (it only calls functions); Tool Replay does not add parts')
    const pieces = splitLike(
      e.text,
      texts.map((p) => p.part.text as string),
    )
    return texts.map((p, i) => ({ seg: p.seg, path: [...p.path, 'text'], value: pieces[i] }))
  }
  const call = parts.filter((p) => obj(p.part.functionCall) !== undefined)[e.wireIndex]
  if (!call) throw new PlanError(`the response has no function call ${e.wireIndex}`)
  if (e.part === 'name') return [{ seg: call.seg, path: [...call.path, 'functionCall', 'name'], value: e.name }]
  return [{ seg: call.seg, path: [...call.path, 'functionCall', 'args'], value: objectArgs(e) }]
}

function finishesOf(body: Record<string, unknown>, seg: number): Array<{ seg: number; path: Array<string | number> }> {
  const first = firstCandidate(body)
  return first && str(first.candidate.finishReason) !== undefined ? [{ seg, path: ['candidates', first.position, 'finishReason'] }] : []
}

/** Edits of a `GenerateContentResponse` body. */
export function planGeminiJson(body: Record<string, unknown>, e: LlmEdit): JsonPlan {
  return planParts(partsOf(body, 0), finishesOf(body, 0), e).map(({ path, value }) => ({ path, value }))
}

/** Edits of the chunks of an `alt=sse` stream. */
export function planGeminiStream(events: StreamEvent[], e: LlmEdit): StreamPlan {
  const plan = new StreamPlan()
  const parts = events.flatMap((ev) => partsOf(ev.data, ev.seg))
  const finishes = events.flatMap((ev) => finishesOf(ev.data, ev.seg))
  for (const x of planParts(parts, finishes, e)) plan.set(x.seg, x.path, x.value)
  return plan
}
