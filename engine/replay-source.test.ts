import assert from 'node:assert/strict'
import { test } from 'node:test'
import { createMemoryStore, type TraceReader, type TraceStore } from '../store/index.ts'
import { bodyFromBytes, type Exchange, IDENTITY_RULES, type Trace } from '../trace/index.ts'
import type { PlaybackChunk } from './decision.ts'
import type { Take } from './replay-index.ts'
import { openReplaySource, playbackOf } from './replay-source.ts'

const enc = new TextEncoder()
const BIG = 65 * 1024 * 1024

/** 40 small JSON answers and one of 65 MiB: few exchanges, but more body bytes than replay holds. */
function bigBodiedTrace(): Trace {
  const bodies = new Map<string, Uint8Array>()
  const exchanges: Exchange[] = []
  const answer = (seq: number, path: string, bytes: Uint8Array): Exchange => {
    const b = bodyFromBytes(bytes)
    bodies.set(b.ref.digest, b.bytes)
    return {
      seq,
      request: { method: 'GET', url: `http://api.test${path}`, headers: [], body: null },
      outcome: { kind: 'response', response: { status: 200, statusText: 'OK', headers: [], trailers: [], body: b.ref } },
      timing: { startMs: seq, headersMs: 1 },
    }
  }
  for (let i = 0; i < 40; i++) exchanges.push(answer(i, `/small/${i}`, enc.encode(JSON.stringify({ i }))))
  exchanges.push(answer(40, '/big', new Uint8Array(BIG).fill(7)))
  return { meta: { name: 't', format: 1 }, exchanges, bodies }
}

/** The store, counting what its trace reader is asked per request. */
async function countingStore(): Promise<{ store: TraceStore; asked: Record<string, number> }> {
  const store = createMemoryStore()
  await store.putTrace(bigBodiedTrace())
  const asked: Record<string, number> = { lookup: 0, exchange: 0, bodyPieces: 0 }
  const openTrace = store.openTrace.bind(store)
  store.openTrace = async (name, selector) => {
    const reader = await openTrace(name, selector)
    for (const method of ['lookup', 'exchange', 'bodyPieces'] as const) {
      const original = (reader[method] as (...args: unknown[]) => unknown).bind(reader)
      ;(reader as unknown as Record<string, unknown>)[method] = (...args: unknown[]) => {
        asked[method] = (asked[method] ?? 0) + 1
        return original(...args)
      }
    }
    return reader as TraceReader
  }
  return { store, asked }
}

const get = (path: string) => ({ method: 'GET', url: `http://api.test${path}`, headers: [], body: null })

async function played(chunks: PlaybackChunk[] | AsyncIterable<PlaybackChunk>): Promise<number[]> {
  const sizes: number[] = []
  for await (const c of chunks) sizes.push(c.bytes.byteLength)
  return sizes
}

test('a trace of few exchanges with big bodies is looked up in memory; only the big body is read from the store when played', async () => {
  const { store, asked } = await countingStore()
  const source = await openReplaySource(store, 't', {}, 'auto')
  // What the requests cost from here (opening read the small bodies once).
  for (const k of Object.keys(asked)) asked[k] = 0
  for (let i = 0; i < 40; i++) {
    const take = source.index.take(get(`/small/${i}`))
    assert.ok(!(take instanceof Promise), `request ${i} waited on the store to be looked up`)
    assert.equal(take.kind, 'match')
    if (take.kind !== 'match') return
    const playback = playbackOf(source, 't', take.exchange, () => {})
    assert.ok(Array.isArray(playback.chunks), `the answer to request ${i} was not held`)
    assert.deepEqual(await played(playback.chunks), [JSON.stringify({ i }).length])
  }
  const take = await source.index.take(get('/big'))
  assert.equal(take.kind, 'match')
  if (take.kind !== 'match') return
  const sizes = await played(playbackOf(source, 't', take.exchange, () => {}).chunks)
  assert.equal(
    sizes.reduce((n, s) => n + s, 0),
    BIG,
  )
  assert.deepEqual(asked, { lookup: 0, exchange: 0, bodyPieces: 1 })
  await store.close()
})

test("preload: 'none' still reads the same trace through the store per request", async () => {
  const { store, asked } = await countingStore()
  const source = await openReplaySource(store, 't', {}, 'none')
  const take = source.index.take(get('/small/3'))
  assert.ok(take instanceof Promise)
  assert.equal((await take).kind, 'match')
  assert.equal(asked.lookup, 1)
  assert.equal(asked.exchange, 1)
  await store.close()
})

test('request bodies too big to hold together send the trace back to the store index, so memory stays bounded', async () => {
  const store = createMemoryStore()
  const bodies = new Map<string, Uint8Array>()
  const exchanges: Exchange[] = [0, 1].map((seq) => {
    const upload = bodyFromBytes(new Uint8Array(40 * 1024 * 1024).fill(seq + 1))
    const answer = bodyFromBytes(enc.encode('{"ok":true}'))
    bodies.set(upload.ref.digest, upload.bytes)
    bodies.set(answer.ref.digest, answer.bytes)
    return {
      seq,
      request: { method: 'POST', url: `http://api.test/upload/${seq}`, headers: [['content-type', 'application/octet-stream']], body: upload.ref },
      outcome: { kind: 'response', response: { status: 200, statusText: 'OK', headers: [], trailers: [], body: answer.ref } },
      timing: { startMs: seq, headersMs: 1 },
    }
  })
  await store.putTrace({ meta: { name: 'uploads', format: 1 }, exchanges, bodies })
  const source = await openReplaySource(store, 'uploads', {}, 'auto')
  assert.equal(source.bodies.size, 0, 'no body held: 80 MiB of uploads is over the budget')
  const take = source.index.take({
    method: 'POST',
    url: 'http://api.test/upload/1',
    headers: [['content-type', 'application/octet-stream']],
    body: new Uint8Array(40 * 1024 * 1024).fill(2),
  })
  assert.ok(take instanceof Promise, 'looked up through the store index')
  assert.equal((await take).kind, 'match')
  await store.close()
})

test("a trace the store indexed is looked up by the store's identity keys, not identities computed again as it opens", async () => {
  const store = createMemoryStore()
  const ok = bodyFromBytes(enc.encode('{}'))
  const at = (seq: number, url: string): Exchange => ({
    seq,
    request: { method: 'GET', url, headers: [], body: null },
    outcome: { kind: 'response', response: { status: 200, statusText: 'OK', headers: [], trailers: [], body: ok.ref } },
    timing: { startMs: seq, headersMs: 1 },
  })
  await store.putTrace({
    meta: { name: 't', format: 1 },
    exchanges: [at(0, 'http://api.test/a'), at(1, 'http://api.test/q?a=1&b=2')],
    bodies: new Map([[ok.ref.digest, ok.bytes]]),
  })
  // The key the store holds for /q is replaced: only an index that reads the store's keys is misled by it.
  const openTrace = store.openTrace.bind(store)
  let asked = 0
  store.openTrace = async (name, selector) => {
    const reader = await openTrace(name, selector)
    const keys = reader.identityKeys.bind(reader)
    reader.identityKeys = async function* () {
      asked++
      for await (const [key, seqs] of keys()) yield [seqs.includes(1) ? 'f'.repeat(64) : key, seqs]
    }
    return reader
  }
  const source = await openReplaySource(store, 't', {}, 'auto')
  assert.equal(asked, 1)
  const take = (url: string) => source.index.take({ method: 'GET', url, headers: [], body: null }) as Take
  assert.equal(take('http://api.test/a').kind, 'match')
  // The same request as recorded is found by its bytes; one whose query is in another order has its identity
  // computed, which is not the (replaced) key the store gave: a miss, whose candidates are computed when asked.
  assert.equal(take('http://api.test/q?a=1&b=2').kind, 'match')
  const miss = take('http://api.test/q?b=2&a=1')
  assert.ok(miss.kind === 'miss')
  assert.deepEqual(
    (await source.index.candidates(miss.parts)).map((c) => c.request),
    ['GET http://api.test/q?a=1&b=2', 'GET http://api.test/a'],
  )
  // Identity options the store's index was not made with: every identity is computed here, as before.
  const custom = await openReplaySource(store, 't', { ignoreQueryParams: ['zzz'] }, 'auto')
  assert.equal(asked, 1)
  assert.equal((custom.index.take({ method: 'GET', url: 'http://api.test/q?b=2&a=1', headers: [], body: null }) as Take).kind, 'match')
  // Nor an index made by other identity rules (a store written before they were kept, or by other versions).
  for (const rules of [undefined, IDENTITY_RULES + 1]) {
    const older = store.openTrace.bind(store)
    store.openTrace = async (name, selector) => {
      const reader = await older(name, selector)
      ;(reader.info as { identityRules?: number }).identityRules = rules
      return reader
    }
    const stale = await openReplaySource(store, 't', {}, 'auto')
    store.openTrace = older
    assert.equal(asked, 1)
    assert.equal((stale.index.take({ method: 'GET', url: 'http://api.test/q?b=2&a=1', headers: [], body: null }) as Take).kind, 'match')
  }
})
