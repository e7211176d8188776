/**
 * A WebSocket session as the page reads it: in the timeline, one row saying how many messages each side sent
 * and how it ended; in the exchange panel, every message as its own row (who sent it, its opcode, when, its
 * size and the frames it came in, its text or the first bytes in hex, a close's code and reason).
 * A session that speaks OpenAI Realtime is read as a model row too (run-view.ts); its messages are shown here
 * the same way.
 */
import { type Exchange, tryUtf8, type WebSocketMessage } from '../trace/index.ts'

/** Messages listed per session in the panel; the rest are counted (the whole session stays in the trace). */
export const FRAMES_LIMIT = 2000
/** Text shown per message; more is cut and marked. */
const FRAME_TEXT_LIMIT = 16 * 1024
const HEX_BYTES = 256

/** One WebSocket session in the timeline. */
export interface WebSocketSessionRow {
  /** Messages the client sent, and the server sent (control messages included). */
  client: number
  server: number
  /** Payload bytes both ways. */
  bytes: number
  /** The close handshake's first close message: who sent it, its code and reason. */
  closed?: { by: 'client' | 'server'; code?: number; reason: string }
  /** How the connection ended when no close message came (a reset, the session closing). */
  end?: { code: string; message: string }
}

/** One message of a session, as the panel lists it. */
export interface WebSocketFrameView {
  from: 'client' | 'server'
  opcode: WebSocketMessage['opcode']
  /** ms after the upgrade request, when its last frame arrived. */
  atMs: number
  size: number
  /** Frames it arrived in (a fragmented message has more than one). */
  frames: number
  text?: string
  /** The text was longer than shown. */
  truncated?: boolean
  /** For a binary payload (or text that is not UTF-8): its first bytes in hex. */
  hex?: string
  close?: { code: number; reason: string }
}

/** The whole session for the panel: its messages (at most FRAMES_LIMIT), and how many there were. */
export interface WebSocketView {
  messages: WebSocketFrameView[]
  total: number
  end?: { code: string; message: string; atMs: number }
}

/** The row of a WebSocket session (read from the trace alone: no body is read). */
export function websocketSessionRow(x: Exchange): WebSocketSessionRow | undefined {
  const ws = x.websocket
  if (!ws) return undefined
  const row: WebSocketSessionRow = { client: 0, server: 0, bytes: 0 }
  for (const m of ws.messages) {
    if (m.from === 'client') row.client++
    else row.server++
    row.bytes += m.body.size
    if (m.opcode === 'close' && !row.closed) row.closed = { by: m.from, reason: m.close?.reason ?? '', ...(m.close ? { code: m.close.code } : {}) }
  }
  if (ws.end) row.end = { code: ws.end.code, message: ws.end.message }
  return row
}

/** When a session's last message (or its end) came, ms after the upgrade request. */
export function websocketLastMs(x: Exchange): number | undefined {
  const ws = x.websocket
  if (!ws) return undefined
  return Math.max(x.timing.headersMs, ws.messages.at(-1)?.atMs ?? 0, ws.end?.atMs ?? 0)
}

/** Every message of a session read for the panel, from the bodies the exchange references. */
export function websocketView(bodies: ReadonlyMap<string, Uint8Array>, x: Exchange): WebSocketView | undefined {
  const ws = x.websocket
  if (!ws) return undefined
  const view: WebSocketView = { messages: ws.messages.slice(0, FRAMES_LIMIT).map((m) => frameView(bodies, m)), total: ws.messages.length }
  if (ws.end) view.end = { ...ws.end }
  return view
}

function frameView(bodies: ReadonlyMap<string, Uint8Array>, m: WebSocketMessage): WebSocketFrameView {
  const v: WebSocketFrameView = { from: m.from, opcode: m.opcode, atMs: m.atMs, size: m.body.size, frames: Math.max(1, m.body.chunks.length) }
  if (m.close) v.close = { ...m.close }
  const raw = bodies.get(m.body.digest) ?? new Uint8Array(0)
  if (raw.byteLength === 0 || m.opcode === 'close') return v
  const text = m.opcode === 'binary' ? undefined : tryUtf8(raw)
  if (text === undefined) {
    v.hex = Buffer.from(raw.subarray(0, HEX_BYTES)).toString('hex')
    return v
  }
  v.text = text.length > FRAME_TEXT_LIMIT ? text.slice(0, FRAME_TEXT_LIMIT) : text
  if (text.length > FRAME_TEXT_LIMIT) v.truncated = true
  return v
}

/** The text a session is found by in a search: its text messages, each cut, the whole bounded. */
export function websocketSearchText(bodies: ReadonlyMap<string, Uint8Array>, x: Exchange, limit: number): string {
  const parts: string[] = []
  let size = 0
  for (const m of x.websocket?.messages ?? []) {
    if (m.opcode !== 'text' || size >= limit) continue
    const text = tryUtf8(bodies.get(m.body.digest) ?? new Uint8Array(0))?.slice(0, FRAME_TEXT_LIMIT) ?? ''
    parts.push(text)
    size += text.length
  }
  if (x.websocket?.end) parts.push(x.websocket.end.code, x.websocket.end.message)
  return parts.join('\n')
}
