/**
 * Several processes on one store directory: concurrent recorders, a reader beside an owner, owner
 * hand-over, and recorders killed with SIGKILL mid-write.
 */
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { bodyFromBytes } from '../trace/index.ts'
import { jsonExchange, jsonTrace } from './fixtures/exchanges.ts'
import { runWorker, spawnWorker } from './fixtures/run-worker.ts'
import { openStore } from './level-store.ts'

const root = await mkdtemp(join(tmpdir(), 'tr-procs-'))
after(() => rm(root, { recursive: true, force: true }))

/** mulberry32: a tiny seeded PRNG, so a failing kill schedule can be replayed. */
function seeded(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** Every exchange of every complete trace decodes whole: right seq order, bodies present and matching. */
async function assertWhole(dir: string): Promise<void> {
  const store = await openStore(dir)
  try {
    for (const s of await store.listTraces()) {
      if (s.status !== 'complete') continue
      const t = await store.readTrace(s.name)
      t.exchanges.forEach((x, i) => {
        assert.equal(x.seq, i, `${s.name}: exchanges in seq order without gaps`)
        assert.equal(x.outcome.kind, 'response')
        if (x.outcome.kind === 'response') assert.ok(t.bodies.has(x.outcome.response.body.digest))
        assert.ok(x.request.body && t.bodies.has(x.request.body.digest))
      })
    }
  } finally {
    await store.close()
  }
}

describe('LevelDB store across processes', () => {
  test('4 processes record different traces into one store at once, and read it meanwhile', async () => {
    const dir = join(root, 'four')
    const outs = await Promise.all([0, 1, 2, 3].map((i) => runWorker([dir, 'record', `w${i}`, '40'])))
    for (const out of outs) assert.deepEqual(JSON.parse(out), { ok: true, exchanges: 40 })
    const store = await openStore(dir)
    const list = await store.listTraces()
    assert.deepEqual(
      list.map((s) => [s.name, s.status, s.exchanges]),
      [0, 1, 2, 3].map((i) => [`w${i}`, 'complete', 40]),
    )
    for (let i = 0; i < 4; i++) {
      const t = await store.readTrace(`w${i}`)
      assert.deepEqual(
        t.exchanges,
        Array.from({ length: 40 }, (_, j) => jsonExchange(j, j, j % 2 === 0 ? 'shared' : `w${i}`).exchange),
      )
    }
    await store.close()
  })

  test('a second process reads the store while this one owns it', async () => {
    const dir = join(root, 'reader')
    const store = await openStore(dir)
    await store.putTrace(jsonTrace('held', 3))
    const out = JSON.parse(await runWorker([dir, 'read', '-', '0']))
    assert.deepEqual(out.read, { held: 3 })
    await store.close()
  })

  test('a multi-megabyte trace crosses the socket intact', async () => {
    const dir = join(root, 'big')
    const store = await openStore(dir)
    const big = bodyFromBytes(new Uint8Array(6 * 1024 * 1024).map((_, i) => i % 253))
    const trace = jsonTrace('big', 1)
    const x = trace.exchanges[0]!
    if (x.outcome.kind === 'response') x.outcome.response.body = big.ref
    trace.bodies.set(big.ref.digest, big.bytes)
    await store.putTrace(trace)
    const out = JSON.parse(await runWorker([dir, 'read', '-', '0']))
    assert.deepEqual(out.read, { big: 1 })
    assert.deepEqual(out.bodyBytes, { big: 6 * 1024 * 1024 + '{"q":0}'.length })
    await store.close()
  })

  test('when the owning process closes, a client takes over and its recording carries on', async () => {
    const dir = join(root, 'handover')
    const owner = spawnWorker([dir, 'hold', '-', '400'])
    const ownerClosed = once(owner, 'close')
    await once(owner.stdout!, 'data')
    const store = await openStore(dir)
    const rec = await store.beginTrace({ name: 'carried', format: 1 })
    for (let i = 0; i < 40; i++) {
      const x = jsonExchange(i, i)
      await rec.append(x.exchange, x.bodies)
      await sleep(15)
    }
    await rec.close()
    await ownerClosed
    assert.equal(owner.exitCode, 0)
    assert.equal((await store.readTrace('carried')).exchanges.length, 40)
    await store.close()
  })

  test('when the owning process is killed, a client takes over and its recording carries on', async () => {
    const dir = join(root, 'owner-killed')
    const owner = spawnWorker([dir, 'hold', '-', '60000'])
    const ownerClosed = once(owner, 'close')
    await once(owner.stdout!, 'data')
    const store = await openStore(dir)
    const rec = await store.beginTrace({ name: 'survivor', format: 1 })
    for (let i = 0; i < 30; i++) {
      if (i === 10) owner.kill('SIGKILL')
      const x = jsonExchange(i, i)
      await rec.append(x.exchange, x.bodies)
    }
    await rec.close()
    await ownerClosed
    assert.equal((await store.readTrace('survivor')).exchanges.length, 30)
    await store.close()
  })

  test('recorders killed with SIGKILL mid-write leave a store that opens, decodes whole and shows them partial', async () => {
    const dir = join(root, 'sigkill')
    const random = seeded(20261129)
    const setup = await openStore(dir)
    await setup.putTrace(jsonTrace('victim', 5, 'before'))
    await setup.close()
    const rounds = 20
    for (let i = 0; i < rounds; i++) {
      // Odd rounds: this process owns the store and the child records as a client; even: the child owns it.
      const owner = i % 2 === 1 ? await openStore(dir) : undefined
      const child = spawnWorker([dir, 'forever', 'victim', '0'])
      const closed = once(child, 'close')
      let stderr = ''
      child.stderr!.on('data', (d) => (stderr += d))
      await once(child.stdout!, 'data')
      await sleep(20 + Math.floor(random() * 130))
      child.kill('SIGKILL')
      const [code, signal] = await closed
      assert.equal(signal, 'SIGKILL', `round ${i}: child ended by itself (${code}): ${stderr}`)
      await owner?.close()
      const store = await openStore(dir)
      const list = await store.listTraces()
      const partial = list.filter((s) => s.status === 'partial')
      assert.equal(partial.length, i + 1, `round ${i}: every interrupted recording is listed partial`)
      assert.deepEqual(
        list.filter((s) => s.status === 'complete').map((s) => [s.name, s.exchanges]),
        [['victim', 5]],
      )
      // The trace being re-recorded is still the one from before, whole.
      assert.deepEqual((await store.readTrace('victim')).exchanges, jsonTrace('victim', 5, 'before').exchanges)
      await store.close()
    }
    await assertWhole(dir)
    // Guard against a schedule that never hits a write: the kills must land mid-recording.
    const check = await openStore(dir)
    const partialExchanges = (await check.listTraces()).filter((s) => s.status === 'partial').map((s) => s.exchanges)
    await check.close()
    assert.ok(partialExchanges.filter((n) => n > 0).length >= rounds / 2, `partial traces had ${partialExchanges.join(',')} exchanges`)
  })
})
