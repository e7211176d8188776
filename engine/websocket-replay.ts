/**
 * Replaying one recorded WebSocket session: which server messages go out, and when, in answer to what the
 * client sends. The recording is read as a conversation: the server messages before the first client message
 * are sent unprompted (at their offsets from the 101); those that followed a client message are its answer,
 * sent when a client message with the same content arrives (trace/websocket.ts `websocketMatchKey`: volatile
 * JSON keys such as `event_id` left out), at their offsets from it. A client message nothing recorded matches is
 * a miss. Pings and pongs are not matched: the capture path answers a ping itself, so recorded server pongs are
 * not played.
 */
import {
  ErrorCodes,
  type Exchange,
  type ResponseHead,
  ToolReplayError,
  tryUtf8,
  type WebSocketEnd,
  type WebSocketMessage,
  type WebSocketOpcode,
  websocketMatchKey,
} from '../trace/index.ts'
import { RUN_ENDED_CODE } from './exchange-recorder.ts'
import type { LedgerEntry } from './ledger.ts'

/** A recorded message ready to send: its frames' payloads (one per recorded frame). */
export interface PlayedMessage {
  from: 'client' | 'server'
  opcode: WebSocketOpcode
  atMs: number
  frames: Uint8Array[]
  close?: { code: number; reason: string }
}

/** A recorded session ready for a capture path to play: the 101's head and every message. */
export interface WebSocketPlayback {
  head: ResponseHead
  headersMs: number
  messages: PlayedMessage[]
  end?: WebSocketEnd
  /** Told of every conversation played from this session (WebSocketUsage: client messages never sent are unused). */
  opened?: (conversation: WebSocketConversation) => void
}

/** A server message to send, `afterMs` after what prompted it (the 101, or the client message it answers). */
export interface Scheduled {
  message: PlayedMessage
  afterMs: number
}

/** What a client message gets: the server messages that answered it in the recording, or a miss. */
export type ClientTurn = { kind: 'answer'; messages: Scheduled[] } | { kind: 'miss'; error: ToolReplayError }

/** Splits a stored message body back into its frames (chunks), for playing. */
export function playedMessage(m: WebSocketMessage, bytes: Uint8Array): PlayedMessage {
  const frames: Uint8Array[] = []
  let at = 0
  for (const c of m.body.chunks) {
    frames.push(bytes.subarray(at, at + c.size))
    at += c.size
  }
  if (frames.length === 0) frames.push(bytes)
  return { from: m.from, opcode: m.opcode, atMs: m.atMs, frames, ...(m.close ? { close: m.close } : {}) }
}

/** One replayed session's conversation state (one per connection). */
export class WebSocketConversation {
  readonly #playback: WebSocketPlayback
  readonly #label: string
  readonly #trace: string
  /** Recorded client messages that can be matched, with their key and the server messages answering them. */
  readonly #turns: Array<{ message: PlayedMessage; position: number; key: string; answer: Scheduled[]; used: boolean }> = []
  readonly #opening: Scheduled[] = []
  #received = 0
  #answered = 0
  /** The server's close that answered the client's, when the recording has one. */
  #closeAnswer: Uint8Array | undefined

  constructor(playback: WebSocketPlayback, label: string, trace: string) {
    this.#playback = playback
    this.#label = label
    this.#trace = trace
    let anchor: { atMs: number; into: Scheduled[] } = { atMs: playback.headersMs, into: this.#opening }
    let clientClosed = false
    let position = 0
    for (const m of playback.messages) {
      if (m.opcode === 'close' && m.from === 'client') clientClosed = true
      else if (m.opcode === 'close' && clientClosed) {
        // The answer to the client's close: sent when the client closes, whatever else it did.
        this.#closeAnswer = joined(m.frames)
        continue
      }
      if (m.from === 'client') {
        if (m.opcode === 'close') continue
        if (m.opcode === 'ping' || m.opcode === 'pong') continue
        const turn = { message: m, position: ++position, key: websocketMatchKey(m.opcode, joined(m.frames)), answer: [] as Scheduled[], used: false }
        this.#turns.push(turn)
        anchor = { atMs: m.atMs, into: turn.answer }
        continue
      }
      if (m.opcode === 'pong') continue
      anchor.into.push({ message: m, afterMs: Math.max(0, m.atMs - anchor.atMs) })
    }
    playback.opened?.(this)
  }

  /** The recorded client messages (text and binary) not matched so far: their position among the client's messages, and what they are. */
  unsent(): Array<{ position: number; what: string }> {
    return this.#turns.filter((t) => !t.used).map((t) => ({ position: t.position, what: describe(t.message.opcode, joined(t.message.frames)) }))
  }

  /** The server messages sent before any client message, at their offsets from the 101. */
  opening(): Scheduled[] {
    return this.#opening
  }

  /** True once every recorded client turn was matched (nothing more will be answered). */
  get finished(): boolean {
    return this.#answered === this.#turns.length
  }

  /** The close payload the server answered the client's close with, if the recording has it. */
  get closeAnswer(): Uint8Array | undefined {
    return this.#closeAnswer
  }

  /** Client messages received so far. */
  get received(): number {
    return this.#received
  }

  /**
   * How the recorded session ended without a close handshake, if the app saw it end so. A recording the run cut
   * with the socket still open (TR_SESSION_CLOSED) did not end for the app: the replayed session stays open too.
   */
  get end(): WebSocketEnd | undefined {
    const end = this.#playback.end
    return end?.code === RUN_ENDED_CODE ? undefined : end
  }

  /** A text or binary (or close) message from the client: its recorded answer, or a miss. */
  client(opcode: WebSocketOpcode, bytes: Uint8Array): ClientTurn {
    const n = ++this.#received
    const key = websocketMatchKey(opcode, bytes)
    const turn = this.#turns.find((t) => !t.used && t.key === key)
    if (turn) {
      turn.used = true
      this.#answered++
      return { kind: 'answer', messages: turn.answer }
    }
    const next = this.#turns.find((t) => !t.used)
    const expected = next
      ? `the next one recorded is ${describe(next.message.opcode, joined(next.message.frames))}`
      : 'the recording has no client message left'
    return {
      kind: 'miss',
      error: new ToolReplayError(
        ErrorCodes.REPLAY_MISS,
        `Failed to replay WebSocket message #${n} from the client on "${this.#label}": no recorded client message of trace "${this.#trace}" matches ${describe(opcode, bytes)} (${expected}); Tool Replay closed the session with code ${MISS_CLOSE_CODE}. Re-record with \`tr-proxy record\`, or fix what the app sends.`,
        { details: { request: this.#label, message: n, opcode } },
      ),
    }
  }
}

/** The close code a miss ends a replayed session with (1008: policy violation, RFC 6455 7.4.1). */
export const MISS_CLOSE_CODE = 1008

/** "text {"type":"response.create"} (52 bytes)": what a message is, short, without its content beyond a JSON type. */
function describe(opcode: WebSocketOpcode, bytes: Uint8Array): string {
  if (opcode === 'text') {
    const text = tryUtf8(bytes)
    const type = text?.match(/"type"\s*:\s*"([^"\\]{1,60})"/)?.[1]
    if (type !== undefined) return `a text message of type "${type}" (${bytes.byteLength} bytes)`
  }
  return `a ${opcode} message of ${bytes.byteLength} bytes`
}

function joined(frames: readonly Uint8Array[]): Uint8Array {
  return frames.length === 1 ? (frames[0] as Uint8Array) : Buffer.concat(frames)
}

/**
 * The sessions a strict replay played and the conversations played from each: the recorded client messages no
 * conversation received are unused, reported in the ledger as unused exchanges are (the run did less than
 * recorded). A session whose conversation never started has every client message unused.
 */
export class WebSocketUsage {
  readonly #sessions: Array<{ label: string; seq: number; playback: WebSocketPlayback; conversations: WebSocketConversation[] }> = []

  /** The playback a path is handed for the recorded session `x`: the conversation made from it reports here. */
  track(playback: WebSocketPlayback, x: Pick<Exchange, 'seq' | 'request'>): WebSocketPlayback {
    const entry = { label: `${x.request.method} ${x.request.url}`, seq: x.seq, playback, conversations: [] as WebSocketConversation[] }
    this.#sessions.push(entry)
    return { ...playback, opened: (c) => entry.conversations.push(c) }
  }

  /** A ledger entry for every recorded client message no conversation received. */
  unused(): LedgerEntry[] {
    const out: LedgerEntry[] = []
    for (const s of this.#sessions) {
      const conversations = s.conversations.length > 0 ? s.conversations : [new WebSocketConversation({ ...s.playback, opened: () => {} }, s.label, '')]
      // A message counts as sent when any conversation of the session received it.
      const unsent = conversations.map((c) => new Map(c.unsent().map((u) => [u.position, u.what])))
      for (const [position, what] of unsent[0] as Map<number, string>) {
        if (!unsent.every((m) => m.has(position))) continue
        out.push({
          code: ErrorCodes.REPLAY_UNUSED,
          request: `${s.label} client message #${position}`,
          message: `never sent: the recording's client message #${position} of WebSocket session #${s.seq} (${what}) did not come in replay, so what the server said after it was not played. The app did less than when it was recorded; re-record, or check what changed.`,
        })
      }
    }
    return out
  }
}
