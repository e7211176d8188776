/**
 * MCP in tool terms: an exchange that carries an MCP message, over stdio (`mcp+stdio://`, trace/mcp-wire.ts)
 * or over Streamable HTTP (a POST of a JSON-RPC message answered with JSON or an event stream; the GET that
 * opens a session's stream for what the server sends unprompted; the DELETE that ends a session), read as what
 * it means: `tools/call write_file {path} → result content / isError`, `tools/list → tool names`,
 * `resources/read uri → contents`, `prompts/get name → messages`, with the server's notifications,
 * server-to-client requests, stderr and exit beside it. Never throws: an unknown shape is not an MCP view.
 */
import { CLIENT_ABORT_CODE, type Exchange, type Trace } from '../exchange.ts'
import { headerValue } from '../header-pairs.ts'
import { canonicalJson, stringifyJson } from '../json-codec.ts'
import { diffJson } from '../json-path.ts'
import { isJsonRpcResponse, MCP_COMMAND_HEADER, mcpMessageKind, parseMcpStdioUrl, transcriptLines } from '../mcp-wire.ts'
import { decodedResponse, decodedText, requestJson } from './exchange-bodies.ts'

/** One difference between two MCP turns (the shape of the LLM diff's details). */
export interface McpDiffDetail {
  side: 'request' | 'response'
  what: string
  before?: unknown
  after?: unknown
}

/** One MCP message exchange, read. */
export interface McpView {
  transport: 'stdio' | 'http'
  /** The server's name: stdio's, or over HTTP one from its URL (mcpHttpServerName). */
  server: string
  /**
   * The client message; over HTTP also `stream` (the GET that opens the session's stream of what the server
   * sends unprompted: it lasts until the client closes it, which is its normal end) and `end` (the DELETE that
   * ends a session).
   */
  kind: 'launch' | 'request' | 'notification' | 'reply' | 'stream' | 'end'
  /** The JSON-RPC method (for a reply: the server request's). */
  method: string
  /** tools/call: the tool and its arguments. */
  tool?: string
  arguments?: unknown
  /** resources/read (and subscribe): the resource; prompts/get: the prompt's name. */
  uri?: string
  prompt?: string
  /** The launch: the server's command line. */
  command?: string
  /** True when the transcript holds the answer to the request. */
  answered: boolean
  result?: unknown
  /** The answer's content as text parts (tool content, resource contents, prompt messages; "[image]" for others). */
  content?: string[]
  /** tools/list: the tools offered. */
  tools?: string[]
  isError?: boolean
  error?: { code?: number; message: string }
  /** What else the server sent after this message: notifications and server-to-client requests, by method. */
  notifications: string[]
  serverRequests: string[]
  stderr?: string
  exit?: { code: number | null; signal: string | null }
  /** A recorded failure of the exchange itself (the server exited before answering, an HTTP error). */
  failure?: string
}

/** The MCP view of an exchange, or undefined when it carries no MCP message. Never throws. */
export function mcpView(trace: Pick<Trace, 'bodies' | 'meta'>, x: Exchange): McpView | undefined {
  try {
    return x.request.url.startsWith('mcp+stdio:') ? stdioView(trace, x) : httpView(trace, x)
  } catch {
    return undefined
  }
}

function stdioView(trace: Pick<Trace, 'bodies' | 'meta'>, x: Exchange): McpView | undefined {
  const target = parseMcpStdioUrl(x.request.url)
  if (!target) return undefined
  const kind = mcpMessageKind(x.request.headers) ?? (target.kind === 'launch' ? 'launch' : target.kind === 'reply' ? 'reply' : 'request')
  const v: McpView = { transport: 'stdio', server: target.server, kind, method: target.method, answered: false, notifications: [], serverRequests: [] }
  if (kind === 'launch') {
    const command = headerValue(x.request.headers, MCP_COMMAND_HEADER)
    if (command) v.command = command
  }
  readParams(v, requestJson(trace, x))
  const head = x.outcome.kind === 'response' ? x.outcome.response : x.outcome.error.partial
  const text = head ? decodedText(trace, head.body, head.headers) : undefined
  let stderr = ''
  for (const line of transcriptLines(text ?? '')) {
    if (line.kind === 'event') {
      if (line.event.kind === 'stderr') stderr += line.event.text
      if (line.event.kind === 'exit') v.exit = { code: line.event.code, signal: line.event.signal }
      // The server's answer was over the line limit: the client got TR_LINE_TOO_LONG in its place.
      if (line.event.kind === 'too-long' && line.event.id !== undefined && kind === 'request') {
        v.answered = true
        v.error = { message: `TR_LINE_TOO_LONG: the answer (${line.event.bytes} bytes) was over the ${line.event.limit}-byte line limit` }
      }
      continue
    }
    readServerMessage(v, line.message)
  }
  if (stderr !== '') v.stderr = stderr
  if (x.outcome.kind === 'error') v.failure = `${x.outcome.error.code}: ${x.outcome.error.message}`
  return v
}

/** Headers only an MCP Streamable HTTP client sends (after initialize): they mark its GET stream and DELETE as MCP. */
const MCP_HTTP_HEADERS = ['mcp-session-id', 'mcp-protocol-version']

/**
 * The name of a Streamable HTTP server in the views: its host without the port, then its path without a last
 * `mcp` segment (`http://127.0.0.1:PORT/mcp` → `127.0.0.1`, `https://gw.test/github/mcp` → `gw.test/github`),
 * so one server reads the same whatever port a run gave it. The raw exchanges keep the URL.
 */
export function mcpHttpServerName(url: string): string {
  const u = new URL(url)
  const path = u.pathname.replace(/\/+$/, '').replace(/\/mcp$/i, '')
  return `${u.hostname}${path}`
}

function httpView(trace: Pick<Trace, 'bodies' | 'meta'>, x: Exchange): McpView | undefined {
  const method = x.request.method.toUpperCase()
  if (method === 'GET' || method === 'DELETE') return httpSessionView(trace, x, method)
  if (method !== 'POST') return undefined
  const req = requestJson(trace, x)
  if (req?.jsonrpc !== '2.0') return undefined
  // The client's answer to a request the server sent on a stream.
  const reply = typeof req.method !== 'string' && isJsonRpcResponse(req)
  if (!reply && typeof req.method !== 'string') return undefined
  const server = mcpHttpServerName(x.request.url)
  const v: McpView = {
    transport: 'http',
    server,
    kind: reply ? 'reply' : req.id === undefined ? 'notification' : 'request',
    method: reply ? '' : (req.method as string),
    answered: false,
    notifications: [],
    serverRequests: [],
  }
  readParams(v, reply ? req : (req.params as Record<string, unknown> | undefined))
  for (const msg of serverMessages(trace, x)) {
    // Another request's answer on the same stream is not this one's.
    if (isJsonRpcResponse(msg) && canonicalJson(msg.id ?? null) !== canonicalJson(req.id ?? null)) continue
    readServerMessage(v, msg)
  }
  if (x.outcome.kind === 'error') v.failure = `${x.outcome.error.code}: ${x.outcome.error.message}`
  else if (x.outcome.response.status >= 400) v.failure = `HTTP ${x.outcome.response.status}`
  return v
}

/** The JSON-RPC messages of a Streamable HTTP answer: its events, or its JSON (one message or a batch). */
function serverMessages(trace: Pick<Trace, 'bodies' | 'meta'>, x: Exchange): Array<Record<string, unknown>> {
  const res = decodedResponse(trace, x)
  const messages: unknown[] = res?.events ? res.events.map((e) => e.data) : Array.isArray(res?.json) ? res.json : res?.json !== undefined ? [res.json] : []
  return messages.filter((m): m is Record<string, unknown> => m !== null && typeof m === 'object' && !Array.isArray(m))
}

/**
 * A session's GET stream (what the server sends unprompted) or its DELETE (the session ends), known by the
 * headers only an MCP client sends. The client closing its stream is how a stream ends: not a failure.
 */
function httpSessionView(trace: Pick<Trace, 'bodies' | 'meta'>, x: Exchange, method: 'GET' | 'DELETE'): McpView | undefined {
  if (!MCP_HTTP_HEADERS.some((h) => headerValue(x.request.headers, h) !== undefined)) return undefined
  if (method === 'GET' && !/text\/event-stream/i.test(headerValue(x.request.headers, 'accept') ?? '')) return undefined
  const v: McpView = {
    transport: 'http',
    server: mcpHttpServerName(x.request.url),
    kind: method === 'GET' ? 'stream' : 'end',
    method: method === 'GET' ? 'server stream' : 'end session',
    answered: false,
    notifications: [],
    serverRequests: [],
  }
  for (const msg of serverMessages(trace, x)) readServerMessage(v, msg)
  if (x.outcome.kind === 'error') {
    if (x.outcome.error.code !== CLIENT_ABORT_CODE) v.failure = `${x.outcome.error.code}: ${x.outcome.error.message}`
  } else if (x.outcome.response.status >= 400) {
    // 405: the server offers no stream (the SDK client expects that and goes on).
    v.failure = x.outcome.response.status === 405 && method === 'GET' ? 'not offered (405)' : `HTTP ${x.outcome.response.status}`
  }
  return v
}

function readParams(v: McpView, params: Record<string, unknown> | undefined): void {
  if (!params) return
  if (v.kind === 'reply') {
    readAnswer(v, params)
    v.answered = false
    return
  }
  if (v.method === 'tools/call') {
    if (typeof params.name === 'string') v.tool = params.name
    v.arguments = params.arguments ?? {}
  }
  if (typeof params.uri === 'string') v.uri = params.uri
  if (v.method === 'prompts/get' && typeof params.name === 'string') v.prompt = params.name
}

function readServerMessage(v: McpView, m: Record<string, unknown>): void {
  if (isJsonRpcResponse(m)) {
    if (v.kind === 'request') readAnswer(v, m)
    return
  }
  if (typeof m.method !== 'string') return
  if (m.id !== undefined) v.serverRequests.push(m.method)
  else v.notifications.push(m.method)
}

/** The answer's result or error, and the meaning of the result for the method. */
function readAnswer(v: McpView, m: Record<string, unknown>): void {
  v.answered = true
  const e = m.error as { code?: unknown; message?: unknown } | undefined
  if (e && typeof e === 'object') {
    v.error = { message: typeof e.message === 'string' ? e.message : stringifyJson(e) }
    if (typeof e.code === 'number') v.error.code = e.code
    return
  }
  const r = m.result
  v.result = r
  if (r === null || typeof r !== 'object') return
  const result = r as Record<string, unknown>
  if (result.isError === true) v.isError = true
  if (Array.isArray(result.tools)) v.tools = result.tools.map((t) => String((t as { name?: unknown })?.name ?? '?'))
  const parts = Array.isArray(result.content)
    ? result.content
    : Array.isArray(result.contents)
      ? result.contents
      : Array.isArray(result.messages)
        ? result.messages.map((msg) => (msg as { content?: unknown })?.content)
        : undefined
  if (parts) v.content = parts.map(partText)
}

function partText(p: unknown): string {
  if (p === null || typeof p !== 'object') return String(p)
  const o = p as Record<string, unknown>
  if (typeof o.text === 'string') return o.text
  if (o.type === 'resource' && o.resource && typeof o.resource === 'object') return partText(o.resource)
  if (typeof o.uri === 'string') return `[${String(o.type ?? 'resource')} ${o.uri}]`
  return `[${String(o.type ?? 'content')}]`
}

/** `write_file {"path":"a.txt"}`, `resources/read file:///x`: what a message asks, in a few words. */
export function mcpAsk(v: McpView, max = 80): string {
  const clip = (s: string) =>
    Array.from(s).length > max
      ? `${Array.from(s)
          .slice(0, max - 1)
          .join('')}…`
      : s
  // File names only: the directories of a command line belong to the machine that recorded it.
  const short = (c: string) =>
    c
      .split(' ')
      .map((a) => a.replace(/^"?(?:[^\s"]*\/)+/, ''))
      .join(' ')
  if (v.kind === 'launch') return `started${v.command ? ` (${clip(short(v.command))})` : ''}`
  if (v.kind === 'reply') return `reply to ${v.method || 'a server request'}`
  if (v.kind === 'stream' || v.kind === 'end') return v.method
  if (v.tool !== undefined) return `${v.method} ${v.tool} ${clip(stringifyJson(v.arguments ?? {}))}`
  if (v.uri !== undefined) return `${v.method} ${v.uri}`
  if (v.prompt !== undefined) return `${v.method} ${v.prompt}`
  return v.method
}

/** What came back, in one phrase. */
export function mcpOutcome(v: McpView, max = 60): string {
  const quote = (s: string) =>
    JSON.stringify(
      Array.from(s).length > max
        ? `${Array.from(s)
            .slice(0, max - 1)
            .join('')}…`
        : s,
    )
  if (v.error) return `error${v.error.code !== undefined ? ` ${v.error.code}` : ''} ${quote(v.error.message)}`
  const info = (v.result as { serverInfo?: { name?: unknown; version?: unknown }; protocolVersion?: unknown } | undefined) ?? {}
  if (v.method === 'initialize' && info.serverInfo)
    return `${String(info.serverInfo.name)} ${String(info.serverInfo.version)}${info.protocolVersion ? ` (protocol ${String(info.protocolVersion)})` : ''}`
  if (v.tools) return `${v.tools.length} tool${v.tools.length === 1 ? '' : 's'}: ${v.tools.slice(0, 6).join(', ')}${v.tools.length > 6 ? ', …' : ''}`
  if (v.content) return `${v.isError ? 'tool error ' : ''}${v.content.length === 0 ? '(no content)' : v.content.map((c) => quote(c)).join(' + ')}`
  if (v.answered) return quote(stringifyJson(v.result ?? null))
  if (v.kind === 'request') return v.failure ?? '(no answer)'
  if (v.kind === 'stream') return v.failure ?? 'open until the client closed it'
  return v.failure ?? ''
}

/** Notes after a tool turn: server messages, stderr, exit. */
export function mcpNotes(v: McpView): string[] {
  const out: string[] = []
  if (v.notifications.length > 0) out.push(`${v.notifications.length} notification${v.notifications.length === 1 ? '' : 's'}`)
  for (const r of v.serverRequests) out.push(`server asked ${r}`)
  if (v.exit) out.push(`server exited ${v.exit.signal ? `by ${v.exit.signal}` : `with code ${v.exit.code}`}`)
  return out
}

/** The tool turn in full, for `show --exchange N`. */
export function formatToolTurn(seq: number, method: string, url: string, v: McpView): string {
  const lines = [`#${seq} MCP ${v.kind} (${v.transport === 'stdio' ? 'stdio' : 'Streamable HTTP'}, server ${v.server})`, `${method} ${url}`]
  lines.push(`asks: ${mcpAsk(v, 400)}`)
  if (v.kind === 'request') lines.push(`answer: ${v.answered ? mcpOutcome(v, 400) : (v.failure ?? '(none)')}`)
  for (const [i, c] of (v.content ?? []).entries()) lines.push(`  content[${i}]: ${JSON.stringify(c)}`)
  if (v.notifications.length > 0) lines.push(`notifications: ${v.notifications.join(', ')}`)
  if (v.serverRequests.length > 0) lines.push(`server requests: ${v.serverRequests.join(', ')}`)
  if (v.stderr) lines.push(`stderr: ${JSON.stringify(v.stderr.length > 400 ? `${v.stderr.slice(0, 399)}…` : v.stderr)}`)
  if (v.exit) lines.push(`exit: ${v.exit.signal ?? v.exit.code}`)
  lines.push('', '(--view http shows the raw exchange)')
  return lines.join('\n')
}

/** Everything that differs between two MCP turns, in tool terms ("result content[0].text", "arguments $.path"). */
export function compareMcpViews(a: McpView, b: McpView): McpDiffDetail[] {
  const out: McpDiffDetail[] = []
  const add = (side: McpDiffDetail['side'], what: string, before: unknown, after: unknown) => {
    const d: McpDiffDetail = { side, what }
    if (before !== undefined) d.before = before
    if (after !== undefined) d.after = after
    out.push(d)
  }
  const same = (x: unknown, y: unknown) => canonicalJson(x ?? null) === canonicalJson(y ?? null)
  if (a.method !== b.method) add('request', 'method', a.method, b.method)
  if (a.tool !== b.tool) add('request', 'tool', a.tool, b.tool)
  for (const d of diffJson(a.arguments ?? null, b.arguments ?? null, 20)) add('request', `arguments ${d.path}`, d.before, d.after)
  if (a.uri !== b.uri) add('request', 'uri', a.uri, b.uri)
  if (!same(a.error, b.error)) add('response', 'error', a.error?.message, b.error?.message)
  if ((a.isError ?? false) !== (b.isError ?? false)) add('response', 'isError', a.isError ?? false, b.isError ?? false)
  if (!same(a.tools, b.tools)) add('response', 'tools', a.tools?.join(', '), b.tools?.join(', '))
  const n = Math.max(a.content?.length ?? 0, b.content?.length ?? 0)
  for (let i = 0; i < n; i++) if (a.content?.[i] !== b.content?.[i]) add('response', `result content[${i}]`, a.content?.[i], b.content?.[i])
  if (n === 0 && !same(a.result, b.result))
    for (const d of diffJson(a.result ?? null, b.result ?? null, 20)) add('response', `result ${d.path}`, d.before, d.after)
  if (a.answered !== b.answered) add('response', 'answered', a.answered, b.answered)
  if (!same(a.notifications, b.notifications)) add('response', 'notifications', a.notifications.join(', '), b.notifications.join(', '))
  if (!same(a.serverRequests, b.serverRequests)) add('response', 'server requests', a.serverRequests.join(', '), b.serverRequests.join(', '))
  if (!same(a.exit, b.exit)) add('response', 'exit', a.exit ? (a.exit.signal ?? a.exit.code) : undefined, b.exit ? (b.exit.signal ?? b.exit.code) : undefined)
  return out
}

/** "mcp filesystem tools/call write_file": how a diff names the turn. */
export function mcpLabel(v: McpView): string {
  return `mcp ${v.server} ${v.kind === 'reply' ? `reply ${v.method}` : v.method}${v.tool !== undefined ? ` ${v.tool}` : ''}`
}
