/**
 * gRPC bodies read as messages: a gRPC request or response body is a run of length-prefixed messages (one
 * byte "compressed" flag, four bytes big-endian length, the message; gRPC over HTTP/2 spec). `show`, `diff`
 * and the inspector present them one by one. A message's bytes are read, in order of what fits: JSON text,
 * a protobuf message decoded without its schema (field numbers and wire values, as `protoc --decode_raw`
 * does), else hex. A compressed message is inflated by its `grpc-encoding` (gzip, deflate) when it can be.
 * Pure, linear in the body.
 */
import { tryUtf8 } from './body.ts'
import { decodeContentEncoding } from './content-encoding.ts'
import { headerValue } from './header-pairs.ts'
import { parseJson } from './json-codec.ts'

/** One message of a gRPC body. */
export interface GrpcMessage {
  /** The compressed flag of its prefix. */
  compressed: boolean
  /** Where its prefix starts in the body. */
  offset: number
  /** The message bytes as sent (still compressed when flagged). */
  bytes: Uint8Array
}

/** A body split into its messages; `rest` counts trailing bytes that do not make a whole message. */
export interface DecodedGrpcBody {
  messages: GrpcMessage[]
  rest: number
}

/** A message made readable: its value (JSON, schema-less protobuf fields or hex) and how it was read. */
export interface GrpcMessageView {
  compressed: boolean
  size: number
  kind: 'json' | 'protobuf' | 'text' | 'hex'
  value: unknown
}

/** True for gRPC's content types (`application/grpc`, `application/grpc+proto`, ...), not gRPC-Web. */
export function isGrpcContentType(contentType: string | undefined): boolean {
  return /^\s*application\/grpc(?:\+[\w.-]+)?\s*(?:;|$)/i.test(contentType ?? '')
}

/** Splits a gRPC body into its messages. */
export function decodeGrpcBody(bytes: Uint8Array): DecodedGrpcBody {
  const messages: GrpcMessage[] = []
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  let at = 0
  while (at + 5 <= bytes.byteLength) {
    const length = view.getUint32(at + 1)
    if (at + 5 + length > bytes.byteLength) break
    messages.push({ compressed: bytes[at] === 1, offset: at, bytes: bytes.subarray(at + 5, at + 5 + length) })
    at += 5 + length
  }
  return { messages, rest: bytes.byteLength - at }
}

/** Each message of a gRPC body made readable; `headers` (the body's own) name its `grpc-encoding`. */
export function grpcMessageViews(bytes: Uint8Array, headers: ReadonlyArray<readonly [string, string]>): GrpcMessageView[] {
  const encoding = headerValue(headers, 'grpc-encoding')
  return decodeGrpcBody(bytes).messages.map((m) => {
    let raw = m.bytes
    if (m.compressed && encoding && encoding !== 'identity') {
      try {
        raw = decodeContentEncoding(raw, encoding)
      } catch {
        return { compressed: true, size: m.bytes.byteLength, kind: 'hex', value: hex(m.bytes) }
      }
    }
    return { compressed: m.compressed, size: m.bytes.byteLength, ...readMessage(raw) }
  })
}

/** A gRPC body as text, one message a line or block, for `tr-proxy show`. */
export function formatGrpcBody(bytes: Uint8Array, headers: ReadonlyArray<readonly [string, string]>): string {
  const views = grpcMessageViews(bytes, headers)
  const lines = views.map(
    (v, i) =>
      `[gRPC message #${i}, ${v.size} bytes${v.compressed ? ', compressed' : ''}, ${v.kind}] ${typeof v.value === 'string' ? v.value : JSON.stringify(v.value)}`,
  )
  const rest = decodeGrpcBody(bytes).rest
  if (rest > 0) lines.push(`[${rest} trailing bytes that are not a whole gRPC message]`)
  return lines.length > 0 ? lines.join('\n') : '[no gRPC messages]'
}

function readMessage(bytes: Uint8Array): Pick<GrpcMessageView, 'kind' | 'value'> {
  // An empty message is a protobuf message with every field at its default.
  if (bytes.byteLength === 0) return { kind: 'protobuf', value: {} }
  const text = tryUtf8(bytes)
  const first = text?.trimStart()[0]
  if (text !== undefined && (first === '{' || first === '[')) {
    try {
      return { kind: 'json', value: parseJson(text) }
    } catch {
      // not JSON after all
    }
  }
  const fields = protobufFields(bytes, 0)
  if (fields !== undefined) return { kind: 'protobuf', value: fields }
  if (text !== undefined && isPrintable(text)) return { kind: 'text', value: text }
  return { kind: 'hex', value: hex(bytes) }
}

const MAX_DEPTH = 8

/**
 * A protobuf message decoded without its schema: `{ "<field number>": value }`, repeated fields as arrays.
 * Varints as numbers (as decimal strings past 2^53), fixed32/fixed64 as hex, length-delimited fields as text
 * when printable, else as a nested message when they parse as one, else as hex. Undefined when the bytes are
 * not a protobuf message.
 */
function protobufFields(bytes: Uint8Array, depth: number): Record<string, unknown> | undefined {
  const out: Record<string, unknown> = {}
  let at = 0
  const varint = (): bigint | undefined => {
    let value = 0n
    for (let shift = 0n; shift < 70n; shift += 7n) {
      if (at >= bytes.byteLength) return undefined
      const b = bytes[at++] as number
      value |= BigInt(b & 0x7f) << shift
      if ((b & 0x80) === 0) return value
    }
    return undefined
  }
  while (at < bytes.byteLength) {
    const key = varint()
    if (key === undefined) return undefined
    const field = Number(key >> 3n)
    const wire = Number(key & 7n)
    if (field < 1 || field > 536_870_911) return undefined
    let value: unknown
    if (wire === 0) {
      const v = varint()
      if (v === undefined) return undefined
      value = v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v.toString()
    } else if (wire === 1 || wire === 5) {
      const n = wire === 1 ? 8 : 4
      if (at + n > bytes.byteLength) return undefined
      value = `0x${hex(bytes.subarray(at, at + n))}`
      at += n
    } else if (wire === 2) {
      const length = varint()
      if (length === undefined || at + Number(length) > bytes.byteLength) return undefined
      const inner = bytes.subarray(at, at + Number(length))
      at += Number(length)
      const text = tryUtf8(inner)
      const nested = depth < MAX_DEPTH && inner.byteLength > 0 ? protobufFields(inner, depth + 1) : undefined
      value = text !== undefined && isPrintable(text) ? text : (nested ?? `0x${hex(inner)}`)
    } else return undefined
    const name = String(field)
    const prior = out[name]
    out[name] = prior === undefined ? value : Array.isArray(prior) ? [...prior, value] : [prior, value]
  }
  return out
}

function isPrintable(text: string): boolean {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is tested for
  return !/[\x00-\x08\x0e-\x1f\x7f]/.test(text)
}

function hex(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex')
}
