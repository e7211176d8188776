import assert from 'node:assert/strict'
import { test } from 'node:test'
import { encodeFrame, FrameParser, OPCODE, switchedHeaders, websocketAccept } from './websocket-frames.ts'

test('frames round-trip masked and unmasked at every length form, read from any split of the stream', () => {
  const payloads = [new Uint8Array(0), new Uint8Array(125).fill(7), new Uint8Array(126).fill(8), new Uint8Array(70_000).map((_, i) => i % 251)]
  const wire = Buffer.concat(payloads.flatMap((p, i) => [encodeFrame(OPCODE.binary, p, i % 2 === 0, i % 2 === 1)]))
  // Split at every step through all the headers, the small frames and both ends of the 70,000-byte payload; its
  // middle goes in 4 KB pieces. Pushed a byte at a time the parser peeks at the header by joining every pending
  // chunk, so the big payload alone took ~30 s of the unit run, and the many-chunk path is the small frames' too.
  const middle = [wire.byteLength - 70_000 + 64, wire.byteLength - 64]
  for (const step of [1, 3, 1000, wire.byteLength]) {
    const parser = new FrameParser(1 << 20)
    const frames = []
    for (let at = 0; at < wire.byteLength; ) {
      const size = at >= (middle[0] as number) && at < (middle[1] as number) ? Math.max(step, 4096) : step
      frames.push(...parser.push(wire.subarray(at, at + size)))
      at += size
    }
    assert.equal(frames.length, payloads.length, `step ${step}`)
    frames.forEach((f, i) => {
      assert.equal(f.opcode, OPCODE.binary)
      assert.equal(f.fin, i % 2 === 0)
      assert.deepEqual(Buffer.from(f.payload), Buffer.from(payloads[i] as Uint8Array))
    })
  }
})

test('bounded and strict: a frame over the limit, or with a reserved bit, throws TR_WEBSOCKET_PROTOCOL', () => {
  assert.throws(() => new FrameParser(10).push(encodeFrame(OPCODE.text, new Uint8Array(11))), {
    code: 'TR_WEBSOCKET_PROTOCOL',
    message: /11 bytes is over the 10-byte limit/,
  })
  assert.throws(() => new FrameParser(10).push(Buffer.from('ping')), { code: 'TR_WEBSOCKET_PROTOCOL', message: /reserved bit/ })
})

test('the handshake accept value is RFC 6455’s example', () => {
  assert.equal(websocketAccept('dGhlIHNhbXBsZSBub25jZQ=='), 's3pPLMBiTxaQ9kYGzzhZRbK+xOo=')
})

test("a replayed 101 answers this client's key and drops the recorded connection's own fields (no extension)", () => {
  const recorded = {
    status: 101,
    statusText: 'Switching Protocols',
    headers: [
      ['Upgrade', 'websocket'],
      ['Connection', 'Upgrade'],
      ['Sec-WebSocket-Accept', 'recorded-accept'],
      ['Sec-WebSocket-Extensions', 'permessage-deflate'],
      ['Sec-WebSocket-Protocol', 'realtime'],
    ] as Array<[string, string]>,
  }
  assert.deepEqual(switchedHeaders(recorded, 'dGhlIHNhbXBsZSBub25jZQ=='), [
    ['upgrade', 'websocket'],
    ['connection', 'Upgrade'],
    ['sec-websocket-accept', 's3pPLMBiTxaQ9kYGzzhZRbK+xOo='],
    ['Sec-WebSocket-Protocol', 'realtime'],
  ])
})

test('linear in its input: a 256 KiB frame arriving one byte at a time is read without re-reading what is held', () => {
  // Peeking at the next header joined every held chunk on each push: 70 KB a byte at a time took 30 s.
  const payload = Buffer.alloc(256 * 1024, 'a')
  const wire = encodeFrame(OPCODE.binary, payload, true, true)
  const parser = new FrameParser(1024 * 1024)
  const t0 = performance.now()
  const frames = []
  for (let i = 0; i < wire.byteLength; i++) frames.push(...parser.push(wire.subarray(i, i + 1)))
  const ms = performance.now() - t0
  assert.equal(frames.length, 1)
  assert.ok(Buffer.from(frames[0]?.payload ?? []).equals(payload))
  assert.equal(parser.buffered, 0)
  // Quadratic work takes minutes here; linear work well under a second on a loaded 2-core machine.
  assert.ok(ms < 20_000, `${wire.byteLength} one-byte pushes took ${ms.toFixed(0)} ms`)
})
