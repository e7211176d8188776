import assert from 'node:assert/strict'
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { Level } from 'level'
import { ErrorCodes, isToolReplayError, type Trace } from '../trace/index.ts'
import { jsonExchange, jsonTrace } from './fixtures/exchanges.ts'
import { runTraceStoreContract } from './fixtures/trace-store-contract.ts'
import { storeKeys } from './level-backend.ts'
import { openStore, storeSocketPath } from './level-store.ts'
import type { TraceStore } from './trace-store.ts'

const root = await mkdtemp(join(tmpdir(), 'tr-store-'))
after(() => rm(root, { recursive: true, force: true }))
let n = 0
const freshDir = () => join(root, `s${++n}`)

runTraceStoreContract('level', async () => ({ store: await openStore(freshDir()) }))

async function rawKeys(dir: string, prefix: string): Promise<string[]> {
  const db = new Level<string, Uint8Array>(dir, { valueEncoding: 'view' })
  const keys: string[] = []
  for await (const k of db.keys({ gte: prefix, lt: `${prefix.slice(0, -1)}"` })) keys.push(k)
  await db.close()
  return keys
}

/** A store holding `trace`, changed behind its back by `tamper` on the raw LevelDB, then opened again. */
async function storedThenTampered(trace: Trace, tamper: (db: Level<string, Uint8Array>) => Promise<unknown>): Promise<TraceStore> {
  const dir = freshDir()
  const store = await openStore(dir)
  await store.putTrace(trace)
  await store.close()
  const db = new Level<string, Uint8Array>(dir, { valueEncoding: 'view' })
  await tamper(db)
  await db.close()
  return openStore(dir)
}

describe('LevelDB store', () => {
  test('importing a big trace leaves no giant log for the next open to replay (it is written in bounded batches)', async () => {
    const dir = freshDir()
    const store = await openStore(dir)
    // About 40 MB of exchanges and bodies: one batch would put all of it in the write-ahead log.
    await store.putTrace(jsonTrace('huge', 60_000, 'x'.repeat(300)))
    await store.close()
    const { readdir } = await import('node:fs/promises')
    const logs = (await readdir(dir)).filter((f) => f.endsWith('.log'))
    for (const log of logs) {
      const size = (await stat(join(dir, log))).size
      assert.ok(size < 16 * 1024 * 1024, `${log} is ${(size / 1024 / 1024).toFixed(1)} MB`)
    }
    const again = await openStore(dir)
    assert.equal((await again.readTrace('huge')).exchanges.length, 60_000)
    await again.close()
  })

  test('a new store directory is private to its user (0700)', async () => {
    const dir = join(freshDir(), 'nested', 'store')
    const store = await openStore(dir)
    await store.close()
    assert.equal((await stat(dir)).mode & 0o777, 0o700)
  })

  test('bodies are stored once however many traces and exchanges share them', async () => {
    const dir = freshDir()
    const store = await openStore(dir)
    await store.putTrace(jsonTrace('a', 4, 'same'))
    await store.putTrace(jsonTrace('b', 4, 'same'))
    const rec = await store.beginTrace({ name: 'c', format: 1 })
    for (let i = 0; i < 4; i++) {
      const x = jsonExchange(i, i, 'same')
      await rec.append(x.exchange, x.bodies)
    }
    await rec.close()
    await store.close()
    // 4 request bodies + 4 response bodies, shared by all three traces.
    assert.equal((await rawKeys(dir, 'b!')).length, 8)
  })

  test('re-recording deletes the replaced trace at close, in the same batch', async () => {
    const dir = freshDir()
    const store = await openStore(dir)
    await store.putTrace(jsonTrace('r', 3))
    const oldId = (await store.listTraces())[0]!.id
    const rec = await store.beginTrace({ name: 'r', format: 1 })
    const x = jsonExchange(0, 5)
    await rec.append(x.exchange, x.bodies)
    await store.close()
    assert.equal((await rawKeys(dir, `x!${oldId}!`)).length, 3, 'old trace kept while the recording is open')
    const again = await openStore(dir)
    // The recording was abandoned, but its process (this one) lives: listed as recording; the old trace still answers.
    assert.deepEqual((await again.listTraces()).map((s) => s.status).sort(), ['complete', 'recording'])
    assert.equal((await again.readTrace('r')).exchanges.length, 3)
    const rec2 = await again.beginTrace({ name: 'r', format: 1 })
    await rec2.append(x.exchange, x.bodies)
    await rec2.close()
    assert.deepEqual((await again.readTrace('r')).exchanges, [x.exchange])
    await again.close()
    assert.deepEqual(await rawKeys(dir, `x!${oldId}!`), [], 'old trace deleted once the new one closed')
    assert.deepEqual(await rawKeys(dir, `m!${oldId}`), [])
  })

  test('an unparseable value is TR_STORE_CORRUPT naming the store and the key', async () => {
    const dir = freshDir()
    const store = await openStore(dir)
    await store.putTrace(jsonTrace('bad', 2))
    const id = (await store.listTraces())[0]!.id
    await store.close()
    const key = storeKeys.exchange(id, 1)
    const db = new Level<string, string>(dir)
    await db.put(key, '{"seq": 1, "request": ')
    await db.close()
    const again = await openStore(dir)
    await assert.rejects(again.readTrace('bad'), (err: unknown) => {
      assert.ok(isToolReplayError(err, ErrorCodes.STORE_CORRUPT))
      assert.match(err.message, new RegExp(`store at ${dir} is damaged at key "${key}"`))
      assert.match(err.message, /re-record or re-import/)
      return true
    })
    await again.close()
  })

  test('a missing body is TR_STORE_CORRUPT', async () => {
    const trace = jsonTrace('nobody', 1)
    const digest = trace.exchanges[0]!.request.body!.digest
    const again = await storedThenTampered(trace, (db) => db.del(storeKeys.body(digest)))
    await assert.rejects(again.readTrace('nobody'), (err: unknown) => isToolReplayError(err, ErrorCodes.STORE_CORRUPT) && err.message.includes(digest))
    await again.close()
  })

  test('reading a trace whole names its first damaged body in trace order, whichever read finished first', async () => {
    const trace = jsonTrace('damaged', 200)
    // Bodies are asked for many at a time: two in the first window (the later one first), one in a later window.
    const digests = [20, 150, 3].map((i) => {
      const { outcome } = trace.exchanges[i]!
      assert.equal(outcome.kind, 'response')
      return (outcome as Extract<typeof outcome, { kind: 'response' }>).response.body.digest
    })
    const tampered = new TextEncoder().encode('{"tampered":true}')
    const again = await storedThenTampered(trace, async (db) => {
      for (const digest of digests) await db.put(storeKeys.body(digest), tampered)
    })
    await assert.rejects(
      again.readTrace('damaged'),
      (err: unknown) =>
        isToolReplayError(err, ErrorCodes.STORE_CORRUPT) && err.message.includes('exchange #3 response') && err.message.includes(digests[2] as string),
    )
    await again.close()
  })

  test('a path that is not a LevelDB directory is TR_STORE_IO', async () => {
    const file = join(root, 'not-a-dir')
    await writeFile(file, 'hello')
    await assert.rejects(openStore(file), (err: unknown) => isToolReplayError(err, ErrorCodes.STORE_IO) && err.message.includes(file))
  })

  test('a store locked by a process that does not serve it is TR_STORE_LOCKED after the timeout', async () => {
    const dir = freshDir()
    const foreign = new Level(dir)
    await foreign.open()
    const started = Date.now()
    await assert.rejects(openStore(dir, { acquireTimeoutMs: 300 }), (err: unknown) => {
      assert.ok(isToolReplayError(err, ErrorCodes.STORE_LOCKED), String(err))
      assert.match(err.message, new RegExp(`store at ${dir} is locked by another process`))
      return true
    })
    assert.ok(Date.now() - started >= 300)
    await foreign.close()
    const store = await openStore(dir)
    await store.close()
  })

  test('a stale socket file from a killed owner is replaced', async () => {
    const dir = freshDir()
    await (await openStore(dir)).close()
    await writeFile(storeSocketPath(dir), 'stale')
    const store = await openStore(dir)
    await store.putTrace(jsonTrace('after-stale', 1))
    const { runWorker } = await import('./fixtures/run-worker.ts')
    assert.deepEqual(JSON.parse(await runWorker([dir, 'read', '-', '0'])).read, { 'after-stale': 1 })
    await store.close()
  })

  test('two openStore calls in one process share the store', async () => {
    const dir = freshDir()
    const a = await openStore(dir)
    const b = await openStore(dir)
    await a.putTrace(jsonTrace('shared', 1))
    await a.close()
    assert.equal(await b.hasTrace('shared'), true)
    await b.close()
  })

  test('the socket moves to the temp dir when the store path is too long for a Unix socket', () => {
    const long = join(root, 'x'.repeat(120))
    assert.ok(storeSocketPath(long).startsWith(tmpdir()))
    assert.equal(storeSocketPath(long), storeSocketPath(`${long}/`))
    assert.equal(storeSocketPath(join(root, 'short')), join(root, 'short', 'store.sock'))
  })

  test('a store at a long path still serves a second process', async () => {
    const dir = join(root, 'y'.repeat(110))
    const store = await openStore(dir)
    await store.putTrace(jsonTrace('long', 2))
    // Served through the temp-dir socket: a child process reads it while we own it.
    const { runWorker } = await import('./fixtures/run-worker.ts')
    const out = await runWorker([dir, 'read', '-', '0'])
    assert.deepEqual(JSON.parse(out).read, { long: 2 })
    await store.close()
  })
})
