import assert from 'node:assert/strict'
import { test } from 'node:test'
import { BodyAccumulator, bodyFromChunks } from './body.ts'

test('BodyAccumulator builds the same ref and bytes as bodyFromChunks, with or without a size hint', () => {
  const chunks = [
    { bytes: new Uint8Array([1, 2, 3]), atMs: 0.4 },
    { bytes: new Uint8Array(0), atMs: 1 },
    { bytes: new Uint8Array(40_000).fill(7), atMs: 2.6 },
    { bytes: new Uint8Array([9]), atMs: 3 },
  ]
  const expected = bodyFromChunks(chunks)
  const total = chunks.reduce((n, c) => n + c.bytes.byteLength, 0)
  for (const hint of [undefined, 0, 1, total, total + 100, Number.NaN]) {
    const acc = new BodyAccumulator(hint)
    for (const c of chunks) acc.append(c.bytes, c.atMs)
    const got = acc.finish()
    assert.deepEqual(got.ref, expected.ref, `hint ${hint}`)
    assert.deepEqual([...got.bytes], [...expected.bytes], `hint ${hint}`)
    assert.equal(acc.lastAtMs, 3)
  }
})

test('BodyAccumulator copies: a caller reusing its chunk buffer does not change the body', () => {
  const chunk = new Uint8Array([1, 2, 3])
  const acc = new BodyAccumulator(3)
  acc.append(chunk, 0)
  chunk.fill(0)
  assert.deepEqual([...acc.finish().bytes], [1, 2, 3])
})

test('an empty body has the digest of no bytes', () => {
  assert.deepEqual(new BodyAccumulator(1024).finish().ref, bodyFromChunks([]).ref)
})

test('BodyAccumulator: a one-chunk body keeps no slack, and what lies behind a view of a grown buffer is zeros', () => {
  const one = new BodyAccumulator()
  one.append(new Uint8Array(1000).fill(5), 0)
  const small = one.finish().bytes
  assert.equal(small.constructor, Uint8Array)
  assert.equal(small.buffer.byteLength, 1000)

  // Freed memory full of 0xAA first, so an allocator that hands it out again would show it.
  for (let round = 0; round < 50; round++) {
    for (let i = 0; i < 20; i++) Buffer.allocUnsafeSlow(6200).fill(0xaa)
    const grown = new BodyAccumulator()
    grown.append(new Uint8Array(3000).fill(1), 0)
    grown.append(new Uint8Array(100).fill(2), 1)
    const bytes = grown.finish().bytes
    assert.equal(bytes.byteLength, 3100)
    const behind = new Uint8Array(bytes.buffer, bytes.byteOffset + bytes.byteLength)
    assert.equal(behind.byteLength, 2900, 'the buffer doubled, so it has room behind the view')
    assert.ok(
      behind.every((b) => b === 0),
      'no stale memory behind the view',
    )
  }
})
