/**
 * The in-process MCP path: wraps a client Transport of `@modelcontextprotocol/sdk` (typically a
 * `StdioClientTransport`) so the SDK's `Client` talks to Tool Replay, which starts and talks to the wrapped
 * transport only when the session forwards. Strict replay never calls the wrapped transport's `start()`, so
 * its server process never spawns. The messages go through the same conversation as `tr-proxy mcp`, written
 * as the stdio transport would write them, so both paths record the same trace.
 *
 * Structural types: the SDK is not a dependency of Tool Replay; anything shaped like its Transport fits.
 */
import { PassThrough } from 'node:stream'
import type { RemoteSession, Session, SessionOptions } from '../engine/index.ts'
import { McpConversation, type ServerEnd } from './conversation.ts'
import { assertServerName } from './stdio-wrapper.ts'

/** A JSON-RPC message as the SDK passes it. */
export type JsonRpcMessage = Record<string, unknown>

/** The client Transport interface of @modelcontextprotocol/sdk (shared/transport.ts), as far as Tool Replay uses it. */
export interface McpTransport {
  start(): Promise<void>
  send(message: JsonRpcMessage, options?: unknown): Promise<void>
  close(): Promise<void>
  // Method syntax: the SDK's own handler types (JSONRPCMessage) fit these.
  onclose?(): void
  onerror?(error: Error): void
  onmessage?(message: JsonRpcMessage, extra?: unknown): void
  sessionId?: string | undefined
  setProtocolVersion?: (version: string) => void
  /** StdioClientTransport: the server's stderr when created with `stderr: 'pipe'`. */
  readonly stderr?: { on(event: 'data', listener: (chunk: Buffer) => void): unknown } | null
  /** StdioClientTransport: the server's pid once started. */
  readonly pid?: number | null
}

/** Options for `wrapMcpTransport`. */
/** `maxBodyBytes` as SESSION_OPTIONS declares it: the largest message, its params buffered for matching. */
export interface WrapTransportOptions extends Pick<SessionOptions, 'maxBodyBytes'> {
  /** The session the messages go to: an engine Session (`install()` returns it as `session`), or a shared one. */
  session: Session | RemoteSession
  /** The server's name in the trace (the host of its mcp+stdio:// URLs). */
  name: string
  /** The server's command line, kept in the launch exchange (secret-looking values masked). */
  command?: readonly string[]
  /** Tool Replay's warnings (a refused notification). Default: process.emitWarning. */
  onWarning?: (message: string) => void
}

/** A wrapped transport: the SDK's Transport, plus the server's stderr as recorded or replayed. */
export interface WrappedMcpTransport extends McpTransport {
  /** What the server wrote on stderr: live while recording, the recorded text in replay. */
  readonly stderr: PassThrough
  /** Times the wrapped transport was started (0 in strict replay). */
  readonly started: number
}

/**
 * Wraps an SDK client transport for record and replay.
 * @example
 * const tr = await install({ mode: 'replay', trace: 'agent' })
 * const transport = wrapMcpTransport(new StdioClientTransport({ command: 'npx', args: ['@modelcontextprotocol/server-filesystem', dir] }), { session: tr.session, name: 'filesystem' })
 * await new Client({ name: 'agent', version: '1.0.0' }).connect(transport)
 */
export function wrapMcpTransport(inner: McpTransport, options: WrapTransportOptions): WrappedMcpTransport {
  const name = assertServerName(options.name)
  const warn = options.onWarning ?? ((m: string) => process.emitWarning(m, { type: 'ToolReplayWarning', code: 'TR_MCP' }))
  const stderr = new PassThrough()
  let started = 0
  let closedOnce = false
  const wrapper: WrappedMcpTransport = {
    stderr,
    get started() {
      return started
    },
    start: async () => {
      await conversation.launch()
    },
    send: async (message) => {
      conversation.fromClient(JSON.stringify(message))
    },
    // The app closed its client: a request it still waited on is given up (recorded as the client abort).
    close: async () => {
      conversation.clientGone()
      conversation.clientClosed()
      await conversation.done
      signalClose()
    },
  }
  const signalClose = () => {
    if (closedOnce) return
    closedOnce = true
    stderr.end()
    wrapper.onclose?.()
  }
  const conversation: McpConversation = new McpConversation({
    session: options.session,
    server: name,
    command: options.command ?? [],
    log: warn,
    ...(options.maxBodyBytes !== undefined ? { maxBodyBytes: options.maxBodyBytes } : {}),
    client: {
      send: (line) => wrapper.onmessage?.(JSON.parse(line) as JsonRpcMessage),
      stderr: (text) => {
        if (!stderr.writableEnded) stderr.write(text)
      },
      // In process, a macrotask between recorded chunks lets the SDK handle one before the next arrives.
      separate: () => new Promise<void>((resolve) => setImmediate(resolve)),
      exit: () => queueMicrotask(signalClose),
    },
    start: async (): Promise<ServerEnd> => {
      started++
      inner.onmessage = (m) => conversation.serverLine(JSON.stringify(m))
      inner.onclose = () => conversation.serverExit(null, null)
      inner.onerror = (err) => wrapper.onerror?.(err)
      const decoder = new TextDecoder()
      inner.stderr?.on('data', (chunk: Buffer) => conversation.serverStderr(decoder.decode(chunk, { stream: true })))
      await inner.start()
      return {
        write: (line) => {
          inner.send(JSON.parse(line) as JsonRpcMessage).catch((err: unknown) => wrapper.onerror?.(err as Error))
        },
        closeInput: () => {
          void inner.close().catch(() => {})
        },
        kill: () => {
          const pid = inner.pid
          if (typeof pid === 'number') process.kill(pid, 'SIGKILL')
          else void inner.close().catch(() => {})
        },
      }
    },
  })
  return wrapper
}
