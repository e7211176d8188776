/**
 * Re-sends recorded MCP stdio messages to a re-spawned server, for `tr-proxy drift`: the server is started from
 * the command the plan gives (engine/mcp-drift-plan.ts) and spoken to through the MCP capture path itself
 * (`runMcpStdio` with a record-mode session on an in-memory store), so the live answers are exchanges of the same
 * form as the recorded ones, redacted as `record` redacts, and nothing reaches disk. One message at a time, in
 * the recorded order, with fresh ids: a request waits for its answer (at most `timeoutMs`); a server request on
 * the way is answered as the recording answered it (else "method not found").
 * @note The server runs with drift's environment, not the one the recorded client gave it (which was not
 * recorded); what it needs (keys, paths) must be set for drift.
 */
import { PassThrough, Writable } from 'node:stream'
import { openSession, type RedactionOptions } from '../engine/index.ts'
import { createMemoryStore } from '../store/index.ts'
import { ErrorCodes, type Exchange, isJsonRpcResponse, ToolReplayError, type Trace } from '../trace/index.ts'
import { idKey } from './client-target.ts'
import { mcpLineReader } from './framing.ts'
import { runMcpStdio } from './stdio-wrapper.ts'

/** How long a re-sent request waits for its answer (ms). */
export const MCP_RESEND_TIMEOUT_MS = 30_000

/** Options of `resendMcpStdio`. */
export interface McpResendOptions {
  /** The in-memory trace the live messages are recorded as. */
  trace: string
  /** The server's name (the host of its mcp+stdio:// URLs) and the command it is started with. */
  server: string
  command: readonly string[]
  /** The client's messages, in order (a request has an id, replaced here by a fresh one). */
  messages: ReadonlyArray<Record<string, unknown>>
  /** The recorded answers to server requests, by method (`{"result": ...}` or `{"error": ...}`). */
  replies?: ReadonlyMap<string, unknown>
  redaction?: RedactionOptions
  timeoutMs?: number
}

/** The live trace, and per message its live exchange or why there is none. */
export interface McpResendResult {
  trace: Trace
  answers: Array<{ exchange: Exchange } | { error: ToolReplayError }>
  /** What the server wrote on stderr (and Tool Replay's lines about it). */
  stderr: string
}

/** Re-spawns the server and re-sends `messages` one at a time; see the file header. */
export async function resendMcpStdio(o: McpResendOptions): Promise<McpResendResult> {
  const store = createMemoryStore()
  const session = await openSession({ mode: 'record', trace: o.trace, store, ...(o.redaction ? { redaction: o.redaction } : {}) })
  const input = new PassThrough()
  const output = new PassThrough()
  let stderr = ''
  const errors = new Writable({
    write(chunk: Buffer, _enc, done) {
      stderr += chunk.toString('utf8')
      done()
    },
  })
  const waiting = new Map<string, () => void>()
  const write = (m: Record<string, unknown>) => input.write(`${JSON.stringify(m)}\n`)
  // Every line this side wrote, in order: the conversation records one exchange per line, after the launch.
  const written: Array<number | undefined> = []
  const reader = mcpLineReader(
    (line) => {
      const m = parseObject(line)
      if (!m) return
      if (isJsonRpcResponse(m)) waiting.get(idKey(m.id))?.()
      else if (typeof m.method === 'string' && m.id !== undefined) {
        written.push(undefined)
        write(replyTo(m, o.replies))
      }
    },
    () => {},
  )
  output.on('data', (chunk: Buffer) => reader.push(chunk))
  let ended = false
  const running = runMcpStdio({ session, server: o.server, command: o.command, input, output, errors }).finally(() => {
    ended = true
    for (const done of waiting.values()) done()
  })
  const failures = new Map<number, ToolReplayError>()
  const timeoutMs = o.timeoutMs ?? MCP_RESEND_TIMEOUT_MS
  for (const [i, message] of o.messages.entries()) {
    if (ended) {
      failures.set(i, new ToolReplayError(ErrorCodes.UPSTREAM_FAILED, `The MCP server "${o.server}" exited before this message could be sent.`))
      continue
    }
    const request = message.id !== undefined
    const sent = request ? { ...message, id: i + 1 } : message
    written.push(i)
    write(sent)
    if (request && !(await answered(waiting, idKey(i + 1), timeoutMs))) {
      failures.set(
        i,
        new ToolReplayError(ErrorCodes.UPSTREAM_FAILED, `The MCP server "${o.server}" did not answer ${String(message.method)} within ${timeoutMs} ms.`),
      )
    }
  }
  input.end()
  await running
  await session.close()
  const trace = await store.readTrace(o.trace)
  await store.close()
  const started = !/Failed to start MCP server/.test(stderr)
  const bySeq = new Map(trace.exchanges.map((x) => [x.seq, x]))
  const answers = o.messages.map((_, i) => {
    const failure = failures.get(i)
    if (!started) return { error: new ToolReplayError(ErrorCodes.COMMAND_FAILED, stderr.trim().split('\n').at(-1) ?? 'The MCP server did not start.') }
    // Seq 0 is the launch; each written line is the next.
    const exchange = bySeq.get(written.indexOf(i) + 1)
    if (failure || !exchange) return { error: failure ?? new ToolReplayError(ErrorCodes.INTERNAL, `The live answer to MCP message #${i} was not recorded.`) }
    return { exchange }
  })
  return { trace, answers, stderr }
}

/** Waits for the answer to `key`; false after `ms` (or once the server ended without answering). */
function answered(waiting: Map<string, () => void>, key: string, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    let came = false
    const timer = setTimeout(() => {
      waiting.delete(key)
      resolve(false)
    }, ms)
    waiting.set(key, () => {
      came = true
      clearTimeout(timer)
      waiting.delete(key)
      resolve(came)
    })
  })
}

/** The answer to a server request: as the recording answered its method, else JSON-RPC "method not found". */
function replyTo(m: Record<string, unknown>, replies: ReadonlyMap<string, unknown> | undefined): Record<string, unknown> {
  const recorded = replies?.get(m.method as string) as Record<string, unknown> | undefined
  if (recorded && ('result' in recorded || 'error' in recorded)) return { jsonrpc: '2.0', id: m.id, ...recorded }
  return { jsonrpc: '2.0', id: m.id, error: { code: -32601, message: `Method not found: drift has no recorded answer to ${String(m.method)}` } }
}

function parseObject(line: string): Record<string, unknown> | undefined {
  try {
    const v = JSON.parse(line) as unknown
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined
  } catch {
    return undefined
  }
}
