/**
 * Handoffs of the OpenAI Agents SDK (`@openai/agents`): an agent hands the run to another by calling a function
 * tool the SDK offers for it (`transfer_to_<agent>`, described "Handoff to the NAME agent to handle the
 * request. ..."), and the SDK answers that call with the tool output `{"assistant": "NAME"}` before the next
 * agent's first model call (openai/openai-agents-js packages/agents-core/src/handoff.ts `getTransferMessage`,
 * `defaultHandoffToolDescription`). Either sign marks the call, and its result, as a handoff.
 */
import { tryParseJson } from '../json-codec.ts'
import { arr, obj, str } from './json-access.ts'
import type { LlmView } from './llm-types.ts'

const DESCRIPTION = /^Handoff to the ([\s\S]+) agent to handle the request\./

/** The offered tools that are handoffs (Responses `{name, description}` or Chat `{function: {name, description}}`): tool name → agent. */
export function handoffTools(req: Record<string, unknown>): Map<string, string> {
  const out = new Map<string, string>()
  for (const t of arr(req.tools)) {
    const tool = obj(obj(t)?.function) ?? obj(t)
    const name = str(tool?.name)
    const agent = DESCRIPTION.exec(str(tool?.description) ?? '')?.[1]
    if (name !== undefined && agent !== undefined) out.set(name, agent)
  }
  return out
}

/** The agent a tool output hands the run to: the output is exactly `{"assistant": NAME}`. */
export function handoffOutput(text: string): string | undefined {
  if (!text.startsWith('{')) return undefined
  const v = obj(tryParseJson(text)?.value)
  return v && Object.keys(v).length === 1 ? str(v.assistant) : undefined
}

/** Marks the view's handoff calls (by the offered tools) and handoff results (by their output). */
export function markHandoffs(view: LlmView, req: Record<string, unknown>): void {
  const tools = handoffTools(req)
  const names = new Map<string, string>()
  for (const c of [...view.toolCalls, ...view.input.flatMap((m) => m.toolCalls ?? [])]) {
    const agent = tools.get(c.name)
    if (agent !== undefined) c.handoff = agent
    if (c.id !== undefined && c.handoff !== undefined) names.set(c.id, c.handoff)
  }
  for (const m of view.input) {
    if (m.role !== 'tool') continue
    const agent = handoffOutput(m.text) ?? names.get(m.toolCallId ?? '')
    if (agent !== undefined) m.handoff = agent
  }
  for (const r of view.toolResults) {
    const agent = handoffOutput(r.output) ?? names.get(r.callId)
    if (agent !== undefined) r.handoff = agent
  }
}
