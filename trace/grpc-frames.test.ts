import assert from 'node:assert/strict'
import { test } from 'node:test'
import { gzipSync } from 'node:zlib'
import { decodeGrpcBody, formatGrpcBody, grpcMessageViews, isGrpcContentType } from './grpc-frames.ts'

/** One gRPC frame: flag, big-endian length, message. */
function frame(message: Uint8Array, compressed = false): Buffer {
  const prefix = Buffer.alloc(5)
  prefix[0] = compressed ? 1 : 0
  prefix.writeUInt32BE(message.byteLength, 1)
  return Buffer.concat([prefix, message])
}

/** A protobuf message: field 1 = "hello Ada" (string), field 2 = 150 (varint), field 3 = { 1: 7 } (nested). */
const PROTO = Buffer.from([0x0a, 0x09, ...Buffer.from('hello Ada'), 0x10, 0x96, 0x01, 0x1a, 0x02, 0x08, 0x07])

test('content types: gRPC and its +proto/+json variants, not gRPC-Web', () => {
  assert.equal(isGrpcContentType('application/grpc'), true)
  assert.equal(isGrpcContentType('application/grpc+proto'), true)
  assert.equal(isGrpcContentType('application/grpc; charset=utf-8'), true)
  assert.equal(isGrpcContentType('application/grpc-web+proto'), false)
  assert.equal(isGrpcContentType(undefined), false)
})

test('a body splits into its length-prefixed messages; a cut one is counted as trailing bytes', () => {
  const body = Buffer.concat([frame(Buffer.from('{"a":1}')), frame(PROTO), frame(Buffer.alloc(0)), frame(Buffer.from('xyz')).subarray(0, 6)])
  const d = decodeGrpcBody(body)
  assert.deepEqual(
    d.messages.map((m) => [m.offset, m.compressed, m.bytes.byteLength]),
    [
      [0, false, 7],
      [12, false, PROTO.byteLength],
      [17 + PROTO.byteLength, false, 0],
    ],
  )
  assert.equal(d.rest, 6)
})

test('messages read as JSON, schema-less protobuf fields, and (compressed by grpc-encoding) inflated first', () => {
  const body = Buffer.concat([frame(Buffer.from('{"n":0,"message":"hi"}')), frame(PROTO), frame(gzipSync(PROTO), true), frame(Buffer.alloc(0))])
  const views = grpcMessageViews(body, [['grpc-encoding', 'gzip']])
  assert.deepEqual(
    views.map((v) => [v.kind, v.value, v.compressed]),
    [
      ['json', { n: 0, message: 'hi' }, false],
      ['protobuf', { 1: 'hello Ada', 2: 150, 3: { 1: 7 } }, false],
      ['protobuf', { 1: 'hello Ada', 2: 150, 3: { 1: 7 } }, true],
      ['protobuf', {}, false],
    ],
  )
})

test('bytes that are no protobuf message are shown as hex; repeated fields as arrays', () => {
  assert.deepEqual(grpcMessageViews(frame(Buffer.from([0xff, 0xff])), []), [{ compressed: false, size: 2, kind: 'hex', value: 'ffff' }])
  const repeated = Buffer.from([0x08, 0x01, 0x08, 0x02, 0x08, 0x03])
  assert.deepEqual(grpcMessageViews(frame(repeated), [])[0]?.value, { 1: [1, 2, 3] })
})

test('show prints one line per message', () => {
  const text = formatGrpcBody(Buffer.concat([frame(Buffer.from('{"a":1}')), frame(PROTO)]), [])
  assert.equal(text, `[gRPC message #0, 7 bytes, json] {"a":1}\n[gRPC message #1, ${PROTO.byteLength} bytes, protobuf] {"1":"hello Ada","2":150,"3":{"1":7}}`)
  assert.equal(formatGrpcBody(new Uint8Array(0), []), '[no gRPC messages]')
})
