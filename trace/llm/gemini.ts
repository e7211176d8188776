/**
 * Google Gemini `generateContent` and `streamGenerateContent` (the Gemini API and Vertex AI, as
 * `@google/genai` calls them): the request's `systemInstruction`, `contents` (parts: text, `functionCall`,
 * `functionResponse`, thoughts) and `tools[].functionDeclarations`; the response as a
 * `GenerateContentResponse`, or as its SSE chunks (`alt=sse`, each a whole response whose parts add to the
 * previous ones). The model is named by the URL (`models/gemini-2.0-flash:generateContent`) and the
 * response's `modelVersion`. Only candidate 0 is read.
 */
import { stringifyJson } from '../json-codec.ts'
import { contentText, toolCallFromValue } from './content.ts'
import { arr, num, obj, str } from './json-access.ts'
import type { LlmMessage, LlmRequestPart, LlmResponsePart, LlmStreamEvent, LlmToolCall, LlmUsage } from './llm-types.ts'

/** `/v1beta/models/gemini-2.0-flash:streamGenerateContent` → "gemini-2.0-flash" (also Vertex's publishers/google/models/... paths). */
export function geminiModelFromPath(path: string): string | undefined {
  const m = /\/models\/([^/:]+):(?:stream)?[gG]enerateContent$/.exec(path)
  return m ? safeDecode(m[1] as string) : undefined
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s)
  } catch {
    return s
  }
}

/** Reads a generateContent request body. */
export function readGeminiRequest(req: Record<string, unknown>, path: string): LlmRequestPart {
  const input: LlmMessage[] = []
  const system = obj(req.systemInstruction) ?? obj(req.system_instruction)
  const systemText = system ? partsText(arr(system.parts)) : contentText(req.systemInstruction)
  if (systemText) input.push({ role: 'system', text: systemText })
  for (const c of arr(req.contents)) {
    const content = obj(c)
    if (!content) continue
    const role = str(content.role) === 'model' ? 'assistant' : (str(content.role) ?? 'user')
    const parts = arr(content.parts)
    const calls = functionCalls(parts)
    const results: LlmMessage[] = []
    for (const p of parts) {
      const response = obj(obj(p)?.functionResponse)
      if (!response) continue
      const r: LlmMessage = { role: 'tool', text: responseText(response.response) }
      const name = str(response.name)
      if (name !== undefined) r.name = name
      const id = str(response.id)
      if (id !== undefined) r.toolCallId = id
      results.push(r)
    }
    // Function responses travel in a user turn; they are listed as their own "tool" messages, like OpenAI's.
    input.push(...results)
    const text = partsText(parts)
    if (text !== '' || calls.length > 0 || results.length === 0) {
      const m: LlmMessage = { role, text }
      if (calls.length > 0) m.toolCalls = calls
      input.push(m)
    }
  }
  const tools: string[] = []
  for (const t of arr(req.tools)) {
    const tool = obj(t)
    if (!tool) continue
    const declarations = arr(tool.functionDeclarations ?? tool.function_declarations)
    for (const d of declarations) {
      const name = str(obj(d)?.name)
      if (name !== undefined) tools.push(name)
    }
    // Built-in tools (googleSearch, codeExecution, urlContext, ...) are named by their key.
    if (declarations.length === 0) tools.push(...Object.keys(tool))
  }
  const part: LlmRequestPart = { stream: /:streamGenerateContent$/.test(path), tools, input }
  const model = geminiModelFromPath(path)
  if (model !== undefined) part.model = model
  return part
}

/** The text of parts that are text and not thoughts, joined by newlines; other data parts as placeholders. */
function partsText(parts: unknown[]): string {
  const out: string[] = []
  for (const p of parts) {
    const part = obj(p)
    if (!part || part.thought === true) continue
    const text = str(part.text)
    if (text !== undefined) out.push(text)
    else if (obj(part.inlineData) || obj(part.fileData)) out.push(`[${str(obj(part.inlineData ?? part.fileData)?.mimeType)?.split('/')[0] ?? 'file'}]`)
    else if (obj(part.executableCode)) out.push(str(obj(part.executableCode)?.code) ?? '[code]')
    else if (obj(part.codeExecutionResult)) out.push(str(obj(part.codeExecutionResult)?.output) ?? '[code result]')
  }
  return out.join('\n')
}

function responseText(v: unknown): string {
  if (typeof v === 'string') return v
  try {
    return stringifyJson(v ?? {})
  } catch {
    return ''
  }
}

/** The function calls among parts, numbered from `start` (the order the SDK's `functionCalls` lists them). */
function functionCalls(parts: unknown[], start = 0): LlmToolCall[] {
  const out: LlmToolCall[] = []
  for (const p of parts) {
    const call = obj(obj(p)?.functionCall)
    if (!call) continue
    out.push(toolCallFromValue(start + out.length, str(call.id), str(call.name) ?? '', call.args ?? {}))
  }
  return out
}

/** The candidate with index 0 (or the first) of a response. */
export function firstCandidate(body: Record<string, unknown>): { position: number; candidate: Record<string, unknown> } | undefined {
  const list = arr(body.candidates)
  let position = list.findIndex((c) => num(obj(c)?.index) === 0)
  if (position === -1 && list.length > 0) position = 0
  const candidate = obj(list[position])
  return candidate ? { position, candidate } : undefined
}

/** Reads a `GenerateContentResponse`. */
export function readGeminiResponse(body: Record<string, unknown>): LlmResponsePart {
  const part: LlmResponsePart = { outputText: '', reasoning: [], toolCalls: [], complete: true }
  readChunk(part, body, { text: [], thoughts: [] })
  return part
}

interface Texts {
  text: string[]
  thoughts: string[]
}

function readChunk(part: LlmResponsePart, body: Record<string, unknown>, texts: Texts): void {
  const model = str(body.modelVersion)
  if (model) part.model = model
  const usage = obj(body.usageMetadata)
  if (usage) part.usage = readUsage(usage)
  const blocked = str(obj(body.promptFeedback)?.blockReason)
  if (blocked) {
    part.refusal = `prompt blocked: ${blocked}`
    part.finish = blocked
  }
  const candidate = firstCandidate(body)?.candidate
  if (!candidate) return
  const parts = arr(obj(candidate.content)?.parts)
  for (const p of parts) {
    const piece = obj(p)
    const text = str(piece?.text)
    if (text === undefined) continue
    if (piece?.thought === true) texts.thoughts.push(text)
    else texts.text.push(text)
  }
  part.toolCalls.push(...functionCalls(parts, part.toolCalls.length))
  part.outputText = texts.text.join('')
  part.reasoning = texts.thoughts.length > 0 ? [texts.thoughts.join('')] : []
  const finish = str(candidate.finishReason)
  if (finish !== undefined) part.finish = finish
  const message = str(candidate.finishMessage)
  if (message !== undefined) part.finishDetail = message
}

function readUsage(usage: Record<string, unknown>): LlmUsage {
  const u: LlmUsage = {}
  const set = (k: keyof LlmUsage, v: unknown) => {
    const n = num(v)
    if (n !== undefined) u[k] = n
  }
  set('input', usage.promptTokenCount)
  set('output', usage.candidatesTokenCount)
  set('total', usage.totalTokenCount)
  set('reasoning', usage.thoughtsTokenCount)
  set('cachedInput', usage.cachedContentTokenCount)
  return u
}

/** Reassembles `alt=sse` chunks: texts joined, function calls in order, the last finish and usage. */
export function readGeminiEvents(events: LlmStreamEvent[]): LlmResponsePart {
  const part: LlmResponsePart = { outputText: '', reasoning: [], toolCalls: [], complete: false }
  const texts: Texts = { text: [], thoughts: [] }
  for (const e of events) {
    const chunk = obj(e.data)
    if (!chunk) continue
    const error = obj(chunk.error)
    if (error) {
      part.error = str(error.message) ?? str(error.status) ?? 'error event'
      continue
    }
    readChunk(part, chunk, texts)
    // A finish reason (or a blocked prompt) ends the stream; the SDK resumes a stream that ends without one.
    if (part.finish !== undefined) part.complete = true
  }
  return part
}
