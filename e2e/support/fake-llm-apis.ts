/**
 * Stand-ins for Google Gemini, AWS Bedrock Converse, the OpenAI Responses calls of an OpenAI Agents SDK run,
 * and Ollama's native API, for the LLM SDK e2e tests (fake-llm-providers.ts serves them). They answer like
 * the recorded exchanges in e2e/fixtures (gemini/: recordings from googleapis/js-genai; bedrock/: bodies and a
 * live ConverseStream capture from vercel/ai; see each README), and like the real APIs where a client can
 * tell: Gemini's `alt=sse` chunks (`data:` + CRLF CRLF) and gzip on JSON; Bedrock's
 * `application/vnd.amazon.eventstream` frames written one per write, each payload padded with `p` as
 * Bedrock pads them; Ollama's NDJSON lines. Every response gets fresh ids (Gemini `responseId`, Bedrock
 * `toolUseId`, Responses `resp_` / `fc_` / `call_` / `msg_`), as a real model mints them, so two recordings of
 * one run differ exactly where real ones do.
 *
 * What a request gets is decided by its content, like a deterministic model:
 * - Gemini: no `functionResponse` part yet → the recorded `customDivide` function call; after it → the recorded answer.
 * - Bedrock Converse: no `toolResult` yet → two parallel tool uses (recorded); after them → the recorded text.
 *   ConverseStream: no `toolResult` yet → a streamed tool use; after it → the live-captured "OK." stream.
 * - Responses with handoff tools (`transfer_to_*`), no `function_call_output` yet → a call of the handoff tool
 *   whose agent name the user's language picks; after it → the agent's answer.
 * - Ollama `/api/chat`: tools and no tool result → a `get_weather` tool call; otherwise a streamed answer;
 *   `/api/generate` → a streamed completion. Lines follow Ollama's API docs (github.com/ollama/ollama/blob/main/docs/api.md).
 */
import { randomBytes, randomUUID } from 'node:crypto'
import { readFileSync } from 'node:fs'
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http'
import { gzipSync } from 'node:zlib'
import { decodeEventStream, encodeEventStreamFrame, encodeEventStreamHeaders, parseJson, stringifyJson } from '../../trace/index.ts'

/** The host names these fakes answer for (TLS certificates are issued for the https ones). */
export const GEMINI_HOST = 'generativelanguage.googleapis.test'
export const BEDROCK_HOST = 'bedrock-runtime.us-east-1.amazonaws.test'
export const AGENTS_HOST = 'api.agents-openai.test'

type Json = Record<string, unknown>
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const HEAD_DELAY_MS = 5
const EVENT_DELAY_MS = 1

const fixturesDir = new URL('../fixtures/', import.meta.url)
const read = (path: string) => readFileSync(new URL(path, fixturesDir), 'utf8')

// ---- fresh ids ----------------------------------------------------------------------------------------------

const ALNUM = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'
/** `n` random characters of `alphabet`. */
export function randomChars(n: number, alphabet = ALNUM): string {
  const bytes = randomBytes(n)
  return Array.from(bytes, (b) => alphabet[b % alphabet.length]).join('')
}
const hex = (n: number) =>
  randomBytes(Math.ceil(n / 2))
    .toString('hex')
    .slice(0, n)

// ---- Gemini -------------------------------------------------------------------------------------------------

interface GenaiRecording {
  interactions: Array<{ response: { statusCode: number; headers: Record<string, string>; bodySegments: Json[] } }>
}
const geminiStream = parseJson(read('gemini/stream-function-call-loop.json')) as GenaiRecording
const geminiJson = parseJson(read('gemini/json-function-call-loop.json')) as GenaiRecording

function geminiHeaders(recorded: Record<string, string>): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {}
  for (const [k, v] of Object.entries(recorded)) if (!['content-length', 'content-encoding', 'date'].includes(k.toLowerCase())) out[k] = v
  out.date = new Date().toUTCString()
  return out
}

/** Answers `POST /v1beta/models/{model}:generateContent` and `:streamGenerateContent?alt=sse`. */
export async function gemini(req: IncomingMessage, res: ServerResponse, path: string, body: Json): Promise<void> {
  const contents = (body.contents as Array<{ parts?: Json[] }> | undefined) ?? []
  const answered = contents.some((c) => (c.parts ?? []).some((p) => p.functionResponse !== undefined))
  const turn = answered ? 1 : 0
  const responseId = randomChars(22, `${ALNUM}-_`)
  await sleep(HEAD_DELAY_MS)
  if (path.endsWith(':streamGenerateContent')) {
    const rec = geminiStream.interactions[turn]?.response
    if (!rec) throw new Error('no recorded Gemini stream')
    res.writeHead(200, 'OK', geminiHeaders(rec.headers))
    for (const segment of rec.bodySegments) {
      res.write(`data: ${JSON.stringify({ ...segment, responseId })}\r\n\r\n`)
      await sleep(EVENT_DELAY_MS)
    }
    res.end()
    return
  }
  const rec = geminiJson.interactions[turn]?.response
  if (!rec) throw new Error('no recorded Gemini answer')
  // The Gemini API pretty-prints its JSON and gzips it for clients that accept it.
  const text = `${JSON.stringify({ ...rec.bodySegments[0], responseId }, null, 2)}\n`
  const gzip = /\bgzip\b/.test(String(req.headers['accept-encoding'] ?? ''))
  const bytes = gzip ? gzipSync(text) : Buffer.from(text)
  res.writeHead(200, 'OK', { ...geminiHeaders(rec.headers), ...(gzip ? { 'content-encoding': 'gzip' } : {}), 'content-length': bytes.byteLength })
  res.end(bytes)
}

// ---- Bedrock ------------------------------------------------------------------------------------------------

const converseToolCalls = read('bedrock/converse-parallel-tool-calls.json')
const converseText = read('bedrock/converse-text-after-tool-result.json')
const liveStream = Buffer.from((parseJson(read('bedrock/converse-stream-live.json')) as { response: { bodyBase64: string } }).response.bodyBase64, 'base64')
const toolStreamEvents = read('bedrock/converse-stream-tool-call.chunks.txt')
  .split('\n')
  .filter((l) => l.trim() !== '')
  .map((l) => Object.entries(parseJson(l) as Json)[0] as [string, Json])

const FRAME_HEADERS = (type: string) =>
  encodeEventStreamHeaders([
    [':event-type', type],
    [':content-type', 'application/json'],
    [':message-type', 'event'],
  ])

/** A ConverseStream frame as Bedrock writes one: the payload's keys sorted, padded with a `p` of random length. */
function bedrockFrame(type: string, payload: Json): Uint8Array {
  const padded: Json = { ...payload, p: ALNUM.slice(0, 1 + ((randomBytes(1)[0] as number) % ALNUM.length)) }
  const sorted = Object.fromEntries(Object.entries(padded).sort(([a], [b]) => (a < b ? -1 : 1)))
  return encodeEventStreamFrame(FRAME_HEADERS(type), Buffer.from(JSON.stringify(sorted)))
}

/** The streamed tool use: messageStart, the recorded tool-use events (the tool named by the request), messageStop, metadata. */
function toolUseFrames(toolName: string): Uint8Array[] {
  const id = `tooluse_${randomChars(22)}`
  const byType = (t: string) => toolStreamEvents.filter(([type]) => type === t)
  const events = [
    ['messageStart', { role: 'assistant' }] as [string, Json],
    ...toolStreamEvents.filter(([type]) => !['metadata', 'messageStop'].includes(type)),
    ...byType('messageStop'),
    ...byType('metadata'),
  ]
  return events.map(([type, payload]) => {
    let p = payload
    if (type === 'contentBlockStart') p = { ...payload, start: { toolUse: { toolUseId: id, name: toolName } } }
    return bedrockFrame(type, p)
  })
}

function bedrockHeaders(type: string): OutgoingHttpHeaders {
  return { 'content-type': type, 'x-amzn-requestid': randomUUID(), date: new Date().toUTCString() }
}

/** Answers `POST /model/{modelId}/converse` and `/converse-stream`. */
export async function bedrock(res: ServerResponse, path: string, body: Json): Promise<void> {
  const messages = (body.messages as Array<{ content?: Json[] }> | undefined) ?? []
  const answered = messages.some((m) => (m.content ?? []).some((b) => b.toolResult !== undefined))
  await sleep(HEAD_DELAY_MS)
  if (path.endsWith('/converse-stream')) {
    res.writeHead(200, 'OK', bedrockHeaders('application/vnd.amazon.eventstream'))
    const tools = ((body.toolConfig as Json | undefined)?.tools as Array<{ toolSpec?: { name?: string } }> | undefined) ?? []
    const frames = answered
      ? decodeEventStream(liveStream).frames.map((f) => liveStream.subarray(f.offset, f.offset + f.length))
      : toolUseFrames(tools[0]?.toolSpec?.name ?? 'tool')
    for (const frame of frames) {
      res.write(frame)
      await sleep(EVENT_DELAY_MS)
    }
    res.end()
    return
  }
  const text = answered ? converseText : converseToolCalls.replace(/tooluse_[A-Za-z0-9]{22}/g, () => `tooluse_${randomChars(22)}`)
  const bytes = Buffer.from(text)
  res.writeHead(200, 'OK', { ...bedrockHeaders('application/json'), 'content-length': bytes.byteLength })
  res.end(bytes)
}

// ---- OpenAI Responses for an Agents SDK run with a handoff ----------------------------------------------------

const responsesFixture = parseJson((parseJson(read('openai/responses-nonstream-text.json')) as { response: { body: string } }).response.body) as Json
const responsesHeaders = (parseJson(read('openai/responses-nonstream-text.json')) as { response: { headers: Record<string, string | string[]> } }).response
  .headers

/** The answers the agents give once the run is theirs (the model "speaks" the agent's language). */
const AGENT_ANSWERS: Record<string, string> = {
  spanish_agent: '¡Hola! Estoy muy bien, gracias. ¿En qué puedo ayudarte?',
  english_agent: 'Hello! I am doing well, thank you. How can I help?',
}

/** Answers `POST /v1/responses` for the Agents SDK: a handoff call, then the chosen agent's answer. */
export async function agentsResponses(res: ServerResponse, body: Json): Promise<void> {
  const tools = (body.tools as Array<{ name?: string }> | undefined) ?? []
  const input = Array.isArray(body.input) ? (body.input as Json[]) : []
  const handoffs = tools.map((t) => t.name ?? '').filter((n) => n.startsWith('transfer_to_'))
  const handedTo = input.find((i) => i.type === 'function_call_output')
  const userText = JSON.stringify(input.filter((i) => i.role === 'user'))
  let output: Json
  if (handoffs.length > 0 && !handedTo) {
    const wanted = /hola|¿|ñ/i.test(userText) ? 'transfer_to_spanish_agent' : 'transfer_to_english_agent'
    const name = handoffs.find((h) => h.toLowerCase() === wanted) ?? (handoffs[0] as string)
    output = { id: `fc_${hex(48)}`, type: 'function_call', status: 'completed', arguments: '{}', call_id: `call_${randomChars(24)}`, name }
  } else {
    const called = input.find((i) => i.type === 'function_call')
    const agent = String(called?.name ?? 'transfer_to_english_agent')
      .replace('transfer_to_', '')
      .toLowerCase()
    const text = AGENT_ANSWERS[agent] ?? AGENT_ANSWERS.english_agent
    output = {
      id: `msg_${hex(48)}`,
      type: 'message',
      status: 'completed',
      content: [{ type: 'output_text', annotations: [], logprobs: [], text }],
      role: 'assistant',
    }
  }
  const response = {
    ...responsesFixture,
    id: `resp_${hex(48)}`,
    created_at: Math.floor(Date.now() / 1000),
    instructions: body.instructions ?? null,
    model: 'gpt-4.1-2025-04-14',
    output: [output],
    tools: body.tools ?? [],
  }
  const bytes = Buffer.from(JSON.stringify(response, null, 2))
  const headers: OutgoingHttpHeaders = {}
  for (const [k, v] of Object.entries(responsesHeaders)) {
    if (!['transfer-encoding', 'content-length', 'connection', 'date', 'x-request-id'].includes(k.toLowerCase())) headers[k] = v
  }
  await sleep(HEAD_DELAY_MS)
  res.writeHead(200, 'OK', { ...headers, date: new Date().toUTCString(), 'x-request-id': `req_${hex(32)}`, 'content-length': bytes.byteLength })
  res.end(bytes)
}

// ---- Ollama -------------------------------------------------------------------------------------------------

/** Durations in ns, as Ollama reports them; they differ on every call. */
const durations = () => ({
  total_duration: 4_000_000_000 + randomBytes(2).readUInt16BE() * 1000,
  load_duration: 5_000_000 + randomBytes(2).readUInt16BE(),
  prompt_eval_count: 26,
  prompt_eval_duration: 130_000_000 + randomBytes(2).readUInt16BE(),
  eval_count: 12,
  eval_duration: 420_000_000 + randomBytes(2).readUInt16BE(),
})

const OLLAMA_PIECES = ['The', ' sky', ' is', ' blue', ' because', ' of', ' Rayleigh', ' scattering', '.']

/** Answers `POST /api/chat` and `POST /api/generate` as an Ollama server does (NDJSON unless `stream: false`). */
export async function ollama(res: ServerResponse, path: string, body: Json): Promise<void> {
  const model = String(body.model ?? 'llama3.2')
  const at = () => new Date().toISOString()
  const stream = body.stream !== false
  const messages = (body.messages as Json[] | undefined) ?? []
  const lines: Json[] = []
  if (path === '/api/chat' && Array.isArray(body.tools) && !messages.some((m) => m.role === 'tool')) {
    lines.push({
      model,
      created_at: at(),
      message: { role: 'assistant', content: '', tool_calls: [{ function: { name: 'get_weather', arguments: { city: 'Oslo' } } }] },
      done: false,
    })
    lines.push({ model, created_at: at(), message: { role: 'assistant', content: '' }, done: true, done_reason: 'stop', ...durations() })
  } else {
    const key = path === '/api/chat' ? 'message' : 'response'
    for (const piece of OLLAMA_PIECES)
      lines.push({ model, created_at: at(), [key]: key === 'message' ? { role: 'assistant', content: piece } : piece, done: false })
    const last: Json = {
      model,
      created_at: at(),
      [key]: key === 'message' ? { role: 'assistant', content: '' } : '',
      done: true,
      done_reason: 'stop',
      ...durations(),
    }
    if (key === 'response') last.context = [1, 2, 3]
    lines.push(last)
  }
  await sleep(HEAD_DELAY_MS)
  if (!stream) {
    // One object: the pieces joined into the last line, as Ollama answers `stream: false`.
    const text = lines.map((l) => (path === '/api/chat' ? String((l.message as Json).content) : String(l.response))).join('')
    const whole = { ...(lines.at(-1) as Json) }
    if (path === '/api/chat') whole.message = { ...(lines[0]?.message as Json), content: text }
    else whole.response = text
    const bytes = Buffer.from(stringifyJson(whole))
    res.writeHead(200, 'OK', { 'content-type': 'application/json; charset=utf-8', date: new Date().toUTCString(), 'content-length': bytes.byteLength })
    res.end(bytes)
    return
  }
  res.writeHead(200, 'OK', { 'content-type': 'application/x-ndjson', date: new Date().toUTCString() })
  for (const line of lines) {
    res.write(`${stringifyJson(line)}\n`)
    await sleep(EVENT_DELAY_MS)
  }
  res.end()
}

/** Ollama's error shape: `{"error": "..."}`. */
export function ollamaError(res: ServerResponse, status: number, message: string): void {
  const bytes = Buffer.from(stringifyJson({ error: message }))
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': bytes.byteLength })
  res.end(bytes)
}
