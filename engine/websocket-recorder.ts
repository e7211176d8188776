/**
 * Recording one WebSocket session as one exchange: the upgrade request, the 101, then each frame as a capture
 * path read it, assembled into messages (a fragmented message keeps one chunk per frame), written when the
 * session ends. Payloads are held in memory up to `maxBytes` in all; past that the recording stops and says so
 * in `websocket.end` (the relay goes on). A JSON text message goes through body redaction like a JSON body.
 */
import { performance } from 'node:perf_hooks'
import {
  bodyFromBytes,
  bodyFromChunks,
  type Exchange,
  type ResponseHead,
  readClosePayload,
  type WebSocketEnd,
  type WebSocketFaultPlan,
  type WebSocketMessage,
  type WebSocketOpcode,
} from '../trace/index.ts'
import type { CapturedRequest, ExchangeRecorder } from './decision.ts'
import type { Redactor } from './redaction.ts'

/** What a capture path reports of one WebSocket session it relays. */
export interface WebSocketRecorder {
  /** False for passthrough: nothing is written, calls are cheap no-ops. */
  readonly recording: boolean
  /**
   * A fault rule's fault for this session, which the path carries out on the server's frames as it relays them
   * (capture/websocket-fault-relay.ts); the frames reported here stay the upstream's, and the engine derives what the app got.
   */
  fault?: WebSocketFaultPlan
  /** The upstream did not switch protocols (it answered 401, say) or could not be reached: record that as an HTTP exchange. */
  http(): ExchangeRecorder
  /** The upstream answered 101. */
  opened(head: ResponseHead): void
  /** One frame (payload unmasked); `opcode` the name for a message's first frame, 'continuation' for the others. */
  frame(from: 'client' | 'server', opcode: WebSocketOpcode | 'continuation', fin: boolean, payload: Uint8Array): void
  /** The connection ended; `error` when it ended without a close handshake. Writes the exchange once. */
  end(error?: { code: string; message: string }): Promise<void>
}

/** What a session's owner hears from its recorder (a fault rule's, engine/fault-host/session-faults.ts). */
export interface WebSocketRecorderHooks {
  /** Rewrites the session's exchange before it is written (a switched session only). */
  finalize?(exchange: Exchange, bodies: Map<string, Uint8Array>): Exchange
  /** The upstream did not switch protocols (it refused, or never answered): the exchange is an HTTP one. Once at most. */
  unswitched?(): void
}

/** A recorder that stores nothing (passthrough). */
export function passthroughWebSocketRecorder(http: ExchangeRecorder): WebSocketRecorder {
  return { recording: false, http: () => http, opened() {}, frame() {}, end: async () => {} }
}

/** What a WebSocket recorder needs from its session. */
export interface WebSocketRecorderContext {
  redactor: Redactor
  /** Most payload bytes a session keeps in memory before its recording stops. */
  maxBytes: number
  /** Writes the exchange (the session tracks it). */
  write(exchange: Exchange, bodies: ReadonlyMap<string, Uint8Array>): Promise<void>
  /** The HTTP recorder for an upgrade the upstream did not switch (made once, on demand). */
  http(): ExchangeRecorder
  now?: () => number
}

const JSON_TEXT: Array<[string, string]> = [['content-type', 'application/json']]

/** A text message's payload through body redaction (as a JSON body); the same array when nothing changed. */
export function redactTextMessage(redactor: Redactor, bytes: Uint8Array): Uint8Array {
  return redactor.hasBodyPaths ? redactor.body(bytes, JSON_TEXT) : bytes
}

type Frames = Array<{ bytes: Uint8Array; atMs: number }>

/**
 * Assembles frames into messages, each side's own (control frames may come between a message's fragments), with
 * their payloads in `bodies`; a JSON text message goes through body redaction.
 */
function messageAssembler(redactor: Redactor) {
  const messages: WebSocketMessage[] = []
  const bodies = new Map<string, Uint8Array>()
  /** The message each side is sending, frame by frame. */
  const open: Record<'client' | 'server', { opcode: WebSocketOpcode; frames: Frames } | undefined> = { client: undefined, server: undefined }

  const finish = (from: 'client' | 'server', opcode: WebSocketOpcode, frames: Frames) => {
    let built = bodyFromChunks(frames)
    if (opcode === 'text') {
      const redacted = redactTextMessage(redactor, built.bytes)
      if (redacted !== built.bytes) built = bodyFromChunks([{ bytes: redacted, atMs: (frames[frames.length - 1] as { atMs: number }).atMs }])
    }
    bodies.set(built.ref.digest, built.bytes)
    const message: WebSocketMessage = { from, opcode, atMs: (frames[frames.length - 1] as { atMs: number }).atMs, body: built.ref }
    if (opcode === 'close') {
      const close = readClosePayload(built.bytes)
      if (close) message.close = close
    }
    messages.push(message)
  }

  const frame = (from: 'client' | 'server', opcode: WebSocketOpcode | 'continuation', fin: boolean, bytes: Uint8Array, atMs: number): void => {
    if (opcode !== 'continuation' && opcode !== 'text' && opcode !== 'binary') {
      finish(from, opcode, [{ bytes, atMs }])
      return
    }
    const current = open[from]
    if (opcode === 'continuation') {
      // A continuation without a message to continue: the stream is broken; what came before is kept.
      if (!current) return
      current.frames.push({ bytes, atMs })
    } else open[from] = { opcode, frames: [{ bytes, atMs }] }
    if (!fin) return
    const done = open[from] as { opcode: WebSocketOpcode; frames: Frames }
    open[from] = undefined
    finish(from, done.opcode, done.frames)
  }
  return { messages, bodies, frame }
}

/** Starts recording the session for `request` (already redacted), numbered `seq`. */
export function createWebSocketRecorder(ctx: WebSocketRecorderContext, request: CapturedRequest, seq: number, startMs: number): WebSocketRecorder {
  const now = ctx.now ?? (() => performance.now())
  const t0 = now()
  let head: ResponseHead | undefined
  let headersMs = 0
  let kept = 0
  let stopped: WebSocketEnd | undefined
  const { messages, bodies, frame } = messageAssembler(ctx.redactor)
  let http: ExchangeRecorder | undefined
  let written: Promise<void> | undefined

  return {
    recording: true,
    http: () => {
      http ??= ctx.http()
      return http
    },
    opened(h) {
      head = h
      headersMs = now() - t0
    },
    frame(from, opcode, fin, payload) {
      if (stopped || written || !head) return
      const atMs = Math.max(0, now() - t0)
      kept += payload.byteLength
      if (kept > ctx.maxBytes) {
        stopped = {
          code: 'TR_SESSION_TOO_LARGE',
          message: `The session's messages passed ${ctx.maxBytes} bytes; the recording stopped there (raise --max-body-bytes to keep more).`,
          atMs,
        }
        return
      }
      frame(from, opcode, fin, new Uint8Array(payload), atMs)
    },
    end(error) {
      if (written) return written
      if (!head) {
        // Never switched: whatever the HTTP recorder has (or a connect failure) is the exchange.
        written = (http ?? ctx.http()).fail({ code: error?.code ?? 'ECONNRESET', message: error?.message ?? 'The upgrade ended before a response.' })
        return written
      }
      const empty = bodyFromBytes(new Uint8Array())
      bodies.set(empty.ref.digest, empty.bytes)
      const end = stopped ?? (error ? { ...error, atMs: Math.max(0, Math.round(now() - t0)) } : undefined)
      const exchange: Exchange = {
        seq,
        request: { method: request.method, url: request.url, headers: request.headers, body: null },
        outcome: {
          kind: 'response',
          response: { status: head.status, statusText: head.statusText, headers: ctx.redactor.headers(head.headers), trailers: [], body: empty.ref },
        },
        timing: { startMs: Math.round(startMs), headersMs: Math.round(headersMs) },
        websocket: { messages, ...(end ? { end } : {}) },
      }
      written = ctx.write(exchange, bodies)
      return written
    },
  }
}
