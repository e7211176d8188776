/**
 * A small RPC that carries the store operations (StoreOps, not raw LevelDB) over a Unix domain socket,
 * from the process that owns a store directory to the others.
 *
 * Why purpose-built: many-level (the Level project's multi-process RPC) targets abstract-level 1,
 * while level 10 is abstract-level 3; and a key-value RPC would make every client re-implement the
 * read-then-batch logic of `close()`/`putTrace()`, racing other clients. At the TraceStore level the
 * owner runs every write through one queue, and the protocol stays a handful of operations.
 *
 * @note Frames are newline-delimited JSON, one object per line; bytes travel as base64 ({"$b64": ...}) and
 * maps as entry lists ({"$map": [...]}). A frame carries at most one piece of a big body (1 MiB), so memory
 * stays bounded whatever the body's size; frames are split by the one line reader (trace/line-reader.ts).
 *   request  {"id":1,"op":"append","args":[...]}
 *   response {"id":1,"ok":true,"result":...} | {"id":1,"ok":false,"error":{"code","message","details"}}
 *            | {"id":1,"ok":false,"retry":true} when the owner is shutting down (the client fails over).
 * Every operation is idempotent under retry (caller-chosen ids, seq-keyed exchanges, content-addressed
 * bodies), which is what lets a client resend a request whose answer was lost with the owner.
 */
import { chmod, unlink } from 'node:fs/promises'
import { createConnection, createServer, type Server, type Socket } from 'node:net'
import { ErrorCodes, LineReader, lineTooLong, MAX_SOCKET_LINE_BYTES, ToolReplayError } from '../trace/index.ts'
import type { LevelBackend } from './level-backend.ts'
import { fromWireError, toWireError, type WireError } from './store-errors.ts'
import type { StoreOps } from './store-ops.ts'

/** Bumped on any incompatible change, so two Tool Replay versions sharing a store fail clearly. */
export const PROTOCOL_VERSION = 4

/** Thrown by a connection whose owner went away before answering; the caller re-acquires and retries. */
export class ConnectionLost extends Error {}

/** Serves `backend` on `socketPath` until `close()`. The caller holds the LevelDB lock, so any file there is stale. */
export async function serveBackend(backend: LevelBackend, socketPath: string): Promise<StoreServer> {
  await unlink(socketPath).catch(() => {})
  const server = createServer()
  const s = new StoreServer(server, backend, socketPath)
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(socketPath, () => {
      server.off('error', reject)
      resolve()
    })
  })
  // Only this user may talk to the owner: traces can hold data that redaction did not catch.
  if (process.platform !== 'win32') await chmod(socketPath, 0o600)
  // The owner's own work decides when its process exits; if it exits while serving, clients fail over.
  server.unref()
  return s
}

/** The owner's side: answers requests, and on close hands clients over by dropping them. */
export class StoreServer {
  readonly #server: Server
  readonly #backend: LevelBackend
  readonly #socketPath: string
  readonly #sockets = new Set<Socket>()
  readonly #inflight = new Set<Promise<void>>()
  #closing = false

  constructor(server: Server, backend: LevelBackend, socketPath: string) {
    this.#server = server
    this.#backend = backend
    this.#socketPath = socketPath
    server.on('connection', (socket) => this.#accept(socket))
  }

  /** Number of connected client processes. */
  get clients(): number {
    return this.#sockets.size
  }

  /**
   * Stops serving: refuses new requests (clients retry elsewhere), waits for those in flight, drops the
   * connections and removes the socket file. The caller closes the LevelDB after, so the next owner
   * can only appear once this one is fully out of the way.
   */
  async close(): Promise<void> {
    this.#closing = true
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()))
    while (this.#inflight.size > 0) await Promise.allSettled([...this.#inflight])
    for (const socket of this.#sockets) socket.destroy()
    await closed
    await unlink(this.#socketPath).catch(() => {})
  }

  #accept(socket: Socket): void {
    this.#sockets.add(socket)
    socket.unref()
    socket.on('close', () => this.#sockets.delete(socket))
    socket.on('error', () => {})
    readFrames(socket, (frame) => {
      const p = this.#handle(socket, frame).finally(() => this.#inflight.delete(p))
      this.#inflight.add(p)
    })
  }

  async #handle(socket: Socket, frame: unknown): Promise<void> {
    const { id, op, args } = frame as { id: number; op: string; args: unknown[] }
    let reply: unknown
    if (this.#closing) {
      reply = { id, ok: false, retry: true }
    } else {
      try {
        reply = { id, ok: true, result: await dispatch(this.#backend, op, args) }
      } catch (err) {
        reply = { id, ok: false, error: toWireError(err, 'The store owner failed') }
      }
    }
    if (!socket.destroyed) socket.write(`${encodeFrame(reply)}\n`)
  }
}

/** The StoreOps methods a client may call. */
const OPS: ReadonlySet<string> = new Set<keyof StoreOps>([
  'listTraces',
  'completeId',
  'recordingIds',
  'traceInfo',
  'exchanges',
  'lookup',
  'identityKeys',
  'body',
  'piece',
  'putPiece',
  'beginTrace',
  'append',
  'closeRecording',
  'appendChunk',
  'putTrace',
  'deleteTrace',
  'deleteRecording',
  'gc',
])

async function dispatch(b: LevelBackend, op: string, args: unknown[]): Promise<unknown> {
  // The peer is a Tool Replay process of the same protocol version (checked by hello).
  if (op === 'hello') {
    if (args[0] !== PROTOCOL_VERSION) {
      throw new ToolReplayError(
        ErrorCodes.STORE_LOCKED,
        `The trace store at ${b.location} is held by a Tool Replay process speaking store protocol ${PROTOCOL_VERSION}, but this one speaks ${String(args[0])}. Use one Tool Replay version for processes sharing a store.`,
      )
    }
    return b.location
  }
  if (!OPS.has(op))
    throw new ToolReplayError(ErrorCodes.INTERNAL, `Unknown store operation "${op}". Use one Tool Replay version for processes sharing a store.`)
  const method = (b as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>)[op] as (...a: unknown[]) => Promise<unknown>
  return method.apply(b, args)
}

/** StoreOps carried over a connection to the owner. */
export function remoteOps(conn: StoreConnection, location: string): StoreOps {
  const call =
    <T>(op: keyof StoreOps) =>
    (...args: unknown[]) =>
      conn.call(op, args) as Promise<T>
  return {
    location,
    listTraces: call('listTraces'),
    completeId: call('completeId'),
    recordingIds: call('recordingIds'),
    traceInfo: call('traceInfo'),
    exchanges: call('exchanges'),
    lookup: call('lookup'),
    identityKeys: call('identityKeys'),
    body: call('body'),
    piece: call('piece'),
    putPiece: call('putPiece'),
    beginTrace: call('beginTrace'),
    append: call('append'),
    closeRecording: call('closeRecording'),
    appendChunk: call('appendChunk'),
    putTrace: call('putTrace'),
    deleteTrace: call('deleteTrace'),
    deleteRecording: call('deleteRecording'),
    gc: call('gc'),
  }
}

/** A client process's connection to the owner. */
export class StoreConnection {
  readonly #socket: Socket
  readonly #pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>()
  #next = 1
  #lost = false

  private constructor(socket: Socket) {
    this.#socket = socket
    socket.on('error', () => {})
    socket.on('close', () => this.#fail())
    readFrames(
      socket,
      (frame) => this.#answer(frame as WireReply),
      (err) => this.#fail(err),
    )
  }

  /** Connects and checks the protocol version. Rejects with the socket error (ENOENT, ECONNREFUSED) when nobody listens. */
  static async connect(socketPath: string): Promise<StoreConnection> {
    const socket = await new Promise<Socket>((resolve, reject) => {
      const s = createConnection(socketPath)
      s.once('error', reject)
      s.once('connect', () => {
        s.off('error', reject)
        resolve(s)
      })
    })
    const conn = new StoreConnection(socket)
    try {
      await conn.call('hello', [PROTOCOL_VERSION])
    } catch (err) {
      conn.close()
      throw err
    }
    return conn
  }

  get lost(): boolean {
    return this.#lost
  }

  /** Sends one request. Rejects with ConnectionLost when the answer cannot come from this owner. */
  call(op: string, args: unknown[]): Promise<unknown> {
    if (this.#lost) return Promise.reject(new ConnectionLost('connection to the store owner is closed'))
    const id = this.#next++
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject })
      // Keep the process alive only while waiting for an answer, so an idle open store never blocks exit.
      this.#socket.ref()
      this.#socket.write(`${encodeFrame({ id, op, args })}\n`)
    })
  }

  close(): void {
    this.#lost = true
    this.#socket.end()
  }

  #answer(reply: WireReply): void {
    const p = this.#pending.get(reply.id)
    if (!p) return
    this.#pending.delete(reply.id)
    if (this.#pending.size === 0) this.#socket.unref()
    if (reply.ok) p.resolve(reply.result)
    else if (reply.retry) p.reject(new ConnectionLost('the store owner is shutting down'))
    else p.reject(fromWireError(reply.error))
  }

  /** The connection is over: what waits fails with `err` (a frame past the limit), else as lost (the caller retries). */
  #fail(err?: Error): void {
    this.#lost = true
    for (const p of this.#pending.values()) p.reject(err ?? new ConnectionLost('the store owner went away'))
    this.#pending.clear()
  }
}

type WireReply = { id: number; ok: true; result: unknown } | { id: number; ok: false; retry?: boolean; error: WireError }

/** What TR_LINE_TOO_LONG says of this wire. */
const STORE_WIRE = {
  name: "the store's socket",
  fix: 'That is the longest text Node parses as one JSON, so it cannot be raised: open the store in one process, or split the trace.',
}

/** Reads frames with the one NDJSON line reader; a peer past the line limit or not speaking this protocol is cut off. */
function readFrames(socket: Socket, onFrame: (frame: unknown) => void, onTooLong: (err: ToolReplayError) => void = () => {}): void {
  const reader = new LineReader(
    (line) => {
      if (socket.destroyed) return
      let frame: unknown
      try {
        frame = decodeFrame(line)
      } catch {
        // A peer that is not speaking this protocol; nothing it says can be trusted.
        socket.destroy()
        return
      }
      onFrame(frame)
    },
    {
      maxLineBytes: MAX_SOCKET_LINE_BYTES,
      onTooLong: (l) => {
        onTooLong(lineTooLong(STORE_WIRE, l, MAX_SOCKET_LINE_BYTES))
        socket.destroy()
      },
    },
  )
  socket.on('data', (chunk: Buffer) => reader.push(chunk))
}

/** A frame as JSON text: bytes as base64, maps as entry lists (exchanges hold neither, so nothing collides). */
export function encodeFrame(value: unknown): string {
  return JSON.stringify(value, function (this: Record<string, unknown>, key, v) {
    // The holder's own value: Buffers are already turned into {type, data} by toJSON when `v` arrives.
    const original = this[key]
    if (original instanceof Uint8Array) return { $b64: Buffer.from(original.buffer, original.byteOffset, original.byteLength).toString('base64') }
    if (original instanceof Map) return { $map: [...original] }
    return v
  })
}

/** Inverse of encodeFrame. */
export function decodeFrame(text: string): unknown {
  return JSON.parse(text, (_key, v) => {
    if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
      if (typeof v.$b64 === 'string' && Object.keys(v).length === 1) return new Uint8Array(Buffer.from(v.$b64, 'base64'))
      if (Array.isArray(v.$map) && Object.keys(v).length === 1) return new Map(v.$map)
    }
    return v
  })
}
