/** What an MCP conversation (conversation.ts) is given: its session, server, client end, and the running server it drives. */
import type { CaptureSession } from '../capture/index.ts'
import type { SessionOptions } from '../engine/index.ts'
import type { ClientEnd } from './client-target.ts'

/** A running server, as the conversation drives it. */
export interface ServerEnd {
  /** Writes one line (no newline) to the server's input. */
  write(line: string): void
  /** Closes the server's input (the client is done). */
  closeInput(): void
  /** Kills the server at once (a server_crash fault). */
  kill(): void
  /** Stops reading the server's output while the conversation holds it back (a transport that can). */
  pause?(): void
  resume?(): void
}

/** Options for `McpConversation`. */
/** `maxBodyBytes` as SESSION_OPTIONS declares it: the largest message, one line either way (TR_LINE_TOO_LONG beyond). */
export interface ConversationOptions extends Pick<SessionOptions, 'maxBodyBytes'> {
  /** The session the messages go to: an engine `Session`, or one another process owns (`findSharedSession`). */
  session: CaptureSession
  /** The server's name: the host of its URLs. */
  server: string
  /** The server's command line, for the launch exchange (secret-looking values are masked). */
  command: readonly string[]
  client: ClientEnd
  /** Starts the real server (record, passthrough). It reports through serverLine, serverStderr and serverExit. */
  start(): Promise<ServerEnd>
  /** Warnings (a refused notification). */
  log(line: string): void
  /** How long an answer the client gave up on keeps being recorded (ms; default 1000, as for HTTP; 0 records the abort). */
  drainAfterAbortMs?: number
}
