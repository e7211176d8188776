/**
 * AWS Bedrock Converse and ConverseStream (`POST /model/{modelId}/converse` and `/converse-stream`, as
 * `@aws-sdk/client-bedrock-runtime` calls them): the request's `system` and `messages` (content blocks:
 * text, `toolUse`, `toolResult`, `reasoningContent`) and `toolConfig.tools[].toolSpec`; the response as
 * JSON (`output.message`, `stopReason`, `usage`), or as the events of its binary event stream (messageStart,
 * contentBlockStart / Delta / Stop, messageStop, metadata; exception frames as errors).
 */
import { stringifyJson } from '../json-codec.ts'
import { toolCall, toolCallFromValue } from './content.ts'
import { arr, index, num, obj, str } from './json-access.ts'
import type { LlmMessage, LlmRequestPart, LlmResponsePart, LlmStreamEvent, LlmToolCall, LlmUsage } from './llm-types.ts'

const PATH = /\/model\/([^/]+)\/(converse|converse-stream)$/

/** True for a Converse or ConverseStream path. */
export function isConversePath(path: string): boolean {
  return PATH.test(path)
}

/** The model id of a Converse path (URL-decoded: ARNs and inference profiles are escaped). */
export function converseModelFromPath(path: string): string | undefined {
  const m = PATH.exec(path)
  if (!m) return undefined
  try {
    return decodeURIComponent(m[1] as string)
  } catch {
    return m[1]
  }
}

/** Reads a Converse request body. */
export function readConverseRequest(req: Record<string, unknown>, path: string): LlmRequestPart {
  const input: LlmMessage[] = []
  const system = blocksText(arr(req.system))
  if (system) input.push({ role: 'system', text: system })
  for (const m of arr(req.messages)) {
    const msg = obj(m)
    if (!msg) continue
    const role = str(msg.role) ?? 'unknown'
    const blocks = arr(msg.content)
    const calls: LlmToolCall[] = []
    const results: LlmMessage[] = []
    blocks.forEach((b, position) => {
      const block = obj(b)
      const use = obj(block?.toolUse)
      if (use) calls.push(toolCallFromValue(position, str(use.toolUseId), str(use.name) ?? '', use.input ?? {}))
      const result = obj(block?.toolResult)
      if (result) {
        const r: LlmMessage = { role: 'tool', text: blocksText(arr(result.content)) }
        const id = str(result.toolUseId)
        if (id !== undefined) r.toolCallId = id
        if (result.status === 'error') r.isError = true
        results.push(r)
      }
    })
    input.push(...results)
    const text = blocksText(blocks)
    if (text !== '' || calls.length > 0 || results.length === 0) {
      const out: LlmMessage = { role, text }
      if (calls.length > 0) out.toolCalls = calls
      input.push(out)
    }
  }
  const tools: string[] = []
  for (const t of arr(obj(req.toolConfig)?.tools)) {
    const name = str(obj(obj(t)?.toolSpec)?.name)
    if (name !== undefined) tools.push(name)
  }
  const part: LlmRequestPart = { stream: path.endsWith('/converse-stream'), tools, input }
  const model = converseModelFromPath(path)
  if (model !== undefined) part.model = model
  return part
}

/** Text of content blocks (`{text}`, tool results' `{json}`), other blocks as placeholders; tool and cache blocks left out. */
function blocksText(blocks: unknown[]): string {
  const out: string[] = []
  for (const b of blocks) {
    const block = obj(b)
    if (!block) continue
    const text = str(block.text)
    if (text !== undefined) out.push(text)
    else if (block.json !== undefined) out.push(stringifyJson(block.json))
    else {
      const kind = Object.keys(block).find((k) => !['toolUse', 'toolResult', 'cachePoint', 'reasoningContent'].includes(k))
      if (kind !== undefined) out.push(`[${kind}]`)
    }
  }
  return out.join('\n')
}

/** Reads a Converse response body. */
export function readConverseResponse(body: Record<string, unknown>): LlmResponsePart {
  const part: LlmResponsePart = { outputText: '', reasoning: [], toolCalls: [], complete: true }
  const texts: string[] = []
  arr(obj(obj(body.output)?.message)?.content).forEach((b, position) => {
    const block = obj(b)
    if (!block) return
    const text = str(block.text)
    if (text !== undefined) texts.push(text)
    const use = obj(block.toolUse)
    if (use) part.toolCalls.push(toolCallFromValue(position, str(use.toolUseId), str(use.name) ?? '', use.input ?? {}))
    const reasoning = obj(block.reasoningContent)
    const thought = str(obj(reasoning?.reasoningText)?.text)
    if (thought) part.reasoning.push(thought)
    else if (reasoning?.redactedContent !== undefined) part.reasoning.push('[redacted reasoning]')
  })
  part.outputText = texts.join('')
  const finish = str(body.stopReason)
  if (finish !== undefined) part.finish = finish
  const usage = obj(body.usage)
  if (usage) part.usage = readUsage(usage)
  return part
}

function readUsage(usage: Record<string, unknown>): LlmUsage {
  const u: LlmUsage = {}
  const set = (k: keyof LlmUsage, v: unknown) => {
    const n = num(v)
    if (n !== undefined) u[k] = n
  }
  set('input', usage.inputTokens)
  set('output', usage.outputTokens)
  set('total', usage.totalTokens)
  set('cachedInput', usage.cacheReadInputTokens)
  return u
}

interface Block {
  text: string
  reasoning: string
  toolUse?: { id?: string; name: string; input: string }
}

/** Reassembles ConverseStream events (content blocks by `contentBlockIndex`). */
export function readConverseEvents(events: LlmStreamEvent[]): LlmResponsePart {
  const part: LlmResponsePart = { outputText: '', reasoning: [], toolCalls: [], complete: false }
  const blocks = new Map<number, Block>()
  const block = (i: number) => {
    let b = blocks.get(i)
    if (!b) {
      b = { text: '', reasoning: '' }
      blocks.set(i, b)
    }
    return b
  }
  for (const e of events) {
    const data = obj(e.data)
    if (e.exception) {
      part.error = `${e.event ?? 'exception'}: ${str(data?.message) ?? str(data?.Message) ?? 'stream error'}`
      continue
    }
    if (!data) continue
    const i = index(data.contentBlockIndex)
    if (e.event === 'contentBlockStart' && i !== undefined) {
      const use = obj(obj(data.start)?.toolUse)
      const b = block(i)
      if (use) {
        b.toolUse = { name: str(use.name) ?? '', input: '' }
        const id = str(use.toolUseId)
        if (id !== undefined) b.toolUse.id = id
      }
    } else if (e.event === 'contentBlockDelta' && i !== undefined) {
      const delta = obj(data.delta)
      const b = block(i)
      const text = str(delta?.text)
      if (text !== undefined) b.text += text
      const input = str(obj(delta?.toolUse)?.input)
      if (input !== undefined) {
        b.toolUse ??= { name: '', input: '' }
        b.toolUse.input += input
      }
      const reasoning = str(obj(delta?.reasoningContent)?.text)
      if (reasoning !== undefined) b.reasoning += reasoning
    } else if (e.event === 'messageStop') {
      const finish = str(data.stopReason)
      if (finish !== undefined) part.finish = finish
      part.complete = true
    } else if (e.event === 'metadata') {
      const usage = obj(data.usage)
      if (usage) part.usage = readUsage(usage)
    }
  }
  const ordered = [...blocks.entries()].sort(([a], [b]) => a - b)
  part.outputText = ordered.map(([, b]) => b.text).join('')
  for (const [, b] of ordered) if (b.reasoning) part.reasoning.push(b.reasoning)
  for (const [i, b] of ordered) if (b.toolUse) part.toolCalls.push(toolCall(i, b.toolUse.id, b.toolUse.name, b.toolUse.input === '' ? '{}' : b.toolUse.input))
  return part
}
