import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { test } from 'node:test'
import { crc32c, crc32cStep } from './leveldb-format.ts'

test('crc32c gives the CRC-32C test vectors of RFC 3720 and agrees with the byte-at-a-time CRC on any range', () => {
  assert.equal(crc32c(new Uint8Array(32)), 0x8a9136aa)
  assert.equal(crc32c(new Uint8Array(32).fill(0xff)), 0x62a8ab43)
  assert.equal(crc32c(new TextEncoder().encode('123456789')), 0xe3069283)
  const bytes = new Uint8Array(randomBytes(20_000))
  for (const [start, end] of [
    [0, 0],
    [0, 7],
    [3, 11],
    [5, 4101],
    [1, 20_000],
  ] as const) {
    let crc = 0xffffffff
    for (let i = start; i < end; i++) crc = crc32cStep(crc, bytes[i] as number)
    assert.equal(crc32c(bytes, start, end), (crc ^ 0xffffffff) >>> 0, `bytes ${start}-${end}`)
  }
})
