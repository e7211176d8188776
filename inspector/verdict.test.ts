import assert from 'node:assert/strict'
import { test } from 'node:test'
import { createMemoryStore } from '../store/index.ts'
import { bodyFromBytes, type Exchange, type Trace } from '../trace/index.ts'
import { StatsCache } from './run-view.ts'

const ok = bodyFromBytes(new TextEncoder().encode('{"ok":true}'))

function x(seq: number, path: string, outcome: 'ok' | 'miss' | 'live' = 'ok'): Exchange {
  const request = { method: 'GET', url: `https://api.test/${path}`, headers: [], body: null }
  const timing = { startMs: seq, headersMs: 1 }
  if (outcome === 'miss')
    return { seq, request, timing, outcome: { kind: 'error', error: { code: 'TR_REPLAY_MISS', message: 'Failed to replay', phase: 'connect' } } }
  return {
    seq,
    request,
    timing,
    outcome: { kind: 'response', response: { status: 200, statusText: 'OK', headers: [], body: ok.ref, trailers: [] } },
    ...(outcome === 'live' ? { origin: 'live' as const } : {}),
  }
}

const trace = (name: string, exchanges: Exchange[], against?: string): Trace => ({
  meta: { name, format: 1, ...(against ? { labels: { observedAgainst: against } } : {}) },
  exchanges,
  bodies: new Map([[ok.ref.digest, ok.bytes]]),
})

test('the replay verdict of runs against a trace: complete, misses, unused, a live tail; none for a recording', async () => {
  const store = createMemoryStore()
  await store.putTrace(trace('source', [x(0, 'a'), x(1, 'b'), x(2, 'c')]))
  await store.putTrace(trace('complete', [x(0, 'a'), x(1, 'b'), x(2, 'c')], 'source'))
  await store.putTrace(trace('missed', [x(0, 'a'), x(1, 'b2', 'miss'), x(2, 'c')], 'source'))
  await store.putTrace(trace('short', [x(0, 'a')], 'source'))
  await store.putTrace(trace('tail', [x(0, 'a'), x(1, 'b2', 'live'), x(2, 'd', 'live')], 'source'))
  const stats = new StatsCache(store)
  const verdict = async (name: string) => (await stats.of(await store.openTrace(name))).replay
  assert.equal(await verdict('source'), undefined)
  assert.deepEqual(await verdict('complete'), {
    against: 'source',
    state: 'complete',
    replayed: 3,
    misses: 0,
    live: 0,
    unused: 0,
    summary: 'strict replay complete',
  })
  const missed = await verdict('missed')
  assert.equal(missed?.state, 'incomplete')
  assert.equal(missed?.summary, 'strict replay incomplete: 1 miss (first #1), 1 unused')
  assert.equal((await verdict('short'))?.summary, 'strict replay incomplete: 2 unused')
  const tail = await verdict('tail')
  assert.equal(tail?.state, 'live')
  assert.equal(tail?.unused, undefined, "a live tail's unreached recordings are not unused")
  assert.equal(tail?.summary, 'live tail from #1: 2 exchanges went to the real services')
})

test('a trace replaced after the run: unused cannot be known, and the run is not called complete', async () => {
  const store = createMemoryStore()
  await store.putTrace(trace('source', [x(0, 'a')]))
  await store.putTrace(trace('run', [x(0, 'a')], 'source'))
  await new Promise((r) => setTimeout(r, 5))
  await store.putTrace(trace('source', [x(0, 'a'), x(1, 'b')]), { overwrite: true })
  const v = (await new StatsCache(store).of(await store.openTrace('run'))).replay
  assert.equal(v?.state, 'incomplete')
  assert.match(v?.summary ?? '', /^strict replay not known complete: unused unknown \("source" is gone or newer than the run\)/)
})
