import assert from 'node:assert/strict'
import { test } from 'node:test'
import { openSession } from '../engine/index.ts'
import { createMemoryStore } from '../store/index.ts'
import { type CapturedExchange, type CaptureOptions, captureRequest, type ReadBody } from './lifecycle.ts'
import type { ClientTarget, LiveEvents } from './live-tee.ts'

const enc = (s: string) => new TextEncoder().encode(s)

/** A client that logs what it got and can leave. */
function client() {
  const log: string[] = []
  let gone = false
  const fns: Array<() => void> = []
  const c: ClientTarget = {
    get gone() {
      return gone
    },
    onGone: (fn) => void fns.push(fn),
    head: (h) => void log.push(`head ${h.status} ${h.headers.find(([k]) => k === 'x-tool-replay-error')?.[1] ?? ''}`.trim()),
    chunk: () => undefined,
    separate: () => Promise.resolve(),
    end: () => void log.push('end'),
    fail: (e) => void log.push(`fail ${e.code}`),
    failLive: (_e, r) => void log.push(`failLive ${r.code}`),
    failWith: (e) => void log.push(`failWith ${e.message}`),
  }
  return {
    c,
    log,
    leave: () => {
      gone = true
      for (const fn of fns) fn()
    },
  }
}

/** An exchange whose forward answers 200 "ok" at once (and is counted). */
function exchange(c: ClientTarget, body: ReadBody | Promise<ReadBody>, forwarded: string[], path = '/x'): CapturedExchange {
  return {
    method: 'POST',
    url: `https://api.test${path}`,
    headers: [],
    readBody: () => body,
    client: c,
    forward: (_bytes, events: LiveEvents) => {
      forwarded.push(path)
      events.control({ pause() {}, resume() {}, abort() {} })
      events.started()
      events.sent()
      events.head({ status: 200, statusText: 'OK', headers: [['content-length', '2']] })
      events.data(enc('ok'))
      events.end([])
    },
  }
}

test('a body over the limit is refused with 413, never goes live, and gives its turn up', async () => {
  const store = createMemoryStore()
  const rec = await openSession({ mode: 'record', trace: 't', store })
  const options: CaptureOptions = { session: rec, pace: { kind: 'none' }, maxBodyBytes: 4, drainAfterAbortMs: 0 }
  const big = client()
  const forwarded: string[] = []
  const ticket = rec.arrival()
  await captureRequest(
    options,
    {
      ...exchange(big.c, { bytes: null }, forwarded),
      readBody: (_max, tooLarge) => {
        throw tooLarge()
      },
    },
    ticket,
  )
  assert.deepEqual(big.log, ['head 413 TR_REQUEST_TOO_LARGE', 'end'])
  const next = client()
  await captureRequest(options, exchange(next.c, { bytes: enc('hi') }, forwarded), rec.arrival())
  assert.deepEqual(forwarded, ['/x'], 'the refused request never went live; the next one was not held up by it')
  await rec.close()
  assert.deepEqual(
    (await store.readTrace('t')).exchanges.map((x) => x.request.url),
    ['https://api.test/x'],
  )
})

test('a client that leaves while its request waits for its turn: the turn still comes, nothing goes live, the abort is recorded', async () => {
  const store = createMemoryStore()
  const rec = await openSession({ mode: 'record', trace: 't', store })
  const options: CaptureOptions = { session: rec, pace: { kind: 'none' }, maxBodyBytes: 1024, drainAfterAbortMs: 0 }
  const forwarded: string[] = []
  let bodyArrives: (b: ReadBody) => void = () => {}
  const first = client()
  const a = captureRequest(options, exchange(first.c, new Promise<ReadBody>((r) => (bodyArrives = r)), forwarded, '/a'), rec.arrival())
  const second = client()
  const b = captureRequest(options, exchange(second.c, { bytes: enc('b') }, forwarded, '/b'), rec.arrival())
  assert.ok(b instanceof Promise, 'b waits for a, which is still sending its body')
  second.leave()
  bodyArrives({ bytes: enc('a') })
  await Promise.all([a, b])
  assert.deepEqual(forwarded, ['/a'])
  assert.deepEqual(second.log, [], 'nothing is played to a client that left')
  const t0 = performance.now()
  await rec.close()
  assert.ok(performance.now() - t0 < 1000, 'close() has no open recording to wait out')
  const outcomes = (await store.readTrace('t')).exchanges.map(
    (x) => `${new URL(x.request.url).pathname} ${x.outcome.kind === 'error' ? `${x.outcome.error.code} ${x.outcome.error.phase}` : x.outcome.response.status}`,
  )
  assert.deepEqual(outcomes, ['/a 200', '/b UND_ERR_ABORTED connect'])
})
