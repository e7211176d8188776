/**
 * Durability fsync (store/durability.ts): an append of an fsync recording is confirmed only after its group's
 * synced batch, which is what records the log's synced length (synced.json, store-files.ts); a default append
 * is not synced. What a sync does for a power cut cannot be shown without cutting one: e2e/durability.test.ts
 * counts the syscalls of a recording proxy.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { bodyFromBytes, ErrorCodes, type Exchange, isToolReplayError, TRACE_FORMAT_VERSION } from '../trace/index.ts'
import { DURABILITY_LEVELS, parseDurability } from './durability.ts'
import { jsonExchange } from './fixtures/exchanges.ts'
import { openStore } from './level-store.ts'

const root = await mkdtemp(join(tmpdir(), 'tr-durability-'))
after(() => rm(root, { recursive: true, force: true }))

/** The synced length synced.json records, and the newest log's length now. */
async function syncedAndLog(dir: string): Promise<{ synced: number | undefined; log: number }> {
  const logs = (await readdir(dir)).filter((f) => f.endsWith('.log')).sort()
  const log = (await stat(join(dir, logs.at(-1) as string))).size
  const text = await readFile(join(dir, 'synced.json'), 'utf8').catch(() => undefined)
  return { synced: text === undefined ? undefined : (JSON.parse(text) as { bytes: number }).bytes, log }
}

test('parseDurability: the levels, the default, and a typed error naming them', () => {
  assert.deepEqual([...DURABILITY_LEVELS], ['write', 'fsync'])
  assert.equal(parseDurability(undefined), 'write')
  assert.equal(parseDurability('fsync'), 'fsync')
  for (const bad of ['sync', 'FSYNC', 1, true]) {
    assert.throws(
      () => parseDurability(bad),
      (err: unknown) => isToolReplayError(err, ErrorCodes.INVALID_OPTION) && /"write" or "fsync"/.test(err.message),
    )
  }
})

test('an fsync recording confirms each append after a synced batch; a default one does not sync', async () => {
  const dir = join(root, 'levels')
  const store = await openStore(dir)
  await assert.rejects(store.beginTrace({ name: 'bad', format: TRACE_FORMAT_VERSION }, { durability: 'always' as never }), (err: unknown) =>
    isToolReplayError(err, ErrorCodes.INVALID_OPTION),
  )
  const plain = await store.beginTrace({ name: 'plain', format: TRACE_FORMAT_VERSION })
  for (let i = 0; i < 5; i++) {
    const x = jsonExchange(i, i, 'plain')
    await plain.append(x.exchange, x.bodies)
  }
  const before = await syncedAndLog(dir)
  assert.ok(before.synced === undefined || before.synced < before.log, `default appends are not synced (${JSON.stringify(before)})`)

  const synced = await store.beginTrace({ name: 'synced', format: TRACE_FORMAT_VERSION }, { durability: 'fsync' })
  for (let i = 0; i < 5; i++) {
    const x = jsonExchange(i, 100 + i, 'synced')
    await synced.append(x.exchange, x.bodies)
    const now = await syncedAndLog(dir)
    assert.equal(now.synced, now.log, `append #${i} was confirmed after its batch was synced`)
  }
  // Appends of both recordings in one group: the group is synced for the one that asks.
  const a = jsonExchange(5, 5, 'plain')
  const b = jsonExchange(5, 105, 'synced')
  await Promise.all([plain.append(a.exchange, a.bodies), synced.append(b.exchange, b.bodies)])
  const both = await syncedAndLog(dir)
  assert.equal(both.synced, both.log)
  await synced.close()
  await plain.close()
  assert.equal((await store.readTrace('synced')).exchanges.length, 6)
  await store.close()
})

test('an fsync recording stores big bodies (pieces put with the exchange, streamed before it, and shared) whole', async () => {
  const dir = join(root, 'pieces')
  const store = await openStore(dir)
  const rec = await store.beginTrace({ name: 'big', format: TRACE_FORMAT_VERSION }, { durability: 'fsync' })
  const piecey = bodyFromBytes(randomBytes(40 * 1024))
  const streamedBytes = randomBytes(2 * 1024 * 1024 + 5)
  const writer = rec.bodyWriter()
  writer.write(streamedBytes)
  const streamed = await writer.finish()
  const exchange = (seq: number, digest: string, size: number): Exchange => ({
    seq,
    request: { method: 'GET', url: `https://api.test/big/${seq}`, headers: [], body: null },
    outcome: { kind: 'response', response: { status: 200, statusText: 'OK', headers: [], body: { digest, size, chunks: [{ size, atMs: 1 }] }, trailers: [] } },
    timing: { startMs: seq, headersMs: 1 },
  })
  await rec.append(exchange(0, piecey.ref.digest, piecey.ref.size), new Map([[piecey.ref.digest, piecey.bytes]]))
  await rec.append(exchange(1, streamed.digest, streamedBytes.byteLength), new Map(), new Map([[streamed.digest, streamed.manifest]]))
  // Already stored: referenced again, its pieces are synced again (another recording may have written them unsynced).
  await rec.append(exchange(2, piecey.ref.digest, piecey.ref.size), new Map())
  const now = await syncedAndLog(dir)
  assert.equal(now.synced, now.log)
  await rec.close()
  const back = await store.readTrace('big')
  assert.deepEqual(Buffer.from(back.bodies.get(streamed.digest) as Uint8Array), streamedBytes)
  assert.deepEqual(back.bodies.get(piecey.ref.digest), piecey.bytes)
  await store.close()
})
