import assert from 'node:assert/strict'
import { test } from 'node:test'
import { cutBody, StreamCutter } from './event-stream-cut.ts'
import { parseSse } from './sse.ts'

const enc = new TextEncoder()
const dec = new TextDecoder()

const lf = ': keep-alive\n\nevent: rate\ndata: {"id":1}\n\ndata: {"id":2}\nid: 7\n\n: ping\n\ndata\n\ndata: [DONE]\n\n'
const streams = { lf, crlf: lf.replaceAll('\n', '\r\n'), cr: lf.replaceAll('\n', '\r') }

test('a cut after N events keeps exactly the first N events the client parses, at an event boundary, for LF, CRLF and CR streams', () => {
  for (const [name, text] of Object.entries(streams)) {
    const all = parseSse(text)
    assert.equal(all.length, 4, name)
    for (let n = 0; n <= 4; n++) {
      const r = cutBody(enc.encode(text), { events: n })
      const kept = dec.decode(r.body)
      assert.deepEqual(parseSse(kept), all.slice(0, n), `${name}, ${n} events`)
      assert.ok(text.startsWith(kept), name)
      // The next byte starts a new line: the cut never splits an event or a line terminator.
      assert.ok(n === 0 || /(\r\n|\n|\r)$/.test(kept), `${name} ${n}: ${JSON.stringify(kept.slice(-4))}`)
      assert.equal(r.events, n)
      assert.equal(r.cut, n < 4, `${name} ${n}`)
    }
    assert.equal(cutBody(enc.encode(text), { events: 5 }).reached, false)
  }
})

test('fed in chunks split at every byte, the cutter keeps exactly what the whole-body cut keeps', () => {
  for (const [name, text] of Object.entries(streams)) {
    const bytes = enc.encode(text)
    for (const n of [1, 2, 3]) {
      const whole = dec.decode(cutBody(bytes, { events: n }).body)
      for (let split = 0; split <= bytes.byteLength; split++) {
        const cutter = new StreamCutter({ events: n })
        const a = cutter.push(bytes.subarray(0, split))
        const b = cutter.push(bytes.subarray(split))
        assert.equal(dec.decode(a.keep) + dec.decode(b.keep), whole, `${name}, ${n} events, split at ${split}`)
        assert.equal(b.done, true)
      }
    }
  }
})

test('comment-only blocks (keep-alives) are not events; a bytes cut counts bytes of any body', () => {
  const r = cutBody(enc.encode(': a\n\n: b\n\ndata: x\n\n'), { events: 1 })
  assert.equal(dec.decode(r.body), ': a\n\n: b\n\ndata: x\n\n')
  assert.equal(r.cut, false)
  const cutter = new StreamCutter({ bytes: 5 })
  assert.deepEqual([...cutter.push(enc.encode('abc')).keep], [...enc.encode('abc')])
  const second = cutter.push(enc.encode('defg'))
  assert.equal(dec.decode(second.keep), 'de')
  assert.equal(second.done, true)
  assert.equal(cutter.push(enc.encode('h')).keep.byteLength, 0)
})
