/**
 * Local HTTPS stand-ins for api.openai.com and api.anthropic.com, for the LLM SDK e2e tests. They answer
 * like the recorded exchanges in e2e/fixtures (real OpenAI responses, Anthropic's own SDK fixtures): the
 * same bodies, SSE framing (`data:` for Chat Completions, `event:` + `data:` for Responses and Messages),
 * one event per write with a short delay between events, the recorded response headers, gzip on JSON
 * bodies when the client accepts it (as api.openai.com does), a short "processing" delay before the head.
 *
 * What a request gets is decided by its content, like a deterministic model:
 * - Chat Completions: `[fault:429]` in the last user message → a 429 with `retry-after-ms` the first time,
 *   then the answer; `[fault:500]` → a 500; `[fault:cut]` → a stream cut after a few events;
 *   `response_format` json_schema → a structured answer; streamed with tools and no tool results yet →
 *   two parallel tool calls; other streams → a text stream; otherwise the non-streamed answer.
 * - Responses: streamed with tools → turn N of a recorded calculator tool loop (N = function_call_output
 *   items sent so far); other streams → a text stream; otherwise the non-streamed answer.
 * - Messages (Anthropic, streamed): no tool_result yet → text + a tool_use with `input_json_delta`s;
 *   after it → a text answer.
 * - Gemini, Bedrock, the Agents SDK's Responses calls and Ollama (plain HTTP, its own port): fake-llm-apis.ts.
 *
 * With `freshIds`, every answer carries newly minted ids where the recording has model-made ones (completion,
 * response, item, tool call and tool use ids, encrypted reasoning), consistently within the answer, as the real
 * APIs mint them: two recordings of one run then differ exactly where real ones do.
 */
import { readFileSync } from 'node:fs'
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http'
import { createServer as createHttpServer } from 'node:http'
import { createServer, type Server } from 'node:https'
import type { AddressInfo, Socket } from 'node:net'
import { createSecureContext, type SecureContext, type TLSSocket } from 'node:tls'
import { gzipSync } from 'node:zlib'
import { parseJson, stringifyJson } from '../../trace/index.ts'
import { AGENTS_HOST, agentsResponses, BEDROCK_HOST, bedrock, GEMINI_HOST, gemini, ollama, ollamaError, randomChars } from './fake-llm-apis.ts'

/** The host names the fake answers for (TLS certificates are issued for these). */
export const OPENAI_HOST = 'api.openai.test'
export const ANTHROPIC_HOST = 'api.anthropic.test'
/** The providers' real host names, answered the same way (for tests that map them here with --resolve). */
export const OPENAI_REAL_HOST = 'api.openai.com'
export const ANTHROPIC_REAL_HOST = 'api.anthropic.com'
const OPENAI_HOSTS = new Set([OPENAI_HOST, OPENAI_REAL_HOST])
const ANTHROPIC_HOSTS = new Set([ANTHROPIC_HOST, ANTHROPIC_REAL_HOST])

/** One request the fake received. */
export interface ProviderRequest {
  host: string
  method: string
  path: string
  headers: IncomingMessage['headers']
  body: string
}

/** A running fake provider. */
export interface FakeProviders {
  port: number
  /** The plain-HTTP port Ollama's native API answers on (127.0.0.1). */
  ollamaPort: number
  /** TCP connections accepted so far, on both ports (replay must add none). */
  readonly connections: number
  requests: ProviderRequest[]
  close(): Promise<void>
}

/** Options of the fakes. */
export interface FakeProviderOptions {
  /** Mint fresh model-made ids in every recorded answer, as the real APIs do (default: answer the recordings as they are). */
  freshIds?: boolean
}

const ID_PATTERN = /\b(?:chatcmpl-|call_|resp_|msg_|fc_|rs_|toolu_|srvtoolu_)[A-Za-z0-9]{8,}/g
const ENCRYPTED = /"encrypted_content":"([^"]+)"/g

/**
 * The body with every model-made id replaced by a new random one of the same shape, each old id by the same
 * new id throughout (a streamed answer repeats its ids), and encrypted reasoning by new bytes of its length.
 */
function mintIds(body: string): string {
  const ids = new Map<string, string>()
  const fresh = (old: string) => {
    let id = ids.get(old)
    if (!id) {
      const prefix = /^[a-z]+[-_]/.exec(old)?.[0] ?? ''
      id = `${prefix}${randomChars(old.length - prefix.length)}`
      ids.set(old, id)
    }
    return id
  }
  return body.replace(ID_PATTERN, fresh).replace(ENCRYPTED, (_, v: string) => `"encrypted_content":"${fresh(v)}"`)
}

interface Fixture {
  response: { status: number; status_text: string; headers: Record<string, string | string[]>; body: string }
}

const fixturesDir = new URL('../fixtures/', import.meta.url)
const readFixture = (path: string) => readFileSync(new URL(path, fixturesDir), 'utf8')
const jsonFixture = (path: string) => parseJson(readFixture(path)) as Fixture

const chatJson = jsonFixture('openai/chat-completions-nonstream-gpt5nano.json')
const chatToolCalls = jsonFixture('openai/chat-completions-stream-parallel-tool-calls.json')
const chatText = jsonFixture('openai/chat-completions-stream-include-usage.json')
const responsesJson = jsonFixture('openai/responses-nonstream-text.json')
const responsesText = jsonFixture('openai/responses-stream-text.json')

/** The recorded calculator loop: four streamed responses, each from `response.created` to `response.completed`. */
const toolLoopTurns: string[][] = (() => {
  const turns: string[][] = []
  for (const line of readFixture('openai/responses-stream-tool-loop.chunks.txt').split('\n')) {
    if (line.trim() === '') continue
    const type = (parseJson(line) as { type: string }).type
    if (type === 'response.created') turns.push([])
    // Framed as api.openai.com frames Responses events (see responses-stream-text.json).
    turns.at(-1)?.push(`event: ${type}\ndata: ${line}\n\n`)
  }
  return turns
})()

const anthropicToolUse = readFixture('anthropic/messages-stream-tool-use-response.sse')
const anthropicText = readFixture('anthropic/messages-stream-basic-response.sse')

/** Response headers as recorded, minus framing fields this server sets itself. */
function recordedHeaders(f: Fixture): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {}
  for (const [name, value] of Object.entries(f.response.headers)) {
    if (['transfer-encoding', 'content-length', 'connection', 'content-encoding'].includes(name.toLowerCase())) continue
    out[name] = value
  }
  return out
}

/** Anthropic-style headers (no recorded Anthropic exchange exists; these follow the API's documented ones). */
const ANTHROPIC_HEADERS: OutgoingHttpHeaders = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache',
  'request-id': 'req_011CfakeAnthropicRequestId',
  'anthropic-ratelimit-requests-limit': '4000',
  'anthropic-ratelimit-requests-remaining': '3999',
  via: '1.1 google',
}

/** Splits an SSE body into events, each keeping its blank-line separator. */
function sseEvents(body: string): string[] {
  return body
    .split(/(?<=\n\n)/)
    .filter((e) => e.trim() !== '')
    .map((e) => (e.endsWith('\n\n') ? e : `${e}\n\n`))
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Delay before the response head (the provider "thinking") and between streamed events. */
const HEAD_DELAY_MS = 5
const EVENT_DELAY_MS = 1

/** Set per request from the server's options: whether answers get fresh ids. */
const freshIdsFor = new WeakMap<ServerResponse, boolean>()
const minted = (res: ServerResponse, body: string) => (freshIdsFor.get(res) ? mintIds(body) : body)

async function sendJson(
  req: IncomingMessage,
  res: ServerResponse,
  status: number,
  statusText: string,
  headers: OutgoingHttpHeaders,
  recorded: string,
): Promise<void> {
  const body = minted(res, recorded)
  await sleep(HEAD_DELAY_MS)
  const gzip = /\bgzip\b/.test(String(req.headers['accept-encoding'] ?? ''))
  const bytes = gzip ? gzipSync(body) : Buffer.from(body)
  res.writeHead(status, statusText, {
    ...headers,
    'content-type': 'application/json',
    ...(gzip ? { 'content-encoding': 'gzip' } : {}),
    'content-length': bytes.byteLength,
  })
  res.end(bytes)
}

/** Streams `events`, one write each; with `cutAfter`, the connection dies after that many events. */
async function sendEvents(res: ServerResponse, headers: OutgoingHttpHeaders, recorded: string[], cutAfter?: number): Promise<void> {
  // One answer: its events share the ids minted for it.
  const events = freshIdsFor.get(res) ? mintIds(recorded.join('\u0000')).split('\u0000') : recorded
  await sleep(HEAD_DELAY_MS)
  res.writeHead(200, 'OK', headers)
  for (const [i, event] of events.entries()) {
    if (cutAfter !== undefined && i === cutAfter) {
      // Let the written events reach the client, then drop the connection mid-stream.
      await new Promise<void>((resolve) => res.write('', () => resolve()))
      await sleep(EVENT_DELAY_MS)
      res.socket?.destroy()
      return
    }
    res.write(event)
    await sleep(EVENT_DELAY_MS)
  }
  res.end()
}

type Json = Record<string, unknown>

function lastUserText(body: Json): string {
  const messages = (body.messages as Array<{ role: string; content: unknown }> | undefined) ?? []
  const user = messages.filter((m) => m.role === 'user').at(-1)
  return typeof user?.content === 'string' ? user.content : stringifyJson(user?.content ?? '')
}

function errorBody(message: string, type: string, code: string | null): string {
  return stringifyJson({ error: { message, type, param: null, code } })
}

/** The answer to a structured-output request: the recorded completion with the content a schema asks for. */
function structuredAnswer(): string {
  const completion = parseJson(chatJson.response.body) as { choices: Array<{ message: { content: string } }> }
  const choice = completion.choices[0] as { message: { content: string } }
  choice.message.content = stringifyJson({ city: 'Oslo', umbrella: true, reasons: ['rain after 14:00', 'wind 8 m/s'] })
  return stringifyJson(completion)
}

async function chatCompletions(req: IncomingMessage, res: ServerResponse, body: Json, attempts: Map<string, number>, raw: string): Promise<void> {
  const text = lastUserText(body)
  if (text.includes('[fault:429]')) {
    const n = (attempts.get(raw) ?? 0) + 1
    attempts.set(raw, n)
    if (n === 1) {
      const headers = { ...recordedHeaders(chatJson), 'retry-after-ms': '20', 'retry-after': '1', 'x-ratelimit-remaining-requests': '0' }
      return sendJson(
        req,
        res,
        429,
        'Too Many Requests',
        headers,
        errorBody('Rate limit reached for requests. Please try again in 20ms.', 'requests', 'rate_limit_exceeded'),
      )
    }
    return sendJson(req, res, 200, 'OK', recordedHeaders(chatJson), chatJson.response.body)
  }
  if (text.includes('[fault:500]')) {
    return sendJson(
      req,
      res,
      500,
      'Internal Server Error',
      recordedHeaders(chatJson),
      errorBody('The server had an error while processing your request. Sorry about that!', 'server_error', null),
    )
  }
  if (text.includes('[fault:cut]')) return sendEvents(res, recordedHeaders(chatText), sseEvents(chatText.response.body), 6)
  if ((body.response_format as Json | undefined)?.type === 'json_schema') return sendJson(req, res, 200, 'OK', recordedHeaders(chatJson), structuredAnswer())
  if (body.stream === true) {
    const toolResults = ((body.messages as Array<{ role: string }>) ?? []).some((m) => m.role === 'tool')
    const f = Array.isArray(body.tools) && !toolResults ? chatToolCalls : chatText
    return sendEvents(res, recordedHeaders(f), sseEvents(f.response.body))
  }
  return sendJson(req, res, 200, 'OK', recordedHeaders(chatJson), chatJson.response.body)
}

async function responses(req: IncomingMessage, res: ServerResponse, body: Json): Promise<void> {
  if (body.stream !== true) return sendJson(req, res, 200, 'OK', recordedHeaders(responsesJson), responsesJson.response.body)
  if (Array.isArray(body.tools) && body.tools.length > 0) {
    const input = Array.isArray(body.input) ? (body.input as Array<{ type?: string }>) : []
    const turn = Math.min(input.filter((i) => i.type === 'function_call_output').length, toolLoopTurns.length - 1)
    return sendEvents(res, recordedHeaders(responsesText), toolLoopTurns[turn] as string[])
  }
  return sendEvents(res, recordedHeaders(responsesText), sseEvents(responsesText.response.body))
}

async function messages(res: ServerResponse, body: Json): Promise<void> {
  const sent = (body.messages as Array<{ content: unknown }> | undefined) ?? []
  const toolResult = sent.some((m) => Array.isArray(m.content) && m.content.some((c: { type?: string }) => c.type === 'tool_result'))
  return sendEvents(res, ANTHROPIC_HEADERS, sseEvents(toolResult ? anthropicText : anthropicToolUse))
}

/**
 * Starts the fake providers on 127.0.0.1:0, serving TLS for both hosts with the given certificates.
 * @example
 * const providers = await startFakeProviders({ [OPENAI_HOST]: pki.certs[OPENAI_HOST], ... })
 */
export async function startFakeProviders(certs: Record<string, { cert: string; key: string }>, options: FakeProviderOptions = {}): Promise<FakeProviders> {
  const contexts = new Map<string, SecureContext>(Object.entries(certs).map(([host, c]) => [host, createSecureContext(c)]))
  const fallback = (certs[OPENAI_HOST] ?? Object.values(certs)[0]) as { cert: string; key: string }
  const requests: ProviderRequest[] = []
  const attempts = new Map<string, number>()
  let connections = 0
  const sockets = new Set<Socket>()
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    freshIdsFor.set(res, options.freshIds === true)
    const parts: Buffer[] = []
    req.on('data', (c: Buffer) => parts.push(c))
    req.on('end', () => {
      const raw = Buffer.concat(parts).toString()
      const host = String(req.headers.host ?? '').replace(/:\d+$/, '')
      const path = (req.url ?? '/').split('?')[0] as string
      requests.push({ host, method: req.method ?? 'GET', path, headers: req.headers, body: raw })
      const body = (raw ? parseJson(raw) : {}) as Json
      const plain = (req.socket as TLSSocket).encrypted !== true
      let answer: Promise<void>
      if (OPENAI_HOSTS.has(host) && path === '/v1/chat/completions') answer = chatCompletions(req, res, body, attempts, raw)
      else if (OPENAI_HOSTS.has(host) && path === '/v1/responses') answer = responses(req, res, body)
      else if (ANTHROPIC_HOSTS.has(host) && path === '/v1/messages') answer = messages(res, body)
      else if (host === GEMINI_HOST && /^\/v1(?:beta|alpha)?\/models\/[^/]+:(?:stream)?[gG]enerateContent$/.test(path)) answer = gemini(req, res, path, body)
      else if (host === BEDROCK_HOST && /^\/model\/[^/]+\/converse(?:-stream)?$/.test(path)) answer = bedrock(res, path, body)
      else if (host === AGENTS_HOST && path === '/v1/responses') answer = agentsResponses(res, body)
      else if (plain && (path === '/api/chat' || path === '/api/generate')) answer = ollama(res, path, body)
      else if (plain) answer = Promise.resolve(ollamaError(res, 404, `fake ollama: nothing at ${req.method} ${path}`))
      else answer = sendJson(req, res, 404, 'Not Found', {}, errorBody(`fake provider: nothing at ${req.method} ${host}${path}`, 'invalid_request_error', null))
      answer.catch(() => res.destroy())
    })
  }
  const server: Server = createServer({ ...fallback, SNICallback: (name, cb) => cb(null, contexts.get(name)) }, handler)
  const ollamaServer = createHttpServer(handler)
  for (const s of [server, ollamaServer]) {
    s.on('connection', (socket: Socket) => {
      connections++
      sockets.add(socket)
      socket.on('close', () => sockets.delete(socket))
    })
    await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve))
  }
  return {
    port: (server.address() as AddressInfo).port,
    ollamaPort: (ollamaServer.address() as AddressInfo).port,
    get connections() {
      return connections
    },
    requests,
    async close() {
      for (const s of sockets) s.destroy()
      await Promise.all([server, ollamaServer].map((s) => new Promise<void>((resolve) => s.close(() => resolve()))))
    },
  }
}
