/**
 * What `tr-proxy drift` re-sends of a trace's MCP messages, decided before anything runs (drift-plan.ts asks here
 * for every exchange that carries one). Pure.
 * - stdio (`mcp+stdio://`): never fetched. Its server is re-spawned from the recorded command only when asked
 *   (`--mcp-spawn`: running a recorded command needs a yes), or from a command the user gives (`--mcp-command`).
 *   A recorded command whose secret-looking values were masked is not run with `[REDACTED]` in their place:
 *   the user gives the command. The messages go to the re-spawned server in the recorded order through the MCP
 *   capture path (mcp/drift-resend.ts), with fresh ids.
 * - Streamable HTTP: a fresh session first: the recorded `initialize` (and `notifications/initialized`) is
 *   re-sent without the recorded `mcp-session-id`, and the messages after it carry the id the live server
 *   minted (McpHttpSessions); the session's background GET stream is not re-opened.
 * What is safe, sent by default: the handshake, listing and reading (tools/list, resources/read, prompts/get,
 * ping, ...), and `tools/call` of a read-only tool: one the server's recorded `tools/list` marks
 * `readOnlyHint: true`, or one named by `--mcp-read-only` (`*` matches any characters). Any other tool call
 * may change something, and needs `--unsafe`; notifications and the client's replies have no answer to compare.
 */
import {
  bodyBytes,
  type Exchange,
  headerValue,
  MASKED_ARGUMENT,
  MCP_COMMAND_HEADER,
  MCP_PROGRESS_TOKEN_HEADER,
  type McpView,
  mcpView,
  PROGRESS_TOKEN,
  parseCommandLine,
  type ResponseHead,
  type Trace,
  tryParseJson,
  tryUtf8,
} from '../trace/index.ts'
import type { CapturedRequest } from './decision.ts'

/** MCP methods that only read: re-sent by default (tools/call is decided per tool). */
export const MCP_SAFE_METHODS: readonly string[] = [
  'initialize',
  'ping',
  'tools/list',
  'resources/list',
  'resources/templates/list',
  'resources/read',
  'prompts/list',
  'prompts/get',
  'completion/complete',
]

/** The MCP options of `planDrift`. */
export interface McpDriftOptions {
  /** Re-spawn stdio servers from their recorded commands (they are listed before anything runs). */
  spawn?: boolean
  /** Server name → the command to run it with (given by the user: it needs no --mcp-spawn, and fills masked values). */
  commands?: ReadonlyMap<string, readonly string[]>
  /** Tools that only read, beside those the recorded tools/list marks readOnlyHint (`*` matches any characters). */
  readOnlyTools?: readonly string[]
}

/** How one MCP message is re-sent. */
export type McpResend =
  | { transport: 'stdio'; server: string; command: readonly string[]; message: Record<string, unknown> }
  | { transport: 'http'; session: string; role: 'initialize' | 'member' | 'end' }

/** The plan of one MCP exchange: what the caller sends, or why not. */
export type McpExchangePlan = { send: true; kind: 'safe' | 'unsafe'; resend: McpResend } | { send: false; kind: 'safe' | 'unsafe'; reason: string }

/** What the plan knows of a trace's MCP servers, read once. */
export interface McpPlanContext {
  /** Per server (stdio name, or HTTP session URL): the tools its recorded tools/list marks read-only. */
  readOnly: Map<string, Set<string>>
  /** Per stdio server: its recorded command line (masked), from the launch exchange. */
  commands: Map<string, string>
  /** HTTP session URLs whose initialize was recorded. */
  initialized: Set<string>
  options: McpDriftOptions
}

/** Reads what the plan needs of `trace`'s MCP servers. */
export function mcpPlanContext(trace: Trace, options: McpDriftOptions): McpPlanContext {
  const ctx: McpPlanContext = { readOnly: new Map(), commands: new Map(), initialized: new Set(), options }
  for (const x of trace.exchanges) {
    const v = mcpView(trace, x)
    if (!v) continue
    const key = serverKey(x, v)
    if (v.kind === 'launch') {
      const line = headerValue(x.request.headers, MCP_COMMAND_HEADER)
      if (line !== undefined) ctx.commands.set(key, line)
    }
    if (v.transport === 'http' && v.method === 'initialize') ctx.initialized.add(key)
    const tools = (v.result as { tools?: unknown } | undefined)?.tools
    if (v.method !== 'tools/list' || !Array.isArray(tools)) continue
    const set = ctx.readOnly.get(key) ?? new Set<string>()
    ctx.readOnly.set(key, set)
    for (const t of tools as Array<{ name?: unknown; annotations?: { readOnlyHint?: unknown } }>) {
      if (typeof t?.name === 'string' && t.annotations?.readOnlyHint === true) set.add(t.name)
    }
  }
  return ctx
}

/** The server an MCP exchange belongs to: the stdio server's name, or the HTTP session's URL (no query). */
function serverKey(x: Exchange, v: McpView): string {
  if (v.transport === 'stdio') return v.server
  const u = new URL(x.request.url)
  return `${u.origin}${u.pathname}`
}

/** Plans one exchange that carries an MCP message (`v`, its view). */
export function planMcpExchange(trace: Trace, x: Exchange, v: McpView, ctx: McpPlanContext, unsafe: boolean): McpExchangePlan {
  const key = serverKey(x, v)
  const kind = messageKind(v, key, ctx)
  if (v.kind === 'reply') return { send: false, kind, reason: "the client's reply to a server request: nothing answers it to compare" }
  if (v.kind === 'stream')
    return { send: false, kind, reason: 'the session stream of what the server sends unprompted: not re-opened (it lasts until the client closes it)' }
  if (v.kind === 'notification' && v.method !== 'notifications/initialized')
    return { send: false, kind, reason: 'a notification: there is no answer to compare' }
  if (kind === 'unsafe' && !unsafe)
    return {
      send: false,
      kind,
      reason: `tool "${v.tool}" is not known to only read: pass --unsafe to call it live, or --mcp-read-only ${v.tool} if it only reads`,
    }
  if (v.transport === 'http') {
    if (v.kind === 'end') return { send: true, kind, resend: { transport: 'http', session: key, role: 'end' } }
    if (v.method === 'initialize') return { send: true, kind, resend: { transport: 'http', session: key, role: 'initialize' } }
    if (!ctx.initialized.has(key))
      return { send: false, kind, reason: 'no initialize of this server was recorded: drift cannot open a fresh session to re-send it in' }
    return { send: true, kind, resend: { transport: 'http', session: key, role: 'member' } }
  }
  const command = stdioCommand(key, ctx)
  if (typeof command === 'string') return { send: false, kind, reason: command }
  if (v.kind === 'launch') return { send: false, kind, reason: 'the launch itself: the server is re-spawned to re-send the messages after it' }
  return { send: true, kind, resend: { transport: 'stdio', server: key, command, message: stdioMessage(trace, x, v) } }
}

/** Safe or not: a tool call is safe when the tool only reads (see the header); other methods by MCP_SAFE_METHODS. */
function messageKind(v: McpView, key: string, ctx: McpPlanContext): 'safe' | 'unsafe' {
  if (v.kind !== 'request') return 'safe'
  if (v.method !== 'tools/call') return MCP_SAFE_METHODS.includes(v.method) ? 'safe' : 'unsafe'
  const tool = v.tool ?? ''
  if (ctx.readOnly.get(key)?.has(tool)) return 'safe'
  return (ctx.options.readOnlyTools ?? []).some((p) => globMatches(p, tool)) ? 'safe' : 'unsafe'
}

function globMatches(pattern: string, name: string): boolean {
  const re = new RegExp(
    `^${pattern
      .split('*')
      .map((p) => p.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
      .join('.*')}$`,
  )
  return re.test(name)
}

/** The command a stdio server is re-spawned with, or why it is not. */
function stdioCommand(server: string, ctx: McpPlanContext): readonly string[] | string {
  const given = ctx.options.commands?.get(server)
  if (given) return given
  const line = ctx.commands.get(server)
  const argv = line === undefined ? undefined : parseCommandLine(line)
  if (!argv) return `an MCP stdio message of server "${server}", whose command was not recorded: give it with --mcp-command ${server}=ENV_VAR`
  if (!ctx.options.spawn)
    return `an MCP stdio message: drift re-spawns its server only when asked: pass --mcp-spawn to run its recorded command (${line}), or give one with --mcp-command ${server}=ENV_VAR`
  if (argv.some((a) => a === MASKED_ARGUMENT || a.endsWith(`=${MASKED_ARGUMENT}`)))
    return `server "${server}" was recorded with secret-looking values masked (${line}); it is not run with ${MASKED_ARGUMENT} in their place: give its command with --mcp-command ${server}=ENV_VAR`
  return argv
}

/** The JSON-RPC message to write for a recorded stdio exchange (a request's id, 0 here, is the sender's to give). */
function stdioMessage(trace: Trace, x: Exchange, v: McpView): Record<string, unknown> {
  const message: Record<string, unknown> = { jsonrpc: '2.0', method: v.method, ...(v.kind === 'request' ? { id: 0 } : {}) }
  const text = x.request.body ? tryUtf8(bodyBytes(trace, x.request.body)) : undefined
  const params = text === undefined ? undefined : tryParseJson(text)?.value
  if (params !== null && typeof params === 'object') {
    // The progress token was moved to a header when recorded (trace/mcp-wire.ts): put it back.
    const token = headerValue(x.request.headers, MCP_PROGRESS_TOKEN_HEADER)
    const meta = (params as { _meta?: { progressToken?: unknown } })._meta
    if (token !== undefined && meta?.progressToken === PROGRESS_TOKEN) meta.progressToken = JSON.parse(token)
    message.params = params
  }
  return message
}

/**
 * The fresh Streamable HTTP sessions of one drift run: each `initialize` goes without the recorded session id,
 * and the messages after it carry the id its live answer minted.
 */
export class McpHttpSessions {
  readonly #ids = new Map<string, string>()

  /** The request to send for planned `resend`: the recorded one with this run's session id (or none yet). */
  prepare(resend: Extract<McpResend, { transport: 'http' }>, request: CapturedRequest): CapturedRequest {
    const headers = request.headers.filter(([name]) => name.toLowerCase() !== 'mcp-session-id')
    const id = resend.role === 'initialize' ? undefined : this.#ids.get(resend.session)
    if (id !== undefined) headers.push(['mcp-session-id', id])
    return { ...request, headers }
  }

  /** The live answer's head: an initialize's minted session id is kept for the messages after it. */
  answered(resend: Extract<McpResend, { transport: 'http' }>, head: ResponseHead): void {
    const id = headerValue(head.headers, 'mcp-session-id')
    if (resend.role === 'initialize' && id !== undefined) this.#ids.set(resend.session, id)
  }
}

/**
 * What the client answered each kind of server request in the recording, for a stdio server (method → the reply
 * body, `{"result": ...}` or `{"error": ...}`): drift gives the live server the same answers when it asks.
 */
export function mcpStdioReplies(trace: Trace, server: string): Map<string, unknown> {
  const out = new Map<string, unknown>()
  for (const x of trace.exchanges) {
    const v = mcpView(trace, x)
    if (v?.transport !== 'stdio' || v.server !== server || v.kind !== 'reply' || out.has(v.method) || !x.request.body) continue
    const body = tryParseJson(tryUtf8(bodyBytes(trace, x.request.body)) ?? '')?.value
    if (body !== null && typeof body === 'object') out.set(v.method, body)
  }
  return out
}
