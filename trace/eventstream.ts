/**
 * AWS event stream (`application/vnd.amazon.eventstream`): the binary framing of Bedrock's ConverseStream and
 * InvokeModelWithResponseStream, Transcribe, Kinesis SubscribeToShard. Decoded into frames so the LLM view,
 * diff and patches read a stream as its events; encoded back so a patched payload is a valid frame again.
 * @note Frame layout (aws-sdk-js-v3 / smithy `EventStreamCodec`): total length (uint32 BE), headers length
 * (uint32 BE), prelude CRC32 of those 8 bytes, the headers (name length uint8, name, type uint8, value), the
 * payload, then the message CRC32 of every byte before it. Header value types: 0 true, 1 false (no value),
 * 2 int8, 3 int16, 4 int32, 5 int64, 6 bytes (uint16 length), 7 string (uint16 length), 8 timestamp (int64 ms),
 * 9 uuid (16 bytes). Bedrock's events carry `:event-type`, `:content-type` and `:message-type` ("event" or
 * "exception", then `:exception-type`), and a JSON payload.
 */
import { crc32 } from 'node:zlib'
import { tryParseJson } from './json-codec.ts'

/** True when a Content-Type names an AWS event stream. */
export function isAwsEventStream(contentType: string | undefined): boolean {
  return contentType !== undefined && /^\s*application\/vnd\.amazon\.eventstream\b/i.test(contentType)
}

/** One decoded frame: its headers (strings and numbers as values), payload and where it sits in the body. */
export interface EventStreamFrame {
  headers: Record<string, string | number | boolean>
  payload: Uint8Array
  /** Offset of the frame in the body, and its length. */
  offset: number
  length: number
  /** The header block as it was encoded (kept so a re-encoded frame changes only its payload). */
  rawHeaders: Uint8Array
}

/** The frames of a body, and whether it ended cleanly (no damaged frame, no partial frame at the end). */
export interface DecodedEventStream {
  frames: EventStreamFrame[]
  complete: boolean
}

const PRELUDE = 12
const TRAILER = 4
/** A bound on one frame (the AWS codecs cap messages at 16 MiB), so a damaged length cannot allocate a huge view. */
const MAX_FRAME = 16 * 1024 * 1024

/** Decodes every whole, CRC-valid frame of a body; stops at the first damaged or partial one. Never throws. */
export function decodeEventStream(body: Uint8Array): DecodedEventStream {
  const frames: EventStreamFrame[] = []
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength)
  let at = 0
  while (at < body.byteLength) {
    if (body.byteLength - at < PRELUDE + TRAILER) return { frames, complete: false }
    const total = view.getUint32(at)
    const headersLength = view.getUint32(at + 4)
    if (total < PRELUDE + TRAILER + headersLength || total > MAX_FRAME || at + total > body.byteLength) return { frames, complete: false }
    if (crc32(body.subarray(at, at + 8)) !== view.getUint32(at + 8)) return { frames, complete: false }
    if (crc32(body.subarray(at, at + total - TRAILER)) !== view.getUint32(at + total - TRAILER)) return { frames, complete: false }
    const rawHeaders = body.subarray(at + PRELUDE, at + PRELUDE + headersLength)
    const headers = decodeHeaders(rawHeaders)
    if (!headers) return { frames, complete: false }
    frames.push({ headers, payload: body.subarray(at + PRELUDE + headersLength, at + total - TRAILER), offset: at, length: total, rawHeaders })
    at += total
  }
  return { frames, complete: true }
}

const utf8 = new TextDecoder('utf-8', { fatal: false })

function decodeHeaders(raw: Uint8Array): Record<string, string | number | boolean> | undefined {
  const out: Record<string, string | number | boolean> = {}
  const view = new DataView(raw.buffer, raw.byteOffset, raw.byteLength)
  let at = 0
  const need = (n: number) => at + n <= raw.byteLength
  while (at < raw.byteLength) {
    const nameLength = raw[at] as number
    at += 1
    if (!need(nameLength + 1)) return undefined
    const name = utf8.decode(raw.subarray(at, at + nameLength))
    at += nameLength
    const type = raw[at] as number
    at += 1
    const fixed: Record<number, number> = { 2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16 }
    if (type === 0 || type === 1) out[name] = type === 0
    else if (type === 6 || type === 7) {
      if (!need(2)) return undefined
      const length = view.getUint16(at)
      at += 2
      if (!need(length)) return undefined
      const bytes = raw.subarray(at, at + length)
      out[name] = type === 7 ? utf8.decode(bytes) : Buffer.from(bytes).toString('base64')
      at += length
    } else if (fixed[type] !== undefined) {
      const n = fixed[type] as number
      if (!need(n)) return undefined
      if (type === 2) out[name] = view.getInt8(at)
      else if (type === 3) out[name] = view.getInt16(at)
      else if (type === 4) out[name] = view.getInt32(at)
      else if (type === 9) out[name] = Buffer.from(raw.subarray(at, at + 16)).toString('hex')
      else out[name] = Number(view.getBigInt64(at))
      at += n
    } else return undefined
  }
  return out
}

/** A frame with the same headers and a new payload, its lengths and both CRCs recomputed. */
export function encodeEventStreamFrame(rawHeaders: Uint8Array, payload: Uint8Array): Uint8Array {
  const total = PRELUDE + rawHeaders.byteLength + payload.byteLength + TRAILER
  const out = new Uint8Array(total)
  const view = new DataView(out.buffer)
  view.setUint32(0, total)
  view.setUint32(4, rawHeaders.byteLength)
  view.setUint32(8, crc32(out.subarray(0, 8)))
  out.set(rawHeaders, PRELUDE)
  out.set(payload, PRELUDE + rawHeaders.byteLength)
  view.setUint32(total - TRAILER, crc32(out.subarray(0, total - TRAILER)))
  return out
}

/** String headers encoded as an event stream header block (type 7), in the order given. */
export function encodeEventStreamHeaders(headers: ReadonlyArray<readonly [string, string]>): Uint8Array {
  const parts: Uint8Array[] = []
  for (const [name, value] of headers) {
    const n = Buffer.from(name, 'utf8')
    const v = Buffer.from(value, 'utf8')
    const part = new Uint8Array(1 + n.byteLength + 1 + 2 + v.byteLength)
    part[0] = n.byteLength
    part.set(n, 1)
    part[1 + n.byteLength] = 7
    new DataView(part.buffer).setUint16(2 + n.byteLength, v.byteLength)
    part.set(v, 4 + n.byteLength)
    parts.push(part)
  }
  return Buffer.concat(parts)
}

/**
 * Frames as JSON values for diff and the LLM view: `{event, data}` where `event` is the `:event-type` (or,
 * for an exception frame, the `:exception-type`) and `data` the payload parsed as JSON where it is JSON.
 */
export function eventStreamFramesAsJson(frames: ReadonlyArray<EventStreamFrame>): Array<{ event?: string; exception?: boolean; data: unknown }> {
  return frames.map((f) => {
    const exception = f.headers[':message-type'] === 'exception'
    const name = exception ? f.headers[':exception-type'] : f.headers[':event-type']
    const text = utf8.decode(f.payload)
    const out: { event?: string; exception?: boolean; data: unknown } = { data: tryParseJson(text)?.value ?? text }
    if (typeof name === 'string') out.event = name
    if (exception) out.exception = true
    return out
  })
}
