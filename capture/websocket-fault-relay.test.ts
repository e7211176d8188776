import assert from 'node:assert/strict'
import { test } from 'node:test'
import { readClosePayload } from '../trace/index.ts'
import { faultServerStream } from './websocket-fault-relay.ts'
import { encodeFrame, FrameParser, OPCODE } from './websocket-frames.ts'

/** Server bytes: text messages "1".."n", the 2nd one in two fragments, a ping between its fragments. */
function serverBytes(n: number): Buffer {
  const out: Buffer[] = []
  for (let i = 1; i <= n; i++) {
    if (i !== 2) out.push(encodeFrame(OPCODE.text, Buffer.from(String(i))))
    else
      out.push(
        encodeFrame(OPCODE.text, Buffer.from('2a'), false),
        encodeFrame(OPCODE.ping, Buffer.from('p')),
        encodeFrame(OPCODE.continuation, Buffer.from('2b')),
      )
  }
  return Buffer.concat(out)
}

/** What the app's side got, frame by frame: "text 1", "ping p", "close 1012 why". */
function collect() {
  const parser = new FrameParser(1 << 20)
  const got: string[] = []
  let closed = 0
  return {
    got,
    closed: () => closed,
    sink: {
      deliver(bytes: Buffer) {
        for (const f of parser.push(bytes)) {
          if (f.opcode === OPCODE.close) {
            const c = readClosePayload(f.payload)
            got.push(`close ${c?.code} ${c?.reason}`)
          } else got.push(`${f.opcode === OPCODE.ping ? 'ping' : f.opcode === OPCODE.continuation ? 'cont' : 'text'} ${Buffer.from(f.payload).toString()}`)
        }
        return true
      },
      closed: () => void closed++,
    },
  }
}

test('faultServerStream: ws_drop leaves out every frame of the listed messages, control frames between them pass', () => {
  const app = collect()
  const s = faultServerStream({ kind: 'ws_drop', messages: [2, 3] }, 1 << 20, app.sink)
  // Byte by byte: frames cut anywhere are read whole.
  for (const b of serverBytes(4)) s.push(Buffer.from([b]))
  assert.deepEqual(app.got, ['text 1', 'ping p', 'text 4'])
})

test('faultServerStream: ws_close sends the close after the last fragment of message N and swallows what follows', () => {
  const app = collect()
  const s = faultServerStream({ kind: 'ws_close', after: 2, code: 1012, reason: 'why' }, 1 << 20, app.sink)
  s.push(serverBytes(4))
  s.push(encodeFrame(OPCODE.text, Buffer.from('late')))
  assert.deepEqual(app.got, ['text 1', 'text 2a', 'ping p', 'cont 2b', 'close 1012 why'])
  assert.equal(app.closed(), 1)
})

test('faultServerStream: ws_delay holds message N and every frame after it for ms, in order; drained() waits for them', async () => {
  const app = collect()
  const s = faultServerStream({ kind: 'ws_delay', from: 3, ms: 60 }, 1 << 20, app.sink)
  const t0 = performance.now()
  s.push(serverBytes(4))
  assert.deepEqual(app.got, ['text 1', 'text 2a', 'ping p', 'cont 2b'])
  await s.drained()
  assert.ok(performance.now() - t0 >= 55)
  assert.deepEqual(app.got.slice(4), ['text 3', 'text 4'])
  // stop() drops what still waits and releases drained().
  s.push(encodeFrame(OPCODE.text, Buffer.from('5')))
  const drained = s.drained()
  s.stop()
  await drained
  assert.equal(app.got.length, 6)
})

test('faultServerStream: a stream it cannot read (a frame over the limit) passes on as it is, unfaulted', () => {
  const raw: Buffer[] = []
  const s = faultServerStream({ kind: 'ws_drop', messages: [1, 2] }, 4, { deliver: (b) => raw.push(b) > 0, closed: () => {} })
  const big = encodeFrame(OPCODE.text, Buffer.from('0123456789'))
  const next = encodeFrame(OPCODE.text, Buffer.from('x'))
  s.push(big)
  s.push(next)
  assert.deepEqual(Buffer.concat(raw), Buffer.concat([big, next]))
})

test('faultServerStream: when the stream breaks, the bytes of a frame begun in an earlier chunk pass on too, none lost', () => {
  const raw: Buffer[] = []
  const s = faultServerStream({ kind: 'ws_drop', messages: [9] }, 8, { deliver: (b) => raw.push(b) > 0, closed: () => {} })
  const small = encodeFrame(OPCODE.binary, Buffer.from([1, 2, 3, 4, 5]))
  const big = encodeFrame(OPCODE.binary, Buffer.alloc(20, 7))
  // The small frame's first bytes come in one read; the rest with the frame over the limit in the next.
  s.push(small.subarray(0, 3))
  s.push(Buffer.concat([small.subarray(3), big]))
  assert.deepEqual(Buffer.concat(raw), Buffer.concat([small, big]))
})

test('faultServerStream: under ws_delay, bytes of a stream that broke wait behind the frames already held, in order', async () => {
  const raw: Buffer[] = []
  const s = faultServerStream({ kind: 'ws_delay', from: 1, ms: 30 }, 8, { deliver: (b) => raw.push(b) > 0, closed: () => {} })
  const held = encodeFrame(OPCODE.text, Buffer.from('1'))
  const big = encodeFrame(OPCODE.text, Buffer.from('0123456789'))
  s.push(held)
  s.push(big)
  await s.drained()
  assert.deepEqual(Buffer.concat(raw), Buffer.concat([held, big]))
})
