/**
 * The behaviour every TraceStore backend must have, as a node:test suite (after abstract-level's
 * `test/index.js`). A backend's test file calls `runTraceStoreContract` with a factory of fresh stores.
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { bodyFromBytes, computeIdentity, ErrorCodes, type Exchange, isToolReplayError, type Trace } from '../trace/index.ts'
import { faultedExchange, jsonExchange, jsonTrace } from './fixtures/exchanges.ts'
import type { TraceStore } from './trace-store.ts'

/** A fresh, empty store, and how to dispose of it once the store is closed. */
export type MakeStore = () => Promise<{ store: TraceStore; cleanup?: () => Promise<void> }>

const code = (c: string) => (err: unknown) => isToolReplayError(err) && err.code === c

/** Runs the TraceStore contract against `makeStore`. */
export function runTraceStoreContract(name: string, makeStore: MakeStore): void {
  const withStore = (fn: (store: TraceStore) => Promise<void>) => async () => {
    const { store, cleanup } = await makeStore()
    try {
      await fn(store)
    } finally {
      await store.close()
      await cleanup?.()
    }
  }

  describe(`TraceStore contract: ${name}`, () => {
    test(
      'an empty store lists nothing and names what is missing',
      withStore(async (store) => {
        assert.deepEqual(await store.listTraces(), [])
        assert.equal(await store.hasTrace('nope'), false)
        await assert.rejects(store.readTrace('nope'), (err: unknown) => code(ErrorCodes.TRACE_NOT_FOUND)(err) && /"nope"/.test((err as Error).message))
        assert.equal(await store.deleteTrace('nope'), false)
      }),
    )

    test(
      'an append refused for a missing body stores nothing of it: a later append of the same request body stores that body',
      withStore(async (store) => {
        const x = jsonExchange(0, 77)
        const responseDigest = x.exchange.outcome.kind === 'response' ? x.exchange.outcome.response.body.digest : ''
        const partial = new Map([...x.bodies].filter(([digest]) => digest !== responseDigest))
        const broken = await store.beginTrace({ name: 'broken', format: 1 })
        await assert.rejects(broken.append(x.exchange, partial), (err: unknown) => isToolReplayError(err))
        const rec = await store.beginTrace({ name: 'whole', format: 1 })
        await rec.append(x.exchange, x.bodies)
        await rec.close()
        const trace = await store.readTrace('whole')
        for (const [k, v] of x.bodies) assert.deepEqual(trace.bodies.get(k), v)
      }),
    )

    test(
      'a faulted exchange keeps its fault record and the body only the upstream sent, recorded and put whole',
      withStore(async (store) => {
        const f = faultedExchange(0)
        // Without the upstream's body the exchange is refused, as for any missing body.
        const missing = new Map(f.bodies)
        missing.delete(f.exchange.fault?.upstream?.kind === 'response' ? f.exchange.fault.upstream.response.body.digest : '')
        const broken = await store.beginTrace({ name: 'faulted-broken', format: 1 })
        await assert.rejects(broken.append(f.exchange, missing), (err: unknown) => isToolReplayError(err))
        const rec = await store.beginTrace({ name: 'faulted', format: 1 })
        await rec.append(f.exchange, f.bodies)
        await rec.close()
        const trace = await store.readTrace('faulted')
        assert.deepEqual(trace.exchanges, [f.exchange])
        for (const [k, v] of f.bodies) assert.deepEqual(trace.bodies.get(k), v)
        await store.putTrace({ ...trace, meta: { name: 'faulted-copy', format: 1 } })
        const copy = await store.readTrace('faulted-copy')
        assert.deepEqual(copy.exchanges, [f.exchange])
        for (const [k, v] of f.bodies) assert.deepEqual(copy.bodies.get(k), v)
      }),
    )

    test(
      'a recording is "recording" until close, then complete and readable in seq order',
      withStore(async (store) => {
        const rec = await store.beginTrace({ name: 'a', format: 1 })
        assert.equal(rec.name, 'a')
        const xs = [jsonExchange(0, 10), jsonExchange(1, 11), jsonExchange(2, 12)]
        for (const x of xs) await rec.append(x.exchange, x.bodies)
        assert.equal(await store.hasTrace('a'), false)
        let list = await store.listTraces()
        assert.equal(list.length, 1)
        assert.equal(list[0]?.status, 'recording', 'a live process is still writing it')
        assert.equal(list[0]?.exchanges, 3)
        assert.equal(list[0]?.id, rec.id)
        await rec.close()
        await rec.close() // idempotent
        list = await store.listTraces()
        assert.deepEqual(
          list.map((s) => [s.name, s.status, s.exchanges]),
          [['a', 'complete', 3]],
        )
        const trace = await store.readTrace('a')
        assert.deepEqual(trace.meta, { name: 'a', format: 1 })
        assert.deepEqual(
          trace.exchanges,
          xs.map((x) => x.exchange),
        )
        assert.equal(trace.bodies.size, 6)
        for (const x of xs) for (const [k, v] of x.bodies) assert.deepEqual(trace.bodies.get(k), v)
      }),
    )

    test(
      'appends out of seq order (and a resent one) read back in seq order, each identity listing its seqs once, in order',
      withStore(async (store) => {
        const rec = await store.beginTrace({ name: 'unordered', format: 1 })
        const xs = [4, 0, 2, 2, 1].map((seq) => jsonExchange(seq, 7))
        for (const x of xs) await rec.append(x.exchange, x.bodies)
        await rec.close()
        const reader = await store.openTrace('unordered')
        const seqs: number[] = []
        for await (const x of reader.exchanges()) seqs.push(x.seq)
        assert.deepEqual(seqs, [0, 1, 2, 4])
        const first = xs[0] as (typeof xs)[number]
        const reqBody = first.bodies.get(first.exchange.request.body?.digest as string) ?? null
        const { key } = computeIdentity({ ...first.exchange.request, body: reqBody })
        assert.deepEqual(await reader.lookup(key), [0, 1, 2, 4])
      }),
    )

    test(
      're-recording keeps the old trace readable until the new recording closes',
      withStore(async (store) => {
        await store.putTrace(jsonTrace('r', 2, 'old'))
        const rec = await store.beginTrace({ name: 'r', format: 1 })
        assert.notEqual(rec.id, (await store.listTraces())[0]?.id)
        const x = jsonExchange(0, 99, 'new')
        await rec.append(x.exchange, x.bodies)
        assert.equal((await store.readTrace('r')).exchanges.length, 2)
        assert.deepEqual((await store.listTraces()).map((s) => s.status).sort(), ['complete', 'recording'])
        await rec.close()
        const t = await store.readTrace('r')
        assert.deepEqual(t.exchanges, [x.exchange])
        assert.deepEqual(
          (await store.listTraces()).map((s) => [s.name, s.status, s.exchanges, s.id]),
          [['r', 'complete', 1, rec.id]],
        )
      }),
    )

    test(
      'putTrace refuses to replace unless overwrite, and deleteTrace removes',
      withStore(async (store) => {
        await store.putTrace(jsonTrace('p', 2))
        await assert.rejects(store.putTrace(jsonTrace('p', 3)), code(ErrorCodes.TRACE_EXISTS))
        assert.equal((await store.readTrace('p')).exchanges.length, 2)
        await store.putTrace(jsonTrace('p', 3, 'y'), { overwrite: true })
        assert.equal((await store.readTrace('p')).exchanges.length, 3)
        assert.equal((await store.listTraces()).length, 1)
        assert.equal(await store.deleteTrace('p'), true)
        assert.equal(await store.hasTrace('p'), false)
        assert.deepEqual(await store.listTraces(), [])
      }),
    )

    test(
      'a trace carries only its own bodies, even when bodies are shared',
      withStore(async (store) => {
        await store.putTrace(jsonTrace('one', 1, 'same'))
        await store.putTrace(jsonTrace('two', 3, 'same'))
        const one = await store.readTrace('one')
        assert.equal(one.bodies.size, 2)
        const two = await store.readTrace('two')
        assert.equal(two.bodies.size, 6)
      }),
    )

    test(
      'an append that references a body nobody supplied fails and stores nothing',
      withStore(async (store) => {
        const rec = await store.beginTrace({ name: 'm', format: 1 })
        const x = jsonExchange(0, 1)
        await assert.rejects(rec.append(x.exchange, new Map()), code(ErrorCodes.BODY_MISSING))
        assert.equal((await store.listTraces())[0]?.exchanges, 0)
        // A body stored earlier need not be passed again.
        await rec.append(x.exchange, x.bodies)
        await rec.append({ ...x.exchange, seq: 1 }, new Map())
        await rec.close()
        assert.equal((await store.readTrace('m')).exchanges.length, 2)
        const unseen = jsonExchange(0, 777, 'unseen').exchange
        await assert.rejects(store.putTrace({ meta: { name: 'bad', format: 1 }, exchanges: [unseen], bodies: new Map() }), code(ErrorCodes.BODY_MISSING))
        assert.equal(await store.hasTrace('bad'), false)
      }),
    )

    test(
      'traces read back are copies',
      withStore(async (store) => {
        await store.putTrace(jsonTrace('c', 1))
        const a = await store.readTrace('c')
        a.exchanges[0]!.request.url = 'https://changed.test/'
        a.meta.name = 'changed'
        const b = await store.readTrace('c')
        assert.equal(b.exchanges[0]?.request.url, 'https://api.test/items/0')
        assert.equal(b.meta.name, 'c')
      }),
    )

    test(
      "gc removes the bodies only deleted traces referenced, and keeps shared ones and a running recording's (pieces too)",
      withStore(async (store) => {
        const big = (tag: number) => new Uint8Array(40 * 1024).fill(tag)
        const withBody = (seq: number, bytes: Uint8Array, url: string) => {
          const body = bodyFromBytes(bytes)
          const exchange: Exchange = {
            seq,
            request: { method: 'GET', url, headers: [], body: null },
            outcome: { kind: 'response', response: { status: 200, statusText: 'OK', headers: [], body: body.ref, trailers: [] } },
            timing: { startMs: seq, headersMs: 1 },
          }
          return { exchange, bodies: new Map([[body.ref.digest, body.bytes]]) }
        }
        const shared = withBody(0, big(1), 'https://api.test/shared')
        const own = withBody(1, big(2), 'https://api.test/own')
        const trace = (name: string, xs: Array<ReturnType<typeof withBody>>): Trace => ({
          meta: { name, format: 1 },
          exchanges: xs.map((x) => x.exchange),
          bodies: new Map(xs.flatMap((x) => [...x.bodies])),
        })
        await store.putTrace(trace('gone', [shared, own, withBody(2, new TextEncoder().encode('small'), 'https://api.test/small')]))
        await store.putTrace(trace('kept', [shared]))
        // A recording whose big body is streamed in but not yet appended.
        const rec = await store.beginTrace({ name: 'live', format: 1 })
        const writer = rec.bodyWriter()
        writer.write(big(3))
        const streamed = await writer.finish()
        assert.equal(await store.deleteTrace('gone'), true)
        const usage = await store.usage()
        assert.deepEqual(
          usage.map((u) => [u.name, u.status, u.bodies, u.bytes, u.shared]),
          [
            ['kept', 'complete', 1, 40 * 1024, 0],
            ['live', 'recording', 0, 0, 0],
          ],
        )
        const dry = await store.gc({ dryRun: true })
        assert.equal(dry.bodies, 2, 'the own big body and the small one')
        const report = await store.gc()
        assert.equal(report.bodies, 2)
        assert.equal((await store.gc({ dryRun: true })).bodies, 0)
        // The recording appends its exchange after gc: its pieces are still there.
        const x: Exchange = { ...withBody(0, big(3), 'https://api.test/live').exchange }
        await rec.append(x, new Map(), new Map([[streamed.digest, streamed.manifest]]))
        await rec.close()
        assert.equal((await store.readTrace('live')).bodies.get(streamed.digest)?.byteLength, 40 * 1024)
        assert.equal(
          (await store.readTrace('kept')).bodies.get(shared.exchange.outcome.kind === 'response' ? shared.exchange.outcome.response.body.digest : '')?.[0],
          1,
        )
        // What gc removed is stored again when a new trace brings it.
        await store.putTrace(trace('again', [own]))
        assert.equal((await store.readTrace('again')).exchanges.length, 1)
      }),
    )

    test(
      'a big trace is stored in chunks: it reads back whole, is listed only once complete, and never overwrites a name by accident',
      withStore(async (store) => {
        const big = jsonTrace('big', 2500, 'chunked')
        await store.putTrace(big)
        const back = await store.readTrace('big')
        assert.deepEqual(back.exchanges, big.exchanges)
        assert.deepEqual(
          (await store.listTraces()).map((t) => [t.name, t.status, t.exchanges]),
          [['big', 'complete', 2500]],
        )
        await assert.rejects(store.putTrace(jsonTrace('big', 1500, 'other')), code(ErrorCodes.TRACE_EXISTS))
        assert.equal((await store.readTrace('big')).exchanges.length, 2500)
        // One exchange that cannot be stored (a body neither passed nor stored) fails it all: nothing is listed.
        const bad = jsonTrace('bad', 1500, 'bad')
        bad.bodies.delete(bad.exchanges[1200]?.outcome.kind === 'response' ? bad.exchanges[1200].outcome.response.body.digest : '')
        await assert.rejects(store.putTrace(bad))
        assert.deepEqual(
          (await store.listTraces()).map((t) => t.name),
          ['big'],
        )
        await store.putTrace(jsonTrace('big', 1500, 'other'), { overwrite: true })
        assert.equal((await store.readTrace('big')).exchanges.length, 1500)
      }),
    )

    test('a closed store refuses operations with TR_STORE_CLOSED', async () => {
      const { store, cleanup } = await makeStore()
      const rec = await store.beginTrace({ name: 'z', format: 1 })
      await store.close()
      await store.close() // idempotent
      await assert.rejects(store.listTraces(), code(ErrorCodes.STORE_CLOSED))
      await assert.rejects(store.readTrace('z'), code(ErrorCodes.STORE_CLOSED))
      const x = jsonExchange(0, 1)
      await assert.rejects(rec.append(x.exchange, x.bodies), code(ErrorCodes.STORE_CLOSED))
      await cleanup?.()
    })
  })
}
