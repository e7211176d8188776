/**
 * OpenAI Realtime: a WebSocket session (one exchange, trace/websocket.ts) read as model turns. The client's
 * `session.update` gives the model, instructions and tools; its `conversation.item.create` events (and the
 * audio it commits) are the input; each response runs from `response.created` through its text and
 * audio-transcript deltas and function-call arguments to `response.done` (status, usage, the output items).
 * Both the GA event names (`response.output_text.delta`, `response.output_audio_transcript.delta`) and the beta
 * ones (`response.text.delta`, `response.audio_transcript.delta`) are read. Audio is counted in bytes, never
 * held: the view stays small whatever the session streamed.
 */
import type { Exchange, Trace, WebSocketMessage } from '../exchange.ts'
import { tryParseJson } from '../json-codec.ts'
import { argumentsOf, toolCall, trailingToolResults } from './content.ts'
import { decodedText } from './exchange-bodies.ts'
import { arr, index, obj, str } from './json-access.ts'
import type { LlmMessage, LlmUsage, LlmView } from './llm-types.ts'
import { readUsage } from './openai-responses.ts'

/** One Realtime event of a session: who sent it and its JSON. */
export interface RealtimeEvent {
  from: WebSocketMessage['from']
  /** The position of its message in `websocket.messages`. */
  message: number
  type: string
  data: Record<string, unknown>
}

/** The event families of the Realtime API (client and server events). */
const REALTIME_TYPE = /^(?:session|transcription_session|conversation|input_audio_buffer|output_audio_buffer|response|rate_limits)\./

/**
 * True when a WebSocket session speaks the Realtime API: the server opened with `session.created`, or its path
 * ends in `/realtime` and its events are the API's.
 */
export function isRealtimeSession(url: string, events: readonly RealtimeEvent[]): boolean {
  let path = ''
  try {
    path = new URL(url).pathname.replace(/\/+$/, '')
  } catch {
    // an unparsable URL is judged by its events alone
  }
  if (events.find((e) => e.from === 'server')?.type === 'session.created') return true
  // The path alone is not enough: a session there that speaks none of the API's events is read as WebSocket.
  return /\/realtime$/.test(path) && (events.length === 0 || events.some((e) => REALTIME_TYPE.test(e.type)))
}

/** The JSON events of a session's text messages, in order (other messages are left out). */
export function realtimeEvents(trace: Pick<Trace, 'bodies' | 'meta'>, x: Exchange): RealtimeEvent[] {
  const out: RealtimeEvent[] = []
  const messages = x.websocket?.messages ?? []
  messages.forEach((m, i) => {
    if (m.opcode !== 'text') return
    const text = decodedText(trace, m.body, [])
    const data = text === undefined ? undefined : obj(tryParseJson(text)?.value)
    const type = str(data?.type)
    if (data && type !== undefined) out.push({ from: m.from, message: i, type, data })
  })
  return out
}

/** The bytes a base64 string decodes to, without decoding it. */
export function base64Bytes(b64: string): number {
  const n = b64.length
  if (n === 0) return 0
  const pad = b64.endsWith('==') ? 2 : b64.endsWith('=') ? 1 : 0
  return Math.max(0, Math.floor((n * 3) / 4) - pad)
}

interface ResponseState {
  id?: string
  view: LlmView
  /** Text and transcript parts by `output_index:content_index`, in the order they started. */
  texts: Map<string, string>
  /** Function calls by call id (else item id, else output index). */
  calls: Map<string, { index?: number; id?: string; name: string; args: string }>
  final?: Record<string, unknown>
  /** The server events read into this response, in order (what a fork of it rewrites). */
  events: RealtimeEvent[]
}

const TEXT_DELTAS = new Set(['response.output_text.delta', 'response.text.delta', 'response.output_audio_transcript.delta', 'response.audio_transcript.delta'])
const TEXT_DONES: Record<string, string> = {
  'response.output_text.done': 'text',
  'response.text.done': 'text',
  'response.output_audio_transcript.done': 'transcript',
  'response.audio_transcript.done': 'transcript',
}
const AUDIO_DELTAS = new Set(['response.output_audio.delta', 'response.audio.delta'])

/** Reads a whole Realtime session: the session's view, with each response in `responses`. Never throws on odd shapes. */
export function readRealtimeSession(url: string, events: readonly RealtimeEvent[]): LlmView {
  return readRealtimeResponses(url, events).view
}

/** The session's view and, for each of its responses, the server events that made it (trace/llm/patch-openai-realtime.ts). */
export function readRealtimeResponses(url: string, events: readonly RealtimeEvent[]): { view: LlmView; events: RealtimeEvent[][] } {
  const reader = new SessionReader(url)
  for (const e of events) reader.read(e)
  return { view: reader.finish(), events: reader.responseEvents() }
}

class SessionReader {
  #requestModel: string | undefined
  #model: string | undefined
  #instructions: string | undefined
  #tools: string[] = []
  #clientTools = false
  /** Input items the client added since the last response started. */
  #pending: LlmMessage[] = []
  /** Every input item of the session, in order. */
  #input: LlmMessage[] = []
  /** Client `conversation.item.create` events the server has not acknowledged with an item of its own yet. */
  #unacknowledged = 0
  #audioPending = 0
  #audioItems = new Map<string, { message: LlmMessage; bytes: number }>()
  #responses: ResponseState[] = []
  #byId = new Map<string, ResponseState>()
  #open: ResponseState | undefined
  #serverEvents = 0
  #error: string | undefined
  /** The server event being read. */
  #current: RealtimeEvent | undefined

  constructor(url: string) {
    try {
      const q = new URL(url).searchParams
      this.#requestModel = q.get('model') ?? q.get('deployment') ?? undefined
    } catch {
      // no model in an unparsable URL
    }
  }

  read(e: RealtimeEvent): void {
    if (e.from === 'client') this.#client(e.type, e.data)
    else {
      this.#serverEvents++
      this.#current = e
      this.#server(e.type, e.data)
      this.#current = undefined
    }
  }

  /** Each response's server events, in the order of the responses. */
  responseEvents(): RealtimeEvent[][] {
    return this.#responses.map((r) => r.events)
  }

  #client(type: string, data: Record<string, unknown>): void {
    if (type === 'session.update') {
      const s = obj(data.session)
      if (!s) return
      if (str(s.model) !== undefined && this.#requestModel === undefined) this.#requestModel = str(s.model)
      if (str(s.instructions) !== undefined) this.#instructions = str(s.instructions)
      if (Array.isArray(s.tools)) {
        this.#tools = toolNames(s.tools)
        this.#clientTools = true
      }
    } else if (type === 'conversation.item.create') {
      const item = obj(data.item)
      if (item) this.#addInput(itemMessage(item, this.#input.length))
      this.#unacknowledged++
    } else if (type === 'input_audio_buffer.append') {
      this.#audioPending += base64Bytes(str(data.audio) ?? '')
    } else if (type === 'input_audio_buffer.clear') {
      this.#audioPending = 0
    }
  }

  #server(type: string, data: Record<string, unknown>): void {
    if (type === 'session.created' || type === 'session.updated') {
      const s = obj(data.session)
      if (str(s?.model) !== undefined) this.#model = str(s?.model)
      if (!this.#clientTools && Array.isArray(s?.tools)) this.#tools = toolNames(s.tools as unknown[])
    } else if (type === 'input_audio_buffer.committed') this.#committed(str(data.item_id))
    else if (type === 'conversation.item.created' || type === 'conversation.item.added') this.#serverItem(obj(data.item))
    else if (type === 'conversation.item.input_audio_transcription.completed') {
      const a = this.#audioItems.get(str(data.item_id) ?? '')
      if (a) a.message.text = `[audio ${a.bytes} bytes] ${str(data.transcript) ?? ''}`.trimEnd()
    } else if (type === 'error') {
      const message = str(obj(data.error)?.message) ?? str(data.message) ?? 'error event'
      if (this.#open) this.#open.view.error = message
      else this.#error ??= message
    } else if (type === 'response.created') this.#start(obj(data.response))
    else if (type.startsWith('response.')) this.#responseEvent(type, data)
  }

  #addInput(m: LlmMessage): void {
    this.#pending.push(m)
    this.#input.push(m)
  }

  /** Audio the client appended, committed as a user item (by the client, or by the server's voice detection). */
  #committed(itemId: string | undefined): void {
    const bytes = this.#audioPending
    this.#audioPending = 0
    const message: LlmMessage = { role: 'user', text: `[audio ${bytes} bytes]` }
    this.#addInput(message)
    if (itemId !== undefined) this.#audioItems.set(itemId, { message, bytes })
  }

  /** An item the server added: the echo of a client item, an output item, a committed audio item, or one of its own. */
  #serverItem(item: Record<string, unknown> | undefined): void {
    if (!item) return
    const type = str(item.type)
    const role = str(item.role)
    if (type === 'function_call' || role === 'assistant') return // output items: read from the response's events
    if (this.#audioItems.has(str(item.id) ?? '')) return
    if (this.#unacknowledged > 0) {
      this.#unacknowledged--
      return
    }
    this.#addInput(itemMessage(item, this.#input.length))
  }

  #start(response: Record<string, unknown> | undefined): ResponseState {
    const view: LlmView = {
      api: 'openai.realtime',
      stream: true,
      tools: [...this.#tools],
      input: this.#pending,
      toolResults: [],
      outputText: '',
      reasoning: [],
      toolCalls: [],
      events: 0,
    }
    view.toolResults = trailingToolResults(view.input)
    this.#pending = []
    const state: ResponseState = { view, texts: new Map(), calls: new Map(), events: this.#current ? [this.#current] : [] }
    const id = str(response?.id)
    if (id !== undefined) {
      state.id = id
      this.#byId.set(id, state)
    }
    this.#responses.push(state)
    this.#open = state
    return state
  }

  #responseEvent(type: string, data: Record<string, unknown>): void {
    const id = str(data.response_id) ?? str(obj(data.response)?.id)
    const found = (id !== undefined ? this.#byId.get(id) : undefined) ?? this.#open
    const r = found ?? this.#start(id !== undefined ? { id } : undefined)
    if (found && this.#current) r.events.push(this.#current)
    r.view.events = (r.view.events ?? 0) + 1
    const oi = index(data.output_index)
    const key = `${oi ?? ''}:${index(data.content_index) ?? 0}`
    if (TEXT_DELTAS.has(type)) r.texts.set(key, (r.texts.get(key) ?? '') + (str(data.delta) ?? ''))
    else if (TEXT_DONES[type] !== undefined) {
      const text = str(data[TEXT_DONES[type] as string])
      if (text !== undefined) r.texts.set(key, text)
    } else if (AUDIO_DELTAS.has(type)) r.view.audioBytes = (r.view.audioBytes ?? 0) + base64Bytes(str(data.delta) ?? '')
    else if (type === 'response.output_item.added' || type === 'response.output_item.done') {
      const item = obj(data.item)
      if (str(item?.type) === 'function_call') callOf(r, str(item?.call_id) ?? str(item?.id) ?? `#${oi}`, oi, item as Record<string, unknown>)
    } else if (type === 'response.function_call_arguments.delta') {
      const c = callOf(r, callKey(data, oi), oi, data)
      c.args += str(data.delta) ?? ''
    } else if (type === 'response.function_call_arguments.done') callOf(r, callKey(data, oi), oi, data)
    else if (type === 'response.done') {
      r.final = obj(data.response) ?? {}
      if (this.#open === r) this.#open = undefined
    }
  }

  finish(): LlmView {
    const responses = this.#responses.map((r) => responseView(r, this.#model ?? this.#requestModel, this.#requestModel))
    nameToolResults(responses, this.#pending)
    const input: LlmMessage[] = this.#instructions !== undefined ? [{ role: 'system', text: this.#instructions }, ...this.#input] : [...this.#input]
    const view: LlmView = {
      api: 'openai.realtime',
      stream: true,
      tools: this.#tools,
      input,
      toolResults: trailingToolResults(this.#pending),
      outputText: responses
        .map((r) => r.outputText)
        .filter((t) => t !== '')
        .join('\n'),
      reasoning: [],
      toolCalls: responses.flatMap((r) => r.toolCalls),
      events: this.#serverEvents,
      responses,
    }
    const model = this.#model ?? this.#requestModel
    if (model !== undefined) view.model = model
    if (this.#requestModel !== undefined) view.requestModel = this.#requestModel
    const last = responses.at(-1)
    if (last?.finish !== undefined) view.finish = last.finish
    if (responses.some((r) => r.incomplete)) view.incomplete = true
    const usage = sumUsage(responses)
    if (usage) view.usage = usage
    const audio = responses.reduce((n, r) => n + (r.audioBytes ?? 0), 0)
    if (audio > 0) view.audioBytes = audio
    const error = this.#error ?? responses.find((r) => r.error !== undefined)?.error
    if (error !== undefined) view.error = error
    return view
  }
}

/** Tool results named after the calls of the responses before them (the session holds both). */
function nameToolResults(responses: LlmView[], pending: LlmMessage[]): void {
  const names = new Map<string, string>()
  const name = (input: LlmMessage[]) => {
    for (const m of input) if (m.role === 'tool' && m.name === undefined && names.has(m.toolCallId ?? '')) m.name = names.get(m.toolCallId ?? '')
  }
  for (const r of responses) {
    name(r.input)
    r.toolResults = trailingToolResults(r.input)
    for (const c of r.toolCalls) if (c.id !== undefined) names.set(c.id, c.name)
  }
  name(pending)
}

function callKey(data: Record<string, unknown>, oi: number | undefined): string {
  return str(data.call_id) ?? str(data.item_id) ?? `#${oi}`
}

/** The call at `key`, created on first sight; a name or complete arguments the event carries are taken. */
function callOf(
  r: ResponseState,
  key: string,
  oi: number | undefined,
  data: Record<string, unknown>,
): { index?: number; id?: string; name: string; args: string } {
  let c = r.calls.get(key)
  if (!c) {
    c = { name: '', args: '' }
    if (oi !== undefined) c.index = oi
    r.calls.set(key, c)
  }
  const id = str(data.call_id)
  if (id !== undefined) c.id = id
  if (str(data.name)) c.name = str(data.name) as string
  const args = str(data.arguments)
  if (args) c.args = args
  return c
}

/** A response's view: the text and calls its events built, completed by `response.done`'s snapshot. */
function responseView(r: ResponseState, model: string | undefined, requestModel: string | undefined): LlmView {
  const v = r.view
  if (model !== undefined) v.model = model
  if (requestModel !== undefined) v.requestModel = requestModel
  const final = r.final
  const output = arr(final?.output)
  for (const it of output) {
    const item = obj(it)
    if (str(item?.type) === 'function_call') callOf(r, str(item?.call_id) ?? str(item?.id) ?? '', undefined, item as Record<string, unknown>)
  }
  v.outputText = r.texts.size > 0 ? [...r.texts.values()].join('') : output.map((it) => messageText(obj(it), true)).join('')
  let n = 0
  for (const c of r.calls.values()) v.toolCalls.push(toolCall(c.index ?? n++, c.id, c.name, c.args))
  if (!final) {
    v.incomplete = true
    return v
  }
  const status = str(final.status)
  if (status !== undefined) v.finish = status
  const details = obj(final.status_details)
  const reason = str(details?.reason)
  if (reason !== undefined) v.finishDetail = reason
  const error = obj(details?.error)
  if (error) v.error = str(error.message) ?? str(error.code) ?? str(error.type) ?? 'failed'
  const usage = obj(final.usage)
  if (usage) v.usage = readUsage(usage)
  return v
}

function sumUsage(responses: LlmView[]): LlmUsage | undefined {
  const list = responses.map((r) => r.usage).filter((u) => u !== undefined)
  if (list.length === 0) return undefined
  const out: LlmUsage = {}
  for (const k of ['input', 'output', 'total', 'cachedInput'] as const) {
    const values = list.map((u) => u[k]).filter((n) => n !== undefined)
    if (values.length > 0) out[k] = values.reduce((a, b) => a + b, 0)
  }
  return out
}

function toolNames(tools: unknown[]): string[] {
  const out: string[] = []
  for (const t of tools) {
    const tool = obj(t)
    const name = str(tool?.name) ?? str(tool?.server_label) ?? str(tool?.type)
    if (name !== undefined) out.push(name)
  }
  return out
}

/** A conversation item as an input message: a message's text (audio as its transcript or its size), a call, a tool result. */
function itemMessage(item: Record<string, unknown>, position: number): LlmMessage {
  const type = str(item.type)
  if (type === 'function_call')
    return { role: 'assistant', text: '', toolCalls: [toolCall(position, str(item.call_id), str(item.name) ?? '', argumentsOf(item.arguments))] }
  if (type === 'function_call_output') {
    const m: LlmMessage = { role: 'tool', text: argumentsOf(item.output) }
    const id = str(item.call_id)
    if (id !== undefined) m.toolCallId = id
    return m
  }
  if (type === undefined || type === 'message') return { role: str(item.role) ?? 'user', text: messageText(item, false) }
  return { role: type, text: '' }
}

/** The text of a message item's content parts; audio parts as their transcript, else `[audio N bytes]`. */
function messageText(item: Record<string, unknown> | undefined, outputOnly: boolean): string {
  if (!item || (outputOnly && str(item.type) !== 'message')) return ''
  const parts: string[] = []
  for (const p of arr(item.content)) {
    const part = obj(p)
    const type = str(part?.type) ?? ''
    const text = str(part?.text) ?? str(part?.transcript)
    if (/audio/.test(type)) {
      const bytes = base64Bytes(str(part?.audio) ?? '')
      const size = bytes > 0 ? `[audio ${bytes} bytes]` : ''
      parts.push(outputOnly ? (text ?? '') : [size, text].filter((s) => s).join(' ') || '[audio]')
    } else if (text !== undefined) parts.push(text)
    else if (!outputOnly && type !== '') parts.push(`[${type.replace(/^input_/, '')}]`)
  }
  return parts.join(outputOnly ? '' : '\n')
}
