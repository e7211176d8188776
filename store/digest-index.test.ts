import assert from 'node:assert/strict'
import { test } from 'node:test'
import { DigestIndex } from './digest-index.ts'

/**
 * A 64-hex-digit key per number, spread like a SHA-256 digest (each 32-bit word mixes `i` and its place; the
 * first word alone is distinct per `i`): SHA-256 of 650k numbers was most of this file's time.
 */
const words = new Uint32Array(8)
const wordBytes = Buffer.from(words.buffer)
const digest = (i: number) => {
  for (let w = 0; w < 8; w++) {
    const h = Math.imul(i ^ Math.imul(w, 0x9e3779b9), 0x85ebca6b)
    words[w] = Math.imul(h ^ (h >>> 13), 0xc2b2ae35)
  }
  return wordBytes.toString('hex')
}

test('holds many digests with their numbers, as a Map would', () => {
  const index = new DigestIndex(3)
  const n = 50_000
  for (let i = 0; i < n; i++) assert.equal(index.add(digest(i), i, i * 2, i + 0.5), true)
  assert.equal(index.size, n)
  for (let i = 0; i < n; i += 7) {
    assert.equal(index.has(digest(i)), true)
    assert.deepEqual([index.get(digest(i), 0), index.get(digest(i), 1), index.get(digest(i), 2)], [i, i * 2, i + 0.5])
  }
  for (let i = n; i < n + 1000; i++) assert.equal(index.has(digest(i)), false)
  assert.equal(index.get(digest(n)), undefined)
})

test('a digest added again keeps its first numbers', () => {
  const index = new DigestIndex(1)
  assert.equal(index.add(digest(1), 10), true)
  assert.equal(index.add(digest(1), 20), false)
  assert.equal(index.get(digest(1)), 10)
  assert.equal(index.size, 1)
})

test('digests that share their first 32 bits are told apart', () => {
  const index = new DigestIndex(1)
  const a = `00000000${'1'.repeat(56)}`
  const b = `00000000${'2'.repeat(56)}`
  index.add(a, 1)
  assert.equal(index.has(b), false)
  index.add(b, 2)
  assert.deepEqual([index.get(a), index.get(b)], [1, 2])
})

test('numbers other than 32-bit unsigned integers come back as they went in', () => {
  const index = new DigestIndex(3)
  const odd = [2 ** 32, 2 ** 32 - 1, 2 ** 53 - 1, -1, 0.5, 5 * 2 ** 30 + 7]
  for (const [i, n] of odd.entries()) index.add(digest(i), n, i, n)
  for (const [i, n] of odd.entries())
    assert.deepEqual(
      [0, 1, 2].map((c) => index.get(digest(i), c)),
      [n, i, n],
    )
})

test('a digest is known by its first 128 bits (the bytes behind it are always checked against the whole digest)', () => {
  const index = new DigestIndex(1)
  const a = `${'ab'.repeat(16)}${'1'.repeat(32)}`
  index.add(a, 1)
  assert.equal(index.has(`${'ab'.repeat(16)}${'2'.repeat(32)}`), true)
  assert.equal(index.has(`${'ab'.repeat(15)}ac${'1'.repeat(32)}`), false)
})

test('keys that are not hex SHA-256 digests still work (upper case, short, other text)', () => {
  const index = new DigestIndex(0)
  const upper = digest(3).toUpperCase()
  for (const k of [upper, 'abc', '', `${digest(4).slice(0, 63)}g`]) {
    assert.equal(index.has(k), false)
    assert.equal(index.add(k), true)
    assert.equal(index.has(k), true)
  }
  assert.equal(index.has(digest(3)), false, 'lower case is another key')
  assert.equal(index.size, 4)
})

test('memory follows the entries: pages are added as it grows, never a doubled copy of everything', () => {
  const index = new DigestIndex(3)
  const n = 300_000
  for (let i = 0; i < n; i++) index.add(digest(i), i, 2 * i, 2 ** 32 - 2 - i)
  for (let i = 0; i < n; i += 997) assert.deepEqual([index.get(digest(i), 0), index.get(digest(i), 1), index.get(digest(i), 2)], [i, 2 * i, 2 ** 32 - 2 - i])
  // 28 bytes of entry each (16 of digest, 3 numbers of 4), less than a page to spare, and a table of at most 8 bytes each.
  const bound = (n + 65_536) * 28 + n * 8
  assert.ok(index.bytes <= bound, `${index.bytes} bytes for ${n} entries (bound ${bound})`)
})
