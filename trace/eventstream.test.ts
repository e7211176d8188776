import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { test } from 'node:test'
import { decodeEventStream, encodeEventStreamFrame, encodeEventStreamHeaders, eventStreamFramesAsJson, isAwsEventStream } from './eventstream.ts'

// A live Bedrock ConverseStream response (vercel/ai fixture, e2e/fixtures/bedrock/README.md): AWS's own lengths and CRCs.
const live = new Uint8Array(
  Buffer.from(
    (JSON.parse(readFileSync(new URL('../e2e/fixtures/bedrock/converse-stream-live.json', import.meta.url), 'utf8')) as { response: { bodyBase64: string } })
      .response.bodyBase64,
    'base64',
  ),
)

test('a live ConverseStream body decodes into its frames: headers, JSON payloads, every CRC checked', () => {
  const { frames, complete } = decodeEventStream(live)
  assert.equal(complete, true)
  assert.deepEqual(
    eventStreamFramesAsJson(frames).map((e) => [
      e.event,
      Object.keys(e.data as object)
        .sort()
        .join(','),
    ]),
    [
      ['messageStart', 'p,role'],
      ['contentBlockDelta', 'contentBlockIndex,delta,p'],
      ['contentBlockDelta', 'contentBlockIndex,delta,p'],
      ['contentBlockStop', 'contentBlockIndex,p'],
      ['messageStop', 'additionalModelResponseFields,p,stopReason'],
      ['metadata', 'metrics,p,usage'],
    ],
  )
  assert.deepEqual(frames[0]?.headers, { ':event-type': 'messageStart', ':content-type': 'application/json', ':message-type': 'event' })
  assert.equal(
    frames.reduce((n, f) => n + f.length, 0),
    live.byteLength,
  )
})

test('re-encoding a frame with its header block and payload gives back its exact bytes', () => {
  const { frames } = decodeEventStream(live)
  const again = Buffer.concat(frames.map((f) => encodeEventStreamFrame(f.rawHeaders, f.payload)))
  assert.equal(Buffer.compare(again, Buffer.from(live)), 0)
  const headers = encodeEventStreamHeaders([
    [':event-type', 'messageStart'],
    [':content-type', 'application/json'],
    [':message-type', 'event'],
  ])
  assert.equal(Buffer.compare(Buffer.from(headers), Buffer.from(frames[0]?.rawHeaders ?? [])), 0, 'string headers encode as AWS encodes them')
})

test('a damaged or cut body stops at the last good frame and says it is incomplete; never throws', () => {
  const damaged = new Uint8Array(live)
  damaged[200] = (damaged[200] as number) ^ 0xff
  const d = decodeEventStream(damaged)
  assert.equal(d.complete, false)
  assert.ok(d.frames.length < 6)
  const cut = decodeEventStream(live.subarray(0, live.byteLength - 10))
  assert.deepEqual([cut.frames.length, cut.complete], [5, false])
  assert.deepEqual(decodeEventStream(new Uint8Array([0, 0, 0, 5, 0, 0])), { frames: [], complete: false })
  const huge = new Uint8Array(16)
  new DataView(huge.buffer).setUint32(0, 0xffffffff)
  assert.deepEqual(decodeEventStream(huge), { frames: [], complete: false })
})

test('header value types beyond strings decode; the content type names the framing', () => {
  const raw = Buffer.concat([
    Buffer.from([4, ...Buffer.from('flag'), 0]),
    Buffer.from([3, ...Buffer.from('num'), 4, 0, 0, 1, 0]),
    Buffer.from([3, ...Buffer.from('big'), 5, 0, 0, 0, 0, 0, 0, 0, 7]),
    Buffer.from([3, ...Buffer.from('raw'), 6, 0, 2, 0xff, 0x00]),
  ])
  const frame = encodeEventStreamFrame(raw, Buffer.from('{}'))
  assert.deepEqual(decodeEventStream(frame).frames[0]?.headers, { flag: true, num: 256, big: 7, raw: '/wA=' })
  assert.equal(isAwsEventStream('application/vnd.amazon.eventstream'), true)
  assert.equal(isAwsEventStream('application/json'), false)
})
