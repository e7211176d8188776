/**
 * MCP over stdio as exchanges: how one conversation between an MCP client and a stdio server is written in
 * the trace format every command already reads (show, diff, fork, emit-test, check). Pure: no I/O.
 *
 * Every message the client sends is one exchange, `POST mcp+stdio://<server>/<path>`:
 * - `/` (header `mcp-message: launch`): the server process was started; no body. It is the first exchange of
 *   a server and the home of what the server printed before the client's first message.
 * - `/<method>` for a request (`mcp-message: request`, the JSON-RPC id in `mcp-id`) or a notification
 *   (`mcp-message: notification`); `tools/call` adds the tool's name: `/tools/call/<name>`, so a timeline,
 *   a fork selector and a fault target can name the tool. The body is the JSON-RPC `params` (none: no body);
 *   a progress token the client put in `params._meta.progressToken` is moved to the `mcp-progress-token`
 *   header and written as PROGRESS_TOKEN in the body, since it is an id (the SDK uses the message id).
 *   Requests are therefore matched by method and params, never by id.
 * - `/reply/<method>` (`mcp-message: reply`): the client's answer to a server-to-client request (sampling,
 *   elicitation, roots/list, ping); the body is `{"result": ...}` or `{"error": ...}`, matched like params.
 * The response (status 200, `content-type: application/x-ndjson`) is a transcript: one line per thing the
 * server did after this client message, in order, each chunk timed like any body:
 * - a JSON-RPC message as the server wrote it: the answer to this request (its `id` is the recorded one and
 *   is mapped to the client's id on replay), and notifications and server-to-client requests sent while this
 *   was the latest client message;
 * - an event line, `{"tool-replay": KIND, ...}` (never a JSON-RPC message: those carry "jsonrpc"): `stderr`
 *   {text}, `stdout` {text} (a line that was not JSON), `replied` {id} (the client answered server request id
 *   here: later lines waited for it), `stdin-closed` (the client closed the server's input), `exit` {code,
 *   signal} (the process ended), `too-long` {bytes, limit, id?} (the server wrote a line over the line limit: it
 *   was dropped, and when it answered request `id` the client got TR_LINE_TOO_LONG for it instead).
 * A request still unanswered when the server exits is a recorded error MCP_SERVER_EXITED with the lines so far.
 */
import type { HeaderPairs } from './exchange.ts'
import { headerValue } from './header-pairs.ts'

/** The URL scheme of MCP messages over stdio. */
export const MCP_STDIO_SCHEME = 'mcp+stdio:'
/** Content type of an MCP transcript (the response body of an MCP stdio exchange). */
export const MCP_TRANSCRIPT_TYPE = 'application/x-ndjson'
/** Request header: launch, request, notification or reply. */
export const MCP_MESSAGE_HEADER = 'mcp-message'
/** Request header: the JSON-RPC id of a request (JSON). */
export const MCP_ID_HEADER = 'mcp-id'
/** Request header: the progress token the client asked for (JSON). */
export const MCP_PROGRESS_TOKEN_HEADER = 'mcp-progress-token'
/** Request header of the launch exchange: the server's command line (secret-looking values masked). */
export const MCP_COMMAND_HEADER = 'mcp-command'
/** What `params._meta.progressToken` reads in a recorded body (the real token is in MCP_PROGRESS_TOKEN_HEADER). */
export const PROGRESS_TOKEN = '(progress token)'
/** Error code of a request the server never answered because it exited. */
export const MCP_SERVER_EXITED = 'MCP_SERVER_EXITED'
/** The key of Tool Replay's own transcript lines. */
export const EVENT_KEY = 'tool-replay'

/** What kind of client message an exchange holds. */
export type McpMessageKind = 'launch' | 'request' | 'notification' | 'reply'

/** An event line of a transcript. */
export type McpEvent =
  | { kind: 'stderr'; text: string }
  | { kind: 'stdout'; text: string }
  | { kind: 'replied'; id: string | number }
  | { kind: 'stdin-closed' }
  | { kind: 'exit'; code: number | null; signal: string | null }
  | { kind: 'too-long'; bytes: number; limit: number; id?: string | number }

/** One line of a transcript: a JSON-RPC message (with its exact text) or an event. */
export type TranscriptLine = { kind: 'message'; message: Record<string, unknown>; text: string } | { kind: 'event'; event: McpEvent }

/** The parts of an MCP stdio URL. */
export interface McpStdioTarget {
  server: string
  kind: 'launch' | 'message' | 'reply'
  /** The JSON-RPC method ('' for a launch). */
  method: string
  /** For tools/call: the tool's name. */
  tool?: string
}

/** `mcp+stdio://<server>/<method>` (and `/tools/call/<tool>`, `/reply/<method>`, `/` for a launch). */
export function mcpStdioUrl(server: string, target: Omit<McpStdioTarget, 'server'>): string {
  if (target.kind === 'launch') return `mcp+stdio://${server}/`
  const method = target.method.split('/').map(encodeURIComponent).join('/')
  const tool = target.tool !== undefined ? `/${encodeURIComponent(target.tool)}` : ''
  return `mcp+stdio://${server}/${target.kind === 'reply' ? 'reply/' : ''}${method}${tool}`
}

/** Reads an MCP stdio URL back; undefined for any other URL. */
export function parseMcpStdioUrl(url: string): McpStdioTarget | undefined {
  if (!url.startsWith('mcp+stdio://')) return undefined
  const rest = url.slice('mcp+stdio://'.length)
  const slash = rest.indexOf('/')
  const server = slash < 0 ? rest : rest.slice(0, slash)
  const path = slash < 0 ? '' : rest.slice(slash + 1).replace(/[?#].*$/s, '')
  if (path === '') return { server, kind: 'launch', method: '' }
  let parts: string[]
  try {
    parts = path.split('/').map(decodeURIComponent)
  } catch {
    return undefined
  }
  const reply = parts[0] === 'reply'
  if (reply) parts.shift()
  if (!reply && parts[0] === 'tools' && parts[1] === 'call' && parts.length >= 3) {
    return { server, kind: 'message', method: 'tools/call', tool: parts.slice(2).join('/') }
  }
  return { server, kind: reply ? 'reply' : 'message', method: parts.join('/') }
}

/** The kind of client message an MCP stdio exchange's request holds. */
export function mcpMessageKind(headers: HeaderPairs): McpMessageKind | undefined {
  const v = headerValue(headers, MCP_MESSAGE_HEADER)
  return v === 'launch' || v === 'request' || v === 'notification' || v === 'reply' ? v : undefined
}

/** A server name usable as a URL host: lowercase letters, digits, '-' and '.'; 1-63 characters. */
export const SERVER_NAME = /^[a-z0-9](?:[a-z0-9.-]{0,61}[a-z0-9])?$/

/** The text of an event line (no newline). */
export function eventLine(e: McpEvent): string {
  const { kind, ...rest } = e
  return JSON.stringify({ [EVENT_KEY]: kind, ...rest })
}

/** Reads one transcript line; a line that is neither an event nor a JSON object is a `stdout` event. */
export function readTranscriptLine(text: string): TranscriptLine {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return { kind: 'event', event: { kind: 'stdout', text } }
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return { kind: 'event', event: { kind: 'stdout', text } }
  const o = value as Record<string, unknown>
  const kind = o[EVENT_KEY]
  if (typeof kind === 'string' && o.jsonrpc === undefined) {
    const event = eventOf(kind, o)
    if (event) return { kind: 'event', event }
  }
  return { kind: 'message', message: o, text }
}

function eventOf(kind: string, o: Record<string, unknown>): McpEvent | undefined {
  if ((kind === 'stderr' || kind === 'stdout') && typeof o.text === 'string') return { kind, text: o.text }
  if (kind === 'replied' && (typeof o.id === 'string' || typeof o.id === 'number')) return { kind, id: o.id }
  if (kind === 'stdin-closed') return { kind }
  if (kind === 'too-long' && typeof o.bytes === 'number' && typeof o.limit === 'number') {
    return { kind, bytes: o.bytes, limit: o.limit, ...(typeof o.id === 'string' || typeof o.id === 'number' ? { id: o.id } : {}) }
  }
  if (kind === 'exit') {
    return { kind, code: typeof o.code === 'number' ? o.code : null, signal: typeof o.signal === 'string' ? o.signal : null }
  }
  return undefined
}

/** Splits a transcript body into its lines (a final line without newline counts; empty lines do not). */
export function transcriptLines(text: string): TranscriptLine[] {
  return text
    .split('\n')
    .map((l) => l.replace(/\r$/, ''))
    .filter((l) => l !== '')
    .map(readTranscriptLine)
}

/** True for a JSON-RPC response: an id and a result or an error, no method. */
export function isJsonRpcResponse(m: Record<string, unknown>): boolean {
  return m.method === undefined && m.id !== undefined && (m.result !== undefined || m.error !== undefined)
}

/** Flags whose next argument, and `NAME=value` arguments whose name, look secret: masked in MCP_COMMAND_HEADER. */
const SECRET_NAME = /(key|token|secret|password|passwd|auth|credential)/i

/** A command line for MCP_COMMAND_HEADER: arguments after a secret-looking flag and `SECRET=value` values masked. */
export function maskedCommandLine(argv: readonly string[]): string {
  const out: string[] = []
  let maskNext = false
  for (const arg of argv) {
    if (maskNext) {
      out.push('[REDACTED]')
      maskNext = false
      continue
    }
    const eq = /^(--?[^=\s]+|[A-Za-z_][A-Za-z0-9_]*)=(.*)$/s.exec(arg)
    if (eq && SECRET_NAME.test(eq[1] as string)) out.push(`${eq[1]}=[REDACTED]`)
    else out.push(arg)
    if (/^--?[A-Za-z]/.test(arg) && !arg.includes('=') && SECRET_NAME.test(arg)) maskNext = true
  }
  // A header value is visible ASCII: anything else is escaped.
  return out
    .map((a) => (/^[\x21-\x7e]+$/.test(a) ? a : JSON.stringify(a)))
    .join(' ')
    .replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
}

/** What MCP_COMMAND_HEADER holds in place of a masked value (alone, or after `NAME=`). */
export const MASKED_ARGUMENT = '[REDACTED]'

/**
 * A command line of MCP_COMMAND_HEADER read back into its arguments (the inverse of maskedCommandLine: quoted
 * arguments are JSON strings); undefined when it does not read. Masked values stay MASKED_ARGUMENT.
 */
export function parseCommandLine(line: string): string[] | undefined {
  const out: string[] = []
  let i = 0
  while (i < line.length) {
    if (line[i] === ' ') {
      i++
      continue
    }
    if (line[i] === '"') {
      const m = /^"(?:[^"\\]|\\.)*"/.exec(line.slice(i))
      if (!m) return undefined
      try {
        out.push(JSON.parse(m[0]) as string)
      } catch {
        return undefined
      }
      i += m[0].length
      continue
    }
    const end = line.indexOf(' ', i)
    out.push(line.slice(i, end < 0 ? line.length : end))
    i = end < 0 ? line.length : end
  }
  return out.length > 0 ? out : undefined
}

/** The transcript of a made-up tool error result (a fault): its JSON-RPC id is null and mapped to the caller's on replay. */
export function toolErrorTranscript(text: string): Uint8Array {
  const line = JSON.stringify({ jsonrpc: '2.0', id: null, result: { content: [{ type: 'text', text }], isError: true } })
  return new TextEncoder().encode(`${line}\n`)
}
