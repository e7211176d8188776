/**
 * A session shared with the processes an app starts, so a capture path running in a child process (the
 * `tr-proxy mcp` wrapper an MCP client spawns) records into and replays from the same trace as the app's own
 * HTTP exchanges. The process that owns the session serves it on a Unix socket in a private per-user
 * directory, named by its pid; a child finds it by walking up its ancestors (MCP clients start stdio servers
 * with a scrubbed environment, the TypeScript SDK passes only HOME, LOGNAME, PATH, SHELL, TERM and USER, so
 * an environment variable alone would not reach it). `TOOL_REPLAY_SESSION_SOCKET` still wins when set.
 *
 * The protocol is newline-delimited JSON, one connection per child: `hello`; `handle` (the engine decides:
 * replay with the playback read whole, forward with a recorder id, or fail); recorder calls; the playback a
 * fault gives the client; `refuse` (a request the child could not hand over, for the ledger). Bodies travel
 * base64. The owner takes the arrival ticket and calls `handle`, so the child's messages take their place
 * among the app's requests.
 */
import { execFileSync } from 'node:child_process'
import { readdirSync, readFileSync, rmSync } from 'node:fs'
import { createConnection, createServer, type Server, type Socket } from 'node:net'
import { join } from 'node:path'
import type { FaultDecision } from '../faults/index.ts'
import { privateDirProblem, privateTempDir } from '../store/index.ts'
import {
  type ErrorCode,
  ErrorCodes,
  type ErrorPhase,
  type Exchange,
  type HeaderPairs,
  LineReader,
  lineTooLong,
  MAX_SOCKET_LINE_BYTES,
  type RecordedError,
  type ResponseHead,
  ToolReplayError,
} from '../trace/index.ts'
import type { Ticket } from './arrival-order.ts'
import type { CapturedRequest, Decision, ExchangeRecorder, Playback, PlaybackChunk } from './decision.ts'
import type { Session } from './session.ts'
import type { Mode } from './session-options.ts'

/** Names a shared session's socket explicitly (wins over the ancestor lookup). */
export const SESSION_SOCKET_ENV = 'TOOL_REPLAY_SESSION_SOCKET'

/**
 * Set in the environment of a command that tr-proxy runs behind its proxy (`tr-proxy record|replay --
 * <command>`, a command case being verified): the proxy captures that command's requests.
 */
export const PROXY_RUN_ENV = 'TOOL_REPLAY_PROXY_RUN'

/** How far up the process tree a child looks for a shared session. */
const MAX_ANCESTORS = 32

/** The private per-user directory of shared-session sockets. */
export function sharedSessionDir(): string {
  return privateTempDir('sessions')
}

/** A session being served to child processes. */
export interface SharedSessionHost {
  readonly socketPath: string
  /** Stops sharing: waits up to `graceMs` (default 5 s) for connected children to finish, then cuts them off. */
  close(graceMs?: number): Promise<void>
}

/** How long closing waits for children still connected. */
const CHILD_GRACE_MS = 5000

let shares = 0

/**
 * Serves `session` to child processes until `close()`. The socket is `<dir>/<pid>-<n>.sock`.
 * @example
 * const host = await shareSession(session) // children's `tr-proxy mcp` joins it
 * ...; await host.close()
 */
export async function shareSession(session: Session): Promise<SharedSessionHost> {
  const dir = sharedSessionDir()
  const problem = await privateDirProblem(dir)
  if (problem) {
    throw new ToolReplayError(
      ErrorCodes.STORE_IO,
      `Refusing to share a session through ${dir}: that directory is not private to this user (${problem}). Remove it.`,
    )
  }
  const socketPath = join(dir, `${process.pid}-${++shares}.sock`)
  rmSync(socketPath, { force: true })
  const sockets = new Set<Socket>()
  const server: Server = createServer((socket) => {
    sockets.add(socket)
    socket.once('close', () => sockets.delete(socket))
    serveConnection(session, socket)
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(socketPath, () => resolve())
  })
  server.unref()
  return {
    socketPath,
    close: async (graceMs = CHILD_GRACE_MS) => {
      rmSync(socketPath, { force: true })
      const closed = new Promise<void>((r) => server.close(() => r()))
      // A child still recording (an MCP server wrapper whose client is shutting down) gets a bounded time to
      // hand its last lines over before the session closes.
      if (sockets.size > 0) {
        let timer: NodeJS.Timeout | undefined
        const ended = Promise.all([...sockets].map((s) => new Promise<void>((r) => s.once('close', () => r()))))
        await Promise.race([ended, new Promise<void>((r) => (timer = setTimeout(r, graceMs)))])
        clearTimeout(timer)
      }
      for (const s of sockets) s.destroy()
      await closed
    },
  }
}

type Wire = Record<string, unknown>

const b64 = (bytes: Uint8Array) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64')
const unb64 = (text: string) => new Uint8Array(Buffer.from(text, 'base64'))

/** What TR_LINE_TOO_LONG says of this wire. */
const SESSION_WIRE = {
  name: "the shared session's socket",
  fix: 'That is the longest text Node parses as one JSON, so it cannot be raised: give the child its own session (`tr-proxy mcp --own-session`).',
}

/** Reads the peer's messages with the one NDJSON line reader; one past the line limit ends the connection with `onTooLong`. */
function lines(socket: Socket, onLine: (value: Wire) => void, onTooLong: (err: ToolReplayError) => void = () => {}): void {
  const reader = new LineReader((text) => onLine(JSON.parse(text) as Wire), {
    maxLineBytes: MAX_SOCKET_LINE_BYTES,
    onTooLong: (l) => {
      onTooLong(lineTooLong(SESSION_WIRE, l, MAX_SOCKET_LINE_BYTES))
      socket.destroy()
    },
  })
  socket.on('data', (chunk: Buffer) => reader.push(chunk))
  socket.on('error', () => {})
}

async function wirePlayback(p: Playback): Promise<Wire> {
  const chunks: Array<{ b64: string; atMs: number }> = []
  if (Array.isArray(p.chunks)) for (const c of p.chunks) chunks.push({ b64: b64(c.bytes), atMs: c.atMs })
  else for await (const c of p.chunks) chunks.push({ b64: b64(c.bytes), atMs: c.atMs })
  if (p.kind === 'response') return { kind: 'response', head: p.head, headersMs: p.headersMs, trailers: p.trailers, chunks }
  return { kind: 'error', error: p.error, headersMs: p.headersMs, ...(p.head ? { head: p.head } : {}), injected: p.injected === true, chunks }
}

function playbackOf(w: Wire): Playback {
  const chunks: PlaybackChunk[] = (w.chunks as Array<{ b64: string; atMs: number }>).map((c) => ({ bytes: unb64(c.b64), atMs: c.atMs }))
  if (w.kind === 'response') {
    return { kind: 'response', head: w.head as ResponseHead, headersMs: w.headersMs as number, trailers: w.trailers as HeaderPairs, chunks }
  }
  const p: Playback = { kind: 'error', error: w.error as RecordedError, headersMs: w.headersMs as number, chunks }
  if (w.head) p.head = w.head as ResponseHead
  if (w.injected) p.injected = true
  return p
}

/** The owner's side of one child's connection. */
function serveConnection(session: Session, socket: Socket): void {
  const recorders = new Map<number, ExchangeRecorder>()
  let next = 0
  const send = (value: Wire) => {
    if (!socket.destroyed) socket.write(`${JSON.stringify(value)}\n`)
  }
  socket.once('close', () => {
    // The child is gone: what it was recording ends as a failure, not as a hang until the session closes.
    for (const r of recorders.values()) void r.fail({ code: 'ECONNRESET', message: 'The capturing child process went away.' }).catch(() => {})
    recorders.clear()
  })
  lines(socket, (m) => {
    if (m.op === 'hello') send({ id: m.id, mode: session.mode, trace: session.trace, pid: process.pid })
    else if (m.op === 'handle') void handleOne(m)
    else if (m.op === 'rec') record(m)
    else if (m.op === 'refuse') {
      const r = m.request as { method: string; url: string }
      const e = m.error as { code: ErrorCode; message: string }
      session.refuse(r, new ToolReplayError(e.code, e.message))
    }
  })
  const handleOne = async (m: Wire) => {
    const r = m.request as { method: string; url: string; headers: HeaderPairs; body: string | null; httpVersion?: '2' }
    const captured: CapturedRequest = { method: r.method, url: r.url, headers: r.headers, body: r.body === null ? null : unb64(r.body) }
    if (r.httpVersion === '2') captured.httpVersion = '2'
    try {
      const ticket = session.arrival()
      const d: Decision = await ticket.turn(() => session.handle(captured))
      const fault = d.kind !== 'fail' && d.fault ? { fault: { kind: d.fault.kind, rule: d.fault.rule } } : {}
      if (d.kind === 'fail') send({ id: m.id, kind: 'fail', error: { code: d.error.code, message: d.error.message } })
      else if (d.kind === 'replay') send({ id: m.id, kind: 'replay', exchange: d.exchange, playback: await wirePlayback(d.playback), ...fault })
      else {
        const rid = ++next
        recorders.set(rid, d.recorder)
        send({ id: m.id, kind: 'forward', rid, client: d.client !== undefined, ...fault })
        if (d.client) void d.client.then(wirePlayback).then((playback) => send({ op: 'client', rid, playback }))
      }
    } catch (err) {
      send({ id: m.id, kind: 'fail', error: { code: ErrorCodes.INTERNAL, message: (err as Error)?.message ?? String(err) } })
    }
  }
  const record = (m: Wire) => {
    const r = recorders.get(m.rid as number)
    if (!r) return
    if (m.call === 'start') r.responseStart(m.head as ResponseHead)
    else if (m.call === 'data') void r.responseData(unb64(m.b64 as string))
    else {
      recorders.delete(m.rid as number)
      if (m.call === 'end') void r.responseEnd(m.trailers as HeaderPairs | undefined).catch(() => {})
      else void r.fail(m.error as { code?: string; message: string }, m.phase as ErrorPhase | undefined).catch(() => {})
    }
  }
}

/** A session served by another process, as a child uses it (a capture path takes it as it takes a `Session`). */
export interface RemoteSession {
  readonly mode: Mode
  readonly trace: string
  /** The pid of the process that owns the session. */
  readonly ownerPid: number
  /** A ticket whose turn comes at once: the owner takes the real one when the request reaches it in `handle`. */
  arrival(): Ticket
  /** Takes the request's place in the owner's arrival order and decides, as `Session.handle` does. */
  handle(captured: CapturedRequest): Promise<Decision>
  /** Counts a request the child could not hand over in the owner's ledger, as `Session.refuse` does. */
  refuse(captured: Pick<CapturedRequest, 'method' | 'url'>, error: ToolReplayError): void
  close(): void
}

/** The child's side of the arrival order: its place is taken by the owner. */
const OWNER_ORDERS: Ticket = { turn: (fn) => fn(), progress() {}, release() {} }

/** Connects to a shared session's socket; rejects when nothing answers there. */
export function connectSharedSession(socketPath: string, timeoutMs = 2000): Promise<RemoteSession> {
  return new Promise((resolve, reject) => {
    const socket = createConnection(socketPath)
    const waiting = new Map<number, (w: Wire) => void>()
    const clients = new Map<number, (p: Playback) => void>()
    let id = 0
    const send = (value: Wire) => socket.write(`${JSON.stringify(value)}\n`)
    const ask = (value: Wire) => new Promise<Wire>((r) => waiting.set(++id, r) && send({ ...value, id }))
    const timer = setTimeout(() => {
      socket.destroy()
      reject(new ToolReplayError(ErrorCodes.STORE_IO, `No shared session answered on ${socketPath} within ${timeoutMs} ms.`))
    }, timeoutMs)
    socket.once('error', (err) => {
      clearTimeout(timer)
      reject(err)
    })
    let lost = { code: ErrorCodes.STORE_CLOSED as ErrorCode, message: 'The process that owns the session went away.' }
    socket.once('close', () => {
      for (const w of waiting.values()) w({ kind: 'fail', error: lost })
      waiting.clear()
    })
    lines(
      socket,
      (m) => {
        if (m.op === 'client') clients.get(m.rid as number)?.(playbackOf(m.playback as Wire))
        else {
          waiting.get(m.id as number)?.(m)
          waiting.delete(m.id as number)
        }
      },
      (err) => {
        lost = { code: err.code, message: err.message }
      },
    )
    const recorderFor = (rid: number): ExchangeRecorder => ({
      recording: true,
      responseStart: (head) => send({ op: 'rec', rid, call: 'start', head }),
      responseData: (chunk) => {
        send({ op: 'rec', rid, call: 'data', b64: b64(chunk) })
        return undefined
      },
      responseEnd: async (trailers) => {
        send({ op: 'rec', rid, call: 'end', ...(trailers ? { trailers } : {}) })
      },
      fail: async (error, phase) => {
        send({ op: 'rec', rid, call: 'fail', error, ...(phase ? { phase } : {}) })
      },
    })
    socket.once('connect', async () => {
      const hello = await ask({ op: 'hello' })
      clearTimeout(timer)
      resolve({
        mode: hello.mode as Mode,
        trace: hello.trace as string,
        ownerPid: hello.pid as number,
        close: () => socket.end(),
        arrival: () => OWNER_ORDERS,
        refuse: (captured, error) =>
          send({ op: 'refuse', request: { method: captured.method, url: captured.url }, error: { code: error.code, message: error.message } }),
        handle: async (captured) => {
          const body = captured.body === null ? null : b64(captured.body)
          const version = captured.httpVersion ? { httpVersion: captured.httpVersion } : {}
          const w = await ask({ op: 'handle', request: { method: captured.method, url: captured.url, headers: captured.headers, body, ...version } })
          // Only the fault's kind and rule cross: a child carries a decision out, the owner keeps its record.
          const withFault = w.fault ? { fault: w.fault as FaultDecision } : {}
          if (w.kind === 'fail') {
            const e = w.error as { code: string; message: string }
            return { kind: 'fail', error: new ToolReplayError(e.code as ErrorCode, e.message) }
          }
          if (w.kind === 'replay') return { kind: 'replay', exchange: w.exchange as Exchange, playback: playbackOf(w.playback as Wire), ...withFault }
          const rid = w.rid as number
          const client = w.client ? new Promise<Playback>((r) => clients.set(rid, r)) : undefined
          return { kind: 'forward', recorder: recorderFor(rid), ...(client ? { client } : {}), ...withFault }
        },
      })
    })
  })
}

/** The parent of a process, or undefined when it cannot be read (Linux: /proc; macOS and others: ps). */
function parentOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
    return Number.isSafeInteger(ppid) && ppid > 0 ? ppid : undefined
  } catch {
    if (process.platform === 'win32' || process.platform === 'linux') return undefined
    try {
      const ppid = Number(execFileSync('ps', ['-o', 'ppid=', '-p', String(pid)], { encoding: 'utf8', timeout: 2000 }).trim())
      return Number.isSafeInteger(ppid) && ppid > 0 ? ppid : undefined
    } catch {
      return undefined
    }
  }
}

/**
 * The shared session of the nearest ancestor that serves one (or the socket TOOL_REPLAY_SESSION_SOCKET
 * names), connected; undefined when there is none.
 */
export async function findSharedSession(env: NodeJS.ProcessEnv = process.env): Promise<RemoteSession | undefined> {
  const named = env[SESSION_SOCKET_ENV]
  if (named) {
    try {
      return await connectSharedSession(named)
    } catch (err) {
      throw new ToolReplayError(
        ErrorCodes.INVALID_OPTION,
        `${SESSION_SOCKET_ENV}=${named} names a shared session, but none answers there (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}): the run that set it has ended. Unset it, or run this inside that run.`,
        { cause: err },
      )
    }
  }
  const dir = sharedSessionDir()
  let names: string[]
  try {
    names = readdirSync(dir)
  } catch {
    return undefined
  }
  let pid: number | undefined = process.ppid
  for (let i = 0; i < MAX_ANCESTORS && pid !== undefined && pid > 1; i++) {
    const prefix = `${pid}-`
    const mine = names
      .filter((n) => n.startsWith(prefix) && n.endsWith('.sock'))
      .sort((a, b) => Number(b.slice(prefix.length, -5)) - Number(a.slice(prefix.length, -5)))
    for (const n of mine) {
      try {
        return await connectSharedSession(join(dir, n))
      } catch {
        // A socket left by a process that died (its pid reused): keep looking.
      }
    }
    pid = parentOf(pid)
  }
  return undefined
}
