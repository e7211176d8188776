import assert from 'node:assert/strict'
import { test } from 'node:test'
import { headerPairsFromRaw, headerValue } from './header-pairs.ts'

test('raw header lists become ordered pairs; Buffers decode as latin1 so the bytes survive a round trip', () => {
  const raw = [Buffer.from('Set-Cookie'), Buffer.from('a=1'), 'Set-Cookie', 'b=2', Buffer.from([0x58, 0x2d, 0x4e]), Buffer.from([0x63, 0xe9])]
  const pairs = headerPairsFromRaw(raw)
  assert.deepEqual(pairs, [
    ['Set-Cookie', 'a=1'],
    ['Set-Cookie', 'b=2'],
    ['X-N', 'c\u00e9'],
  ])
  assert.deepEqual(Buffer.from(pairs[2]?.[1] ?? '', 'latin1'), Buffer.from([0x63, 0xe9]))
  assert.deepEqual(headerPairsFromRaw(null), [])
  assert.equal(headerValue(pairs, 'set-cookie'), 'a=1')
})
