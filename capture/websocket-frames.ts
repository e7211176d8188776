/**
 * The WebSocket wire (RFC 6455 5): a frame parser that reads any split of the byte stream in linear time,
 * frame encoding, and the handshake's accept value. Both directions of a recorded relay and the client side
 * of a replayed session are read with it; nothing here touches a socket.
 */
import { createHash } from 'node:crypto'
import type { ResponseHead, WebSocketOpcode } from '../trace/index.ts'

/** Frame opcodes (RFC 6455 5.2). */
export const OPCODE = { continuation: 0x0, text: 0x1, binary: 0x2, close: 0x8, ping: 0x9, pong: 0xa } as const

/** One frame as it crossed the wire, its payload unmasked. */
export interface WebSocketFrame {
  fin: boolean
  opcode: number
  payload: Uint8Array
}

/** The name of a message opcode; undefined for continuation and reserved ones. */
export function opcodeName(opcode: number): WebSocketOpcode | undefined {
  switch (opcode) {
    case OPCODE.text:
      return 'text'
    case OPCODE.binary:
      return 'binary'
    case OPCODE.close:
      return 'close'
    case OPCODE.ping:
      return 'ping'
    case OPCODE.pong:
      return 'pong'
    default:
      return undefined
  }
}

/**
 * Reads frames from a byte stream split anywhere. Bytes wait in a list until a whole frame is there and are
 * copied once, so reading is linear in the input. A frame whose payload is over `maxPayload`, a reserved
 * bit set (no extension is negotiated through Tool Replay) or a malformed length throws an error with code
 * WEBSOCKET_PROTOCOL_CODE (the relay records it as how the session ended; it never reaches a user as a throw).
 */
export class FrameParser {
  readonly #max: number
  readonly #chunks: Buffer[] = []
  #buffered = 0
  /** Bytes the frame being read needs in all, once its header was read (0: not known). */
  #need = 0

  constructor(maxPayload: number) {
    this.#max = maxPayload
  }

  /** Bytes taken that no returned frame holds yet (the start of the next frame). */
  get buffered(): number {
    return this.#buffered
  }

  /** Takes the next bytes; returns the frames they completed. */
  push(chunk: Uint8Array): WebSocketFrame[] {
    if (chunk.byteLength > 0) {
      this.#chunks.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength))
      this.#buffered += chunk.byteLength
    }
    const out: WebSocketFrame[] = []
    // The next frame's size is known and not all of it is here: nothing to read yet.
    if (this.#buffered < this.#need) return out
    for (;;) {
      const frame = this.#next()
      if (!frame) return out
      out.push(frame)
    }
  }

  #next(): WebSocketFrame | undefined {
    if (this.#buffered < 2) return undefined
    const first = this.#peek(14)
    const b0 = first[0] as number
    const b1 = first[1] as number
    if ((b0 & 0x70) !== 0) throw protocolError('a frame has a reserved bit set (no extension was negotiated)')
    const masked = (b1 & 0x80) !== 0
    let length = b1 & 0x7f
    let offset = 2
    if (length === 126) {
      if (first.byteLength < 4) return undefined
      length = first.readUInt16BE(2)
      offset = 4
    } else if (length === 127) {
      if (first.byteLength < 10) return undefined
      const high = first.readUInt32BE(2)
      if (high > 0x1fffff) throw protocolError('a frame declares a length over 2^53 bytes')
      length = high * 2 ** 32 + first.readUInt32BE(6)
      offset = 10
    }
    if (length > this.#max) throw protocolError(`a frame of ${length} bytes is over the ${this.#max}-byte limit`)
    const headerSize = offset + (masked ? 4 : 0)
    if (this.#buffered < headerSize + length) {
      this.#need = headerSize + length
      return undefined
    }
    this.#need = 0
    const whole = this.#take(headerSize + length)
    const payload = Buffer.from(whole.subarray(headerSize))
    if (masked) {
      const mask = whole.subarray(offset, offset + 4)
      for (let i = 0; i < payload.byteLength; i++) payload[i] = (payload[i] as number) ^ (mask[i & 3] as number)
    }
    return { fin: (b0 & 0x80) !== 0, opcode: b0 & 0x0f, payload }
  }

  /** Up to `n` bytes from the front, without consuming them: joins only the chunks that hold them (linear input). */
  #peek(n: number): Buffer {
    const head = this.#chunks[0] as Buffer
    if (head.byteLength >= n || this.#chunks.length === 1) return head.subarray(0, n)
    const parts: Buffer[] = []
    let have = 0
    for (const c of this.#chunks) {
      parts.push(c)
      have += c.byteLength
      if (have >= n) break
    }
    return Buffer.concat(parts, Math.min(n, have))
  }

  /** Exactly `n` bytes from the front, consumed (the whole chunks taken leave the list in one splice). */
  #take(n: number): Buffer {
    const parts: Buffer[] = []
    let need = n
    let whole = 0
    while (need > 0) {
      const head = this.#chunks[whole] as Buffer
      if (head.byteLength <= need) {
        parts.push(head)
        whole++
        need -= head.byteLength
      } else {
        parts.push(head.subarray(0, need))
        this.#chunks[whole] = head.subarray(need)
        need = 0
      }
    }
    this.#chunks.splice(0, whole)
    this.#buffered -= n
    return parts.length === 1 ? (parts[0] as Buffer) : Buffer.concat(parts, n)
  }
}

/** The code of a stream the parser cannot read. */
export const WEBSOCKET_PROTOCOL_CODE = 'TR_WEBSOCKET_PROTOCOL'

function protocolError(why: string): Error & { code: string } {
  return Object.assign(new Error(`Cannot read the WebSocket stream: ${why}.`), { code: WEBSOCKET_PROTOCOL_CODE })
}

/** Encodes one frame; `mask` (a client's frames must be masked) uses a fresh random key. */
export function encodeFrame(opcode: number, payload: Uint8Array, fin = true, mask = false): Buffer {
  const length = payload.byteLength
  const size = length < 126 ? 2 : length < 65536 ? 4 : 10
  const head = Buffer.alloc(size + (mask ? 4 : 0))
  head[0] = (fin ? 0x80 : 0) | opcode
  if (length < 126) head[1] = length
  else if (length < 65536) {
    head[1] = 126
    head.writeUInt16BE(length, 2)
  } else {
    head[1] = 127
    head.writeUInt32BE(Math.floor(length / 2 ** 32), 2)
    head.writeUInt32BE(length >>> 0, 6)
  }
  if (!mask) return Buffer.concat([head, payload])
  head[1] = (head[1] as number) | 0x80
  const key = createHash('sha256').update(String(Math.random())).digest().subarray(0, 4)
  key.copy(head, size)
  const body = Buffer.from(payload)
  for (let i = 0; i < body.byteLength; i++) body[i] = (body[i] as number) ^ (key[i & 3] as number)
  return Buffer.concat([head, body])
}

const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11'

/** The Sec-WebSocket-Accept value for a client's Sec-WebSocket-Key (RFC 6455 4.2.2). */
export function websocketAccept(key: string): string {
  return createHash('sha1')
    .update(key.trim() + GUID)
    .digest('base64')
}

/** Fields of a 101 that belong to one connection: made anew for a replayed client. */
const PER_CONNECTION = /^(sec-websocket-accept|sec-websocket-extensions|connection|upgrade)$/i

/**
 * The head fields of a replayed 101 for a client that sent `key`: the handshake's own (with an accept for this
 * key) and the recorded ones that do not belong to the recorded connection (no extension is ever negotiated).
 */
export function switchedHeaders(recorded: ResponseHead, key: string): Array<[string, string]> {
  return [
    ['upgrade', 'websocket'],
    ['connection', 'Upgrade'],
    ['sec-websocket-accept', websocketAccept(key)],
    ...recorded.headers.filter(([k]) => !PER_CONNECTION.test(k)).map(([k, v]): [string, string] => [k, v]),
  ]
}
