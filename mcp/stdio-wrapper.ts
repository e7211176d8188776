/**
 * `tr-proxy mcp -- <server command...>`: Tool Replay stands where an MCP client expects a stdio server. The
 * client writes JSON-RPC lines to this process's stdin and reads them from its stdout, exactly as it would
 * with the server; the conversation (conversation.ts) decides per message. The server is started only when
 * the session forwards its launch (record, passthrough): strict replay never starts it.
 */
import { spawn } from 'node:child_process'
import { basename, extname } from 'node:path'
import type { Readable, Writable } from 'node:stream'
import type { CaptureSession } from '../capture/index.ts'
import type { SessionOptions } from '../engine/index.ts'
import { ErrorCodes, maskedCommandLine, SERVER_NAME, ToolReplayError } from '../trace/index.ts'
import { McpConversation, type ServerEnd } from './conversation.ts'
import { mcpLineReader } from './framing.ts'

/** Replay: the longest a recorded gap between two chunks of a transcript is kept (ms), and the shortest. */
export const MAX_CHUNK_GAP_MS = 50
export const MIN_CHUNK_GAP_MS = 2

/**
 * How long a server may take to exit after its input closed, then after SIGTERM, before it is killed (ms). Below
 * the SDK's own 2 s (StdioClientTransport.close): the wrapper must be done, its trace written, before the client
 * signals it.
 */
export const SERVER_EXIT_GRACE_MS = 800

/** Options for `runMcpStdio`. */
/** `maxBodyBytes` as SESSION_OPTIONS declares it: the largest message, one line either way (TR_LINE_TOO_LONG beyond). */
export interface McpStdioOptions extends Pick<SessionOptions, 'maxBodyBytes'> {
  /** The session: the command's own, or the one of the run that started this process (`findSharedSession`). */
  session: CaptureSession
  /** The server's name in the trace (see `serverNameFor`). */
  server: string
  /** The server's command line. */
  command: readonly string[]
  /** The client's side (default: this process's stdin and stdout). */
  input?: Readable
  output?: Writable
  /** Where the server's stderr (and Tool Replay's warnings) go (default: this process's stderr). */
  errors?: Writable
  /** The server's environment (default: this process's). */
  env?: NodeJS.ProcessEnv
}

/** How the served conversation ended: the server's exit (recorded or replayed), null when it never ran. */
export interface McpStdioExit {
  code: number | null
  signal: string | null
  /** Times the server was started (0 in strict replay). */
  spawned: number
}

/**
 * Serves one MCP stdio conversation until the client closes and the server has exited.
 * @example
 * const exit = await runMcpStdio({ session, server: 'filesystem', command: ['node', 'server.js', dir] })
 */
export async function runMcpStdio(o: McpStdioOptions): Promise<McpStdioExit> {
  const input = o.input ?? process.stdin
  const output = o.output ?? process.stdout
  const errors = o.errors ?? process.stderr
  const result: McpStdioExit = { code: null, signal: null, spawned: 0 }
  let stopServer: (() => void) | undefined
  const log = (line: string) => errors.write(`tr-proxy mcp (${o.server}): ${line}\n`)
  const conversation: McpConversation = new McpConversation({
    session: o.session,
    server: o.server,
    command: o.command,
    log,
    ...(o.maxBodyBytes !== undefined ? { maxBodyBytes: o.maxBodyBytes } : {}),
    client: {
      // While the client is not reading, the server waits (the live tee's back-pressure).
      send: (line) => (output.write(`${line}\n`) ? undefined : drained(output)),
      sendBytes: (line) => (output.write(line) ? undefined : drained(output)),
      stderr: (text) => errors.write(text),
      // A pipe merges writes the reader has not read yet: a flushed write and a short wait (the recorded gap,
      // kept between MIN and MAX) give each recorded chunk its own read, as the proxy does for HTTP bodies.
      separate: (gapMs) =>
        new Promise<void>((resolve) => {
          output.write('', () => setTimeout(resolve, Math.min(MAX_CHUNK_GAP_MS, Math.max(MIN_CHUNK_GAP_MS, gapMs))))
        }),
      exit: (code, signal) => {
        result.code = code
        result.signal = signal
      },
    },
    start: async () => {
      result.spawned++
      const server = await startServer(o.command, o.env ?? process.env, conversation)
      stopServer = server.stop
      return server
    },
  })
  await conversation.launch().catch((err: unknown) => log((err as Error).message))
  const reader = mcpLineReader(
    (line) => conversation.fromClient(line),
    (line) => conversation.clientTooLong(line),
    conversation.maxLineBytes,
  )
  input.on('data', (chunk: Buffer) => reader.push(chunk))
  input.once('end', () => {
    reader.end()
    conversation.clientClosed()
  })
  // A client whose ends break is gone: what it still waited for is recorded as the client abort.
  const gone = () => {
    conversation.clientGone()
    conversation.clientClosed()
  }
  input.once('error', gone)
  output.once('error', gone)
  // A client that signals the wrapper (the SDK does after 2 s) has given up: the server is stopped, what it
  // had not answered is recorded as the client abort, and the trace still completes.
  const onSignal = () => {
    stopServer?.()
    gone()
  }
  process.once('SIGTERM', onSignal)
  process.once('SIGINT', onSignal)
  try {
    await conversation.done
  } finally {
    process.off('SIGTERM', onSignal)
    process.off('SIGINT', onSignal)
    output.off('error', gone)
  }
  input.pause()
  return result
}

/** Resolves once `output` can take more (or will never). */
function drained(output: Writable): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      output.off('drain', done)
      output.off('close', done)
      output.off('error', done)
      resolve()
    }
    output.on('drain', done)
    output.on('close', done)
    output.on('error', done)
  })
}

/** Spawns the server with piped stdio and wires its output into the conversation. */
function startServer(command: readonly string[], env: NodeJS.ProcessEnv, conversation: McpConversation): Promise<ServerEnd & { stop(): void }> {
  const [cmd, ...args] = command as [string, ...string[]]
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'], env })
    let timer: NodeJS.Timeout | undefined
    const reader = mcpLineReader(
      (line) => conversation.serverLine(line),
      (line) => conversation.serverTooLong(line),
      conversation.maxLineBytes,
    )
    child.stdout.on('data', (chunk: Buffer) => reader.push(chunk))
    child.stdout.once('end', () => reader.end())
    const decoder = new TextDecoder()
    child.stderr.on('data', (chunk: Buffer) => conversation.serverStderr(decoder.decode(chunk, { stream: true })))
    // Nothing written to a server that died is worth an uncaught EPIPE: its exit is what gets recorded.
    child.stdin.on('error', () => {})
    child.once('error', (err: NodeJS.ErrnoException) => {
      reject(
        new ToolReplayError(
          ErrorCodes.COMMAND_FAILED,
          `Failed to start MCP server "${maskedCommandLine(command)}": ${err.code ?? err.message}. Check it is installed and on PATH (the command goes after \`--\`).`,
          { cause: err },
        ),
      )
    })
    // 'close' comes after stdout ended, so every line the server wrote is in before its exit.
    child.once('close', (code, signal) => {
      clearTimeout(timer)
      conversation.serverExit(code, signal)
    })
    child.once('spawn', () =>
      resolve({
        write: (line) => {
          child.stdin.write(`${line}\n`)
        },
        closeInput: () => {
          child.stdin.end()
          timer = setTimeout(() => {
            child.kill('SIGTERM')
            timer = setTimeout(() => child.kill('SIGKILL'), SERVER_EXIT_GRACE_MS)
          }, SERVER_EXIT_GRACE_MS)
        },
        kill: () => {
          child.kill('SIGKILL')
        },
        pause: () => {
          child.stdout.pause()
        },
        resume: () => {
          child.stdout.resume()
        },
        stop: () => {
          child.kill('SIGTERM')
        },
      }),
    )
  })
}

/**
 * A server's name for its URLs when none is given: the npm package it runs (`@modelcontextprotocol/server-
 * filesystem` → `server-filesystem`), else the script's or the command's file name; lowercased, other
 * characters as '-'.
 */
export function serverNameFor(command: readonly string[]): string {
  // Arguments first: the program is often an interpreter (node, npx, uvx) that may itself live in node_modules.
  for (const a of [...command.slice(1), ...command.slice(0, 1)]) {
    const installed = /node_modules\/(?:@[^/]+\/)?([^/]+)/.exec(a.replaceAll('\\', '/'))
    const scoped = /^@[^/\s]+\/([^/@\s]+)/.exec(a)
    const name = installed?.[1] ?? scoped?.[1]
    if (name) return sanitizeServerName(name)
  }
  const script = command.slice(1).find((a) => /\.(?:[cm]?[jt]s|py)$/.test(a))
  const file = script ?? command[0] ?? 'server'
  return sanitizeServerName(basename(file, extname(file)))
}

/** A name made fit for a URL host (see SERVER_NAME). */
export function sanitizeServerName(raw: string): string {
  const name = raw
    .toLowerCase()
    .replace(/[^a-z0-9.-]+/g, '-')
    .replace(/^[-.]+|[-.]+$/g, '')
    .slice(0, 63)
    .replace(/[-.]+$/g, '')
  return SERVER_NAME.test(name) ? name : 'server'
}

/** Checks a server name given with --name (or `name`): TR_INVALID_OPTION when it cannot be a URL host. */
export function assertServerName(name: string): string {
  if (!SERVER_NAME.test(name)) {
    throw new ToolReplayError(
      ErrorCodes.INVALID_OPTION,
      `Invalid MCP server name "${name}": it becomes the host of mcp+stdio:// URLs, so use lowercase letters, digits, "-" and "." (1-63 characters), e.g. --name filesystem.`,
    )
  }
  return name
}
