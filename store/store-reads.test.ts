import assert from 'node:assert/strict'
import { test } from 'node:test'
import { type KvRead, StoreReads, storeKeys } from './store-reads.ts'

const enc = new TextEncoder()

/** A key-value reader over a map, recording the keys asked for. */
function kv(entries: Record<string, string>): { reader: KvRead; asked: string[] } {
  const asked: string[] = []
  return {
    asked,
    reader: {
      get: async (key) => {
        asked.push(key)
        return key in entries ? enc.encode(entries[key]) : undefined
      },
      scan: async () => {},
    },
  }
}

const manifest = { size: 20_000, pieces: [{ sha256: 'a'.repeat(64), size: 20_000 }] }

test('a body known to be over the inline size is read from its manifest in one get; without the size, both keys as before', async () => {
  const big = kv({ [storeKeys.manifest('d1')]: JSON.stringify(manifest) })
  const reads = new StoreReads('/store', big.reader, '/store/pieces')
  assert.deepEqual(await reads.body('d1', 20_000), { kind: 'pieces', manifest })
  assert.deepEqual(big.asked, [storeKeys.manifest('d1')])
  big.asked.length = 0
  assert.deepEqual(await reads.body('d1'), { kind: 'pieces', manifest })
  assert.deepEqual(big.asked, [storeKeys.body('d1'), storeKeys.manifest('d1')])
})

test('a size hint that is wrong still finds the body (stored inline), and a missing body is undefined', async () => {
  const small = kv({ [storeKeys.body('d2')]: 'hello' })
  const reads = new StoreReads('/store', small.reader, '/store/pieces')
  const got = await reads.body('d2', 20_000)
  assert.equal(got?.kind, 'bytes')
  assert.equal(got?.kind === 'bytes' && new TextDecoder().decode(got.bytes), 'hello')
  assert.equal(await reads.body('missing', 20_000), undefined)
  assert.equal(await reads.body('missing'), undefined)
})
