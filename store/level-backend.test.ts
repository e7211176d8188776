import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { Level } from 'level'
import { bodyFromBytes, ErrorCodes, type Exchange, isToolReplayError, type RecordedResponse } from '../trace/index.ts'
import { jsonExchange } from './fixtures/exchanges.ts'
import { LevelBackend, storeKeys } from './level-backend.ts'
import { openStore } from './level-store.ts'
import { refsOf } from './store-ops.ts'

const root = await mkdtemp(join(tmpdir(), 'tr-backend-'))
after(() => rm(root, { recursive: true, force: true }))

test('appends sent together are committed together, and a bad one fails alone', async () => {
  const store = await openStore(join(root, 'group'))
  const rec = await store.beginTrace({ name: 'g', format: 1 })
  const good = Array.from({ length: 20 }, (_, i) => jsonExchange(i, i, 'g'))
  const bad = jsonExchange(20, 20, 'g')
  const results = await Promise.allSettled([
    ...good.map((x) => rec.append(x.exchange, x.bodies)),
    // References a body it does not pass and the store does not hold.
    rec.append(bad.exchange, new Map()),
  ])
  assert.deepEqual(
    results.slice(0, 20).map((r) => r.status),
    good.map(() => 'fulfilled'),
  )
  const last = results[20] as PromiseRejectedResult
  assert.ok(isToolReplayError(last.reason) && last.reason.code === ErrorCodes.BODY_MISSING)
  await rec.close()
  const trace = await store.readTrace('g')
  assert.deepEqual(
    trace.exchanges.map((x) => x.seq),
    good.map((x) => x.exchange.seq),
  )
  await store.close()
})

test('an append sent after close() is refused even while earlier appends are still queued', async () => {
  const store = await openStore(join(root, 'order'))
  const rec = await store.beginTrace({ name: 'o', format: 1 })
  const first = jsonExchange(0, 0, 'o')
  const late = jsonExchange(1, 1, 'o')
  const appended = rec.append(first.exchange, first.bodies)
  const closed = rec.close()
  const refused = rec.append(late.exchange, late.bodies)
  await appended
  await closed
  await assert.rejects(refused, (err: unknown) => isToolReplayError(err) && err.code === ErrorCodes.STORE_CLOSED)
  assert.deepEqual(
    (await store.readTrace('o')).exchanges.map((x) => x.seq),
    [0],
  )
  await store.close()
})

test('an import staged in seq order closes with the count it staged; staged out of order or resent, the exchanges are counted', async () => {
  const dir = join(root, 'count')
  const owner = { pid: process.pid, host: 'test' }
  const chunk = (seqs: number[]) => {
    const xs = seqs.map((s) => jsonExchange(s, s, 'c'))
    return [xs.map((x) => x.exchange), new Map(xs.flatMap((x) => [...x.bodies]))] as const
  }
  let backend = await LevelBackend.open(dir)
  await backend.beginTrace('ordered', { name: 'ordered', format: 1 }, new Date().toISOString(), owner, { recorded: false })
  await backend.appendChunk('ordered', ...chunk([0, 1]))
  await backend.appendChunk('ordered', ...chunk([2]))
  await backend.beginTrace('mixed', { name: 'mixed', format: 1 }, new Date().toISOString(), owner, { recorded: false })
  await backend.appendChunk('mixed', ...chunk([0, 2]))
  await backend.appendChunk('mixed', ...chunk([1]))
  await backend.beginTrace('resent', { name: 'resent', format: 1 }, new Date().toISOString(), owner, { recorded: false })
  await backend.appendChunk('resent', ...chunk([0, 1]))
  await backend.appendChunk('resent', ...chunk([0, 1]))
  await backend.beginTrace('stale', { name: 'stale', format: 1 }, new Date().toISOString(), owner, { recorded: false })
  await backend.appendChunk('stale', ...chunk([0, 1]))
  await backend.close()
  // An exchange key the staging never wrote: closing by a scan would count it, closing by the staged count does not.
  const db = new Level<string, string>(dir)
  await db.put(storeKeys.exchange('ordered', 7), JSON.stringify({ ...chunk([7])[0][0], seq: 7 }))
  // As a writer that does not keep `ordered` appends seq 8: the count moves, `ordered` stays as it was.
  const stale = JSON.parse(await db.get(storeKeys.meta('stale')))
  await db.put(storeKeys.meta('stale'), JSON.stringify({ ...stale, count: 9 }))
  await db.put(storeKeys.exchange('stale', 8), JSON.stringify({ ...chunk([8])[0][0], seq: 8 }))
  await db.close()
  backend = await LevelBackend.open(dir)
  const ids = ['ordered', 'mixed', 'resent', 'stale']
  for (const id of ids) await backend.closeRecording(id, { overwrite: false })
  assert.deepEqual(await Promise.all(ids.map(async (id) => (await backend.traceInfo(id))?.count)), [3, 3, 2, 3])
  await backend.close()
})

test('an import writes the small bodies it holds rather than looking for them in the store; a body it lacks, or a big one, is looked for', async (t) => {
  // Every lookup reads a block of a table, and LevelDB keeps the tables it reads mapped (a million-exchange
  // import peaked 140 MB higher with them): the keys the store is asked about are counted here.
  const asked: string[] = []
  type Lookups = { hasMany: (keys: string[], o?: unknown) => Promise<boolean[]> }
  let owner = Level.prototype as unknown as Lookups
  while (!Object.hasOwn(owner, 'hasMany')) owner = Object.getPrototypeOf(owner)
  const hasMany = owner.hasMany
  owner.hasMany = function (this: unknown, keys: string[], o?: unknown) {
    asked.push(...keys)
    return hasMany.call(this, keys, o)
  }
  t.after(() => {
    owner.hasMany = hasMany
  })
  const dir = join(root, 'lookups')
  let backend = await LevelBackend.open(dir)
  const begin = (id: string) =>
    backend.beginTrace(id, { name: id, format: 1 }, new Date().toISOString(), { pid: process.pid, host: 'test' }, { recorded: false })
  const small = [jsonExchange(0, 0, 's'), jsonExchange(1, 1, 's')]
  // The second time into a store that holds them: written again, the same bytes under the same keys.
  for (const id of ['first', 'again']) {
    await begin(id)
    await backend.appendChunk(
      id,
      small.map((x) => x.exchange),
      new Map(small.flatMap((x) => [...x.bodies])),
    )
    assert.equal(asked.length, 0, `${id}: small bodies in hand are written, not looked for`)
  }
  // A body it lacks (stored by the first import: reopened, so this process does not know that) and a big one are looked for.
  await backend.close()
  backend = await LevelBackend.open(dir)
  const lacking = jsonExchange(2, 0, 's')
  const big = bodyFromBytes(new Uint8Array(8192).fill(7))
  const bigX: Exchange = {
    ...lacking.exchange,
    seq: 3,
    outcome: { kind: 'response', response: { ...(lacking.exchange.outcome as { response: RecordedResponse }).response, body: big.ref } },
  }
  await begin('third')
  await backend.appendChunk('third', [lacking.exchange, bigX], new Map([[big.ref.digest, big.bytes]]))
  assert.deepEqual(
    asked.filter((k) => k.startsWith('b!')).sort(),
    [...new Set([...lacking.bodies.keys(), big.ref.digest])].map((d) => storeKeys.body(d)).sort(),
  )
  for (const id of ['first', 'again', 'third']) await backend.closeRecording(id, { overwrite: false })
  for (const id of ['first', 'again', 'third']) {
    for (const x of await backend.exchanges(id, 0, 10)) {
      for (const digest of refsOf(x)) assert.equal((await backend.body(digest))?.kind, 'bytes', `${id} #${x.seq}: body ${digest} reads back`)
    }
  }
  await backend.close()
})
