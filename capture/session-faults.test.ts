import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { type CapturedRequest, type Decision, loadSessionFaults, openSession, type Playback, type SessionOptions } from '../engine/index.ts'
import { createMemoryStore } from '../store/index.ts'
import { bodyBytes, type Exchange, type HeaderPairs, type RecordedError, type Trace } from '../trace/index.ts'
import { DEFAULT_PACE } from './pacing.ts'
import { drivePlayback } from './playback-driver.ts'

const enc = new TextEncoder()
const dec = new TextDecoder()
const get = (url: string): CapturedRequest => ({ method: 'GET', url, headers: [], body: null })
const post = (url: string): CapturedRequest => ({ method: 'POST', url, headers: [['content-type', 'application/json']], body: enc.encode('{"orderId":"o-1"}') })

/** What the app got, as a capture path would hand it over. */
interface AppView {
  status?: number
  reads: string[]
  ended: boolean
  error?: RecordedError
  injected?: boolean
}

/** Plays a playback into a collecting target (what either capture path does). */
async function play(playback: Playback, view: AppView = { reads: [], ended: false }): Promise<AppView> {
  await drivePlayback(playback, DEFAULT_PACE, {
    gone: false,
    head: (h) => (view.status = h.status),
    chunk: (b) => void view.reads.push(dec.decode(b)),
    separate: () => Promise.resolve(),
    end: () => (view.ended = true),
    fail: (error, _afterHead, injected) => {
      view.error = error
      view.injected = injected
    },
  })
  return view
}

/** An upstream answer a forward decision is fed with. */
interface Upstream {
  status: number
  headers?: HeaderPairs
  chunks: string[]
}

/** Carries a decision out like a capture path: forwards to `upstream` (if asked) and plays what the app must get. */
async function carryOut(decision: Decision | Promise<Decision>, upstream?: Upstream): Promise<AppView> {
  const d = await decision
  if (d.kind === 'fail') throw d.error
  if (d.kind === 'replay') return play(d.playback)
  assert.ok(upstream, 'the decision forwards, but the test gave no upstream answer')
  const r = d.recorder
  const app = d.client ? undefined : ({ reads: [], ended: false } as AppView)
  r.responseStart({ status: upstream.status, statusText: 'OK', headers: upstream.headers ?? [['content-type', 'application/json']] })
  if (app) app.status = upstream.status
  const playing = d.client?.then((p) => play(p))
  for (const c of upstream.chunks) {
    await r.responseData(enc.encode(c))
    app?.reads.push(c)
  }
  await r.responseEnd()
  if (app) app.ended = true
  return app ?? (playing as Promise<AppView>)
}

async function faulted(
  mode: SessionOptions['mode'],
  trace: string,
  store: ReturnType<typeof createMemoryStore>,
  faults: Record<string, unknown>,
  extra: Partial<SessionOptions> = {},
) {
  return openSession({ mode, trace, store, faults: await loadSessionFaults(faults), ...extra })
}

function text(trace: Trace, o: Exchange['outcome'] | null | undefined): string | undefined {
  if (!o) return undefined
  const ref = o.kind === 'response' ? o.response.body : o.error.partial?.body
  return ref ? dec.decode(bodyBytes(trace, ref)) : undefined
}

const SSE: HeaderPairs = [['content-type', 'text/event-stream']]
const EVENTS = ['data: 0\n\n', 'data: 1\n\n', 'data: 2\n\n', 'data: 3\n\n']

describe('faults in a session', () => {
  test('response_lost: forwarded and recorded as the upstream answered; the app gets an injected ECONNRESET', async () => {
    const store = createMemoryStore()
    const s = await faulted('record', 't', store, { seed: 1, rules: [{ id: 'lost', target: { url: '/ship' }, fault: 'response_lost' }] })
    const app = await carryOut(s.handle(post('https://api.test/ship')), { status: 201, chunks: ['{"id":"s-1"}'] })
    await s.close()
    assert.equal(app.error?.code, 'ECONNRESET')
    assert.equal(app.injected, true, 'the app connection fails, not the upstream')
    assert.equal(app.status, undefined)
    const trace = await store.readTrace('t')
    const x = trace.exchanges[0] as Exchange
    assert.equal(x.outcome.kind === 'error' && x.outcome.error.code, 'ECONNRESET')
    assert.deepEqual(
      { ...x.fault, upstream: undefined },
      { rule: 'lost', kind: 'response_lost', phase: 'after-response', seed: '1', call: 1, upstream: undefined },
    )
    assert.equal(text(trace, x.fault?.upstream), '{"id":"s-1"}')
    assert.equal(trace.meta.labels?.faultsSeed, '1')
  })

  test('stream_cut streams: the app reads each event as the upstream sends it, the body ends at the cut, the upstream is read to its end', async () => {
    const store = createMemoryStore()
    const s = await faulted('record', 't', store, {
      seed: 1,
      rules: [{ id: 'cut', target: { url: '/sse' }, fault: 'stream_cut', options: { afterEvents: 2 } }],
    })
    const d = await s.handle(get('https://api.test/sse'))
    assert.equal(d.kind, 'forward')
    if (d.kind !== 'forward' || !d.client) throw new Error('expected a forward with a client playback')
    d.recorder.responseStart({ status: 200, statusText: 'OK', headers: [...SSE, ['content-length', '36']] })
    const playback = await d.client
    assert.equal(
      playback.head?.headers.some(([k]) => k === 'content-length'),
      false,
      'a cut body cannot keep its length',
    )
    const view: AppView = { reads: [], ended: false }
    const playing = play(playback, view)
    await d.recorder.responseData(enc.encode(EVENTS[0] as string))
    await new Promise((resolve) => setImmediate(resolve))
    assert.deepEqual(view.reads, [EVENTS[0]], 'the first event reached the app before the upstream sent the second')
    for (const e of EVENTS.slice(1)) await d.recorder.responseData(enc.encode(e))
    await playing
    assert.deepEqual(view.reads, EVENTS.slice(0, 2))
    assert.equal(view.ended, true)
    assert.equal(view.error, undefined)
    await d.recorder.responseEnd()
    await s.close()
    const trace = await store.readTrace('t')
    const x = trace.exchanges[0] as Exchange
    assert.equal(text(trace, x.outcome), EVENTS.slice(0, 2).join(''))
    assert.equal(text(trace, x.fault?.upstream), EVENTS.join(''))
    assert.deepEqual(
      x.outcome.kind === 'response' && x.outcome.response.body.chunks.map((c) => c.size),
      [EVENTS[0]?.length, EVENTS[1]?.length],
      'the app view keeps the chunks the app read',
    )
  })

  test('a fault that cannot apply leaves the response alone, records no fault and does not count as triggered', async () => {
    const store = createMemoryStore()
    const s = await faulted('record', 't', store, {
      seed: 1,
      rules: [{ id: 'reset', target: { url: '/sse' }, fault: 'stream_error', options: { afterEvents: 9 } }],
    })
    const app = await carryOut(s.handle(get('https://api.test/sse')), { status: 200, headers: SSE, chunks: EVENTS })
    await s.close()
    assert.deepEqual(app.reads, EVENTS)
    assert.equal(app.ended, true)
    const trace = await store.readTrace('t')
    assert.equal(trace.exchanges[0]?.fault, undefined)
    const c = s.faults?.coverage()[0]
    assert.deepEqual([c?.eligible, c?.selected, c?.triggered, c?.missed['not-applicable']], [1, 1, 0, 1])
    assert.throws(() => s.assertDone(), /TR_FAULT_NOT_FIRED|never fired/)
  })

  test('schema_drift under body redaction: the app gets the drifted JSON, the store never sees the secret', async () => {
    const store = createMemoryStore()
    const s = await faulted(
      'record',
      't',
      store,
      {
        seed: 1,
        rules: [
          { id: 'drift', target: { url: '/quote' }, fault: 'schema_drift', options: { changes: [{ op: 'rename', path: '$.quote.id', to: 'quote_id' }] } },
        ],
      },
      { redaction: { bodyPaths: ['$.token'] } },
    )
    const app = await carryOut(s.handle(get('https://api.test/quote')), { status: 200, chunks: ['{"token":"sk-secret-1","quote":{"id":"q-1"}}'] })
    await s.close()
    assert.equal(app.reads.join(''), '{"token":"sk-secret-1","quote":{"quote_id": "q-1"}}')
    const trace = await store.readTrace('t')
    for (const bytes of trace.bodies.values()) assert.doesNotMatch(dec.decode(bytes), /sk-secret-1/)
    assert.match(text(trace, trace.exchanges[0]?.outcome) as string, /"quote_id"/)
  })

  test('a before-forward wait ends when the app gives up (recorded as its abort) and when the session closes', async () => {
    const store = createMemoryStore()
    const s = await faulted('record', 't', store, { seed: 1, rules: [{ id: 'hang', target: { url: '/hang' }, fault: 'timeout', options: { ms: 60_000 } }] })
    const gaveUp = new AbortController()
    const t0 = performance.now()
    const pending = s.handle({ ...get('https://api.test/hang'), signal: gaveUp.signal })
    setTimeout(() => gaveUp.abort(), 20)
    const app = await carryOut(pending)
    assert.equal(app.error?.code, 'UND_ERR_ABORTED')
    const closing = s.handle(get('https://api.test/hang'))
    await s.close()
    const closed = await carryOut(closing)
    assert.equal(closed.error?.code, 'ETIMEDOUT', 'the session closing ends the wait with the fault itself')
    assert.ok(performance.now() - t0 < 5000, 'neither waited the 60 s')
    const trace = await store.readTrace('t')
    assert.deepEqual(
      trace.exchanges.map((x) => [x.outcome.kind === 'error' && x.outcome.error.code, x.fault?.rule]),
      [
        ['UND_ERR_ABORTED', 'hang'],
        ['ETIMEDOUT', 'hang'],
      ],
    )
  })

  test('passthrough: faults apply, nothing is stored', async () => {
    const store = createMemoryStore()
    const s = await faulted('passthrough', 't', store, { seed: 1, rules: [{ id: 'rl', target: { url: '/x' }, fault: 'rate_limit' }] })
    const app = await carryOut(s.handle(get('https://api.test/x')))
    const summary = await s.close()
    assert.equal(app.status, 429)
    assert.equal(summary.passedThrough, 1)
    assert.deepEqual((await store.listTraces()).length, 0)
  })
})

describe('strict replay of a faulted trace', () => {
  async function recordFaulted(store: ReturnType<typeof createMemoryStore>): Promise<void> {
    const s = await faulted('record', 'run', store, {
      seed: 21,
      rules: [
        { id: 'lost', target: { url: '/ship' }, fault: 'response_lost' },
        { id: 'rl', target: { url: '/quote' }, fault: 'rate_limit', first: 1 },
      ],
    })
    await carryOut(s.handle(post('https://api.test/ship')), { status: 201, chunks: ['{"id":"s-1"}'] })
    await carryOut(s.handle(get('https://api.test/quote')))
    await carryOut(s.handle(get('https://api.test/quote')), { status: 200, chunks: ['{"q":1}'] })
    await s.close()
  }

  test('plays what the app was given (an injected failure stays injected) and counts the recorded faults, with the recorded seed', async () => {
    const store = createMemoryStore()
    await recordFaulted(store)
    const rules = [
      { id: 'lost', target: { url: '/ship' }, fault: 'response_lost' },
      { id: 'rl', target: { url: '/quote' }, fault: 'rate_limit', first: 1 },
    ]
    const s = await faulted('replay', 'run', store, { seed: 99, rules })
    const lost = await carryOut(s.handle(post('https://api.test/ship')))
    const limited = await carryOut(s.handle(get('https://api.test/quote')))
    const ok = await carryOut(s.handle(get('https://api.test/quote')))
    await s.close()
    s.assertDone()
    assert.deepEqual([lost.error?.code, lost.injected], ['ECONNRESET', true])
    assert.equal(limited.status, 429)
    assert.deepEqual([ok.status, ok.reads.join('')], [200, '{"q":1}'])
    assert.deepEqual(
      s.faults?.coverage().map((c) => [c.rule, c.eligible, c.triggered]),
      [
        ['lost', 1, 1],
        ['rl', 2, 1],
      ],
    )
    assert.equal(s.faults?.seed, '21')
    assert.equal(s.faults?.seedLine(), 'faults seed 21 (recorded in the replayed trace; the configured seed 99 injects nothing in strict replay)')
  })

  test('a clean trace replayed with faults injects nothing, and the rule fails as never fired, saying why', async () => {
    const store = createMemoryStore()
    const rec = await openSession({ mode: 'record', trace: 'clean', store })
    await carryOut(rec.handle(get('https://api.test/quote')), { status: 200, chunks: ['{"q":1}'] })
    await rec.close()
    const s = await faulted('replay', 'clean', store, { seed: 1, rules: [{ id: 'rl', target: { url: '/quote' }, fault: 'rate_limit' }] })
    const app = await carryOut(s.handle(get('https://api.test/quote')))
    await s.close()
    assert.equal(app.status, 200)
    assert.throws(
      () => s.assertDone(),
      (err: Error & { code?: string }) =>
        err.code === 'TR_FAULT_NOT_FIRED' && /strict replay serves what the trace recorded and injects no new faults/.test(err.message),
    )
  })
})
