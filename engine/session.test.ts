import assert from 'node:assert/strict'
import { after, describe, test } from 'node:test'
import { gzipSync } from 'node:zlib'
import { createMemoryStore } from '../store/index.ts'
import { ErrorCodes, type HeaderPairs, isToolReplayError, ToolReplayError } from '../trace/index.ts'
import type { CapturedRequest, Decision, PlaybackChunk } from './decision.ts'
import { formatSummary } from './ledger.ts'
import { openSession } from './open-session.ts'
import type { Session } from './session.ts'

/** Replay from a trace in memory decides synchronously; this asserts it and narrows the type. */
function sync(d: Decision | Promise<Decision>): Decision {
  if (d instanceof Promise) throw new Error('expected a synchronous decision from a trace replayed from memory')
  return d
}

const enc = new TextEncoder()
const dec = new TextDecoder()
const get = (url: string, headers: HeaderPairs = []): CapturedRequest => ({ method: 'GET', url, headers, body: null })
const postJson = (url: string, value: unknown, headers: HeaderPairs = []): CapturedRequest => ({
  method: 'POST',
  url,
  headers: [['content-type', 'application/json'], ...headers],
  body: enc.encode(JSON.stringify(value)),
})

/** Plays the role of a live upstream: answers a forward decision with the given body chunks. */
async function answer(session: Session, req: CapturedRequest, status: number, chunks: string[], headers: HeaderPairs = []): Promise<void> {
  const d = sync(session.handle(req))
  assert.equal(d.kind, 'forward')
  if (d.kind !== 'forward') return
  d.recorder.responseStart({ status, statusText: 'OK', headers: [['content-type', 'application/json'], ...headers] })
  for (const c of chunks) d.recorder.responseData(enc.encode(c))
  await d.recorder.responseEnd()
}

function replayedText(session: Session, req: CapturedRequest): { status: number; chunks: string[] } {
  const d = sync(session.handle(req))
  if (d.kind !== 'replay') throw d.kind === 'fail' ? d.error : new Error(`expected replay, got ${d.kind}`)
  assert.equal(d.playback.kind, 'response')
  if (d.playback.kind !== 'response') throw new Error('unreachable')
  return { status: d.playback.head.status, chunks: (d.playback.chunks as PlaybackChunk[]).map((c) => dec.decode(c.bytes)) }
}

describe('Session', () => {
  test('records then replays with chunk boundaries kept', async () => {
    const store = createMemoryStore()
    const rec = await openSession({ mode: 'record', trace: 't', store })
    await answer(rec, get('https://API.test:443/a?b=2&a=1#frag'), 200, ['{"x":', '1}'])
    const s = await rec.close()
    assert.equal(s.recorded, 1)
    const rep = await openSession({ mode: 'replay', trace: 't', store })
    assert.deepEqual(replayedText(rep, get('https://api.test/a?a=1&b=2')), { status: 200, chunks: ['{"x":', '1}'] })
    const sum = await rep.close()
    assert.equal(sum.ok, true)
    rep.assertDone()
  })

  test('n-th request of an identity gets the n-th recording; one more is TR_REPLAY_EXHAUSTED', async () => {
    const store = createMemoryStore()
    const rec = await openSession({ mode: 'record', trace: 't', store })
    for (const body of ['"one"', '"two"', '"three"']) await answer(rec, get('https://api.test/n'), 200, [body])
    await rec.close()
    const rep = await openSession({ mode: 'replay', trace: 't', store })
    assert.deepEqual(
      ['"one"', '"two"', '"three"'].map(() => replayedText(rep, get('https://api.test/n')).chunks[0]),
      ['"one"', '"two"', '"three"'],
    )
    const d = sync(rep.handle(get('https://api.test/n')))
    assert.equal(d.kind, 'fail')
    if (d.kind === 'fail') {
      assert.equal(d.error.code, ErrorCodes.REPLAY_EXHAUSTED)
      assert.match(d.error.message, /recorded this request 3 time\(s\) \(#0 to #2\) and this is #3/)
    }
    assert.throws(
      () => rep.assertDone(),
      (e: unknown) => isToolReplayError(e, ErrorCodes.REPLAY_INCOMPLETE),
    )
  })

  test('different identities keep separate queues when interleaved', async () => {
    const store = createMemoryStore()
    const rec = await openSession({ mode: 'record', trace: 't', store })
    await answer(rec, get('https://api.test/a'), 200, ['a1'])
    await answer(rec, get('https://api.test/b'), 200, ['b1'])
    await answer(rec, get('https://api.test/a'), 200, ['a2'])
    await rec.close()
    const rep = await openSession({ mode: 'replay', trace: 't', store })
    assert.equal(replayedText(rep, get('https://api.test/b')).chunks[0], 'b1')
    assert.equal(replayedText(rep, get('https://api.test/a')).chunks[0], 'a1')
    assert.equal(replayedText(rep, get('https://api.test/a')).chunks[0], 'a2')
    rep.assertDone()
  })

  test('a miss names the closest candidate and what differs, and stays in the ledger', async () => {
    const store = createMemoryStore()
    const rec = await openSession({ mode: 'record', trace: 'chat', store })
    await answer(rec, postJson('https://api.test/v1/chat', { model: 'm', messages: [{ role: 'user', content: 'hi' }] }), 200, ['{}'])
    await answer(rec, get('https://api.test/v1/models?page=1'), 200, ['[]'])
    await rec.close()
    const rep = await openSession({ mode: 'replay', trace: 'chat', store })
    const d = sync(rep.handle(postJson('https://api.test/v1/chat', { model: 'm', messages: [{ role: 'user', content: 'hello' }] })))
    assert.equal(d.kind, 'fail')
    if (d.kind !== 'fail') return
    assert.equal(d.error.code, ErrorCodes.REPLAY_MISS)
    assert.match(d.error.message, /closest recorded: "POST https:\/\/api\.test\/v1\/chat" \(differs: body \$\.messages\[0\]\.content: "hi" → "hello"\)/)
    const q = sync(rep.handle(get('https://api.test/v1/models?page=2')))
    assert.equal(q.kind, 'fail')
    if (q.kind === 'fail') assert.match(q.error.message, /query key "page": 1 → 2/)
    // The app swallowed both errors; the session still fails at the end.
    assert.equal(rep.ledger.length, 2)
    assert.throws(
      () => rep.assertDone(),
      (e: unknown) => isToolReplayError(e, ErrorCodes.REPLAY_INCOMPLETE) && /2 unmatched/.test((e as Error).message) && /2 unused/.test((e as Error).message),
    )
  })

  test('unused recordings are reported when the session ends', async () => {
    const store = createMemoryStore()
    const rec = await openSession({ mode: 'record', trace: 't', store })
    await answer(rec, get('https://api.test/a'), 200, ['a'])
    await answer(rec, get('https://api.test/b'), 200, ['b'])
    await rec.close()
    const rep = await openSession({ mode: 'replay', trace: 't', store })
    replayedText(rep, get('https://api.test/a'))
    const s = await rep.close()
    assert.equal(s.ok, false)
    assert.deepEqual(
      s.unused.map((u) => [u.code, u.request]),
      [[ErrorCodes.REPLAY_UNUSED, 'GET https://api.test/b #0']],
    )
  })

  test('X-Stainless-*, user-agent, authorization and content-length do not change identity', async () => {
    const store = createMemoryStore()
    const rec = await openSession({ mode: 'record', trace: 't', store })
    await answer(
      rec,
      postJson('https://api.test/v1/chat', { a: 1 }, [
        ['x-stainless-retry-count', '0'],
        ['x-stainless-os', 'Linux'],
        ['user-agent', 'OpenAI/JS 7.0.0'],
        ['authorization', 'Bearer sk-one'],
        ['content-length', '7'],
      ]),
      200,
      ['{}'],
    )
    await rec.close()
    const rep = await openSession({ mode: 'replay', trace: 't', store })
    replayedText(
      rep,
      postJson('https://api.test/v1/chat', { a: 1 }, [
        ['X-Stainless-Retry-Count', '2'],
        ['X-Stainless-OS', 'MacOS'],
        ['user-agent', 'OpenAI/JS 7.1.0'],
        ['authorization', 'Bearer sk-two'],
      ]),
    )
    rep.assertDone()
  })

  test('identity options: include a header, ignore a query param and a body path', async () => {
    const store = createMemoryStore()
    const identity = { includeHeaders: ['content-type', 'x-tenant'], ignoreQueryParams: ['_'], ignoreBodyPaths: ['$.nonce'] }
    const rec = await openSession({ mode: 'record', trace: 't', store, identity })
    await answer(rec, postJson('https://api.test/q?_=1', { q: 1, nonce: 'a' }, [['x-tenant', 'acme']]), 200, ['ok'])
    await rec.close()
    const rep = await openSession({ mode: 'replay', trace: 't', store, identity })
    replayedText(rep, postJson('https://api.test/q?_=2', { nonce: 'b', q: 1 }, [['x-tenant', 'acme']]))
    const other = sync(rep.handle(postJson('https://api.test/q', { q: 1 }, [['x-tenant', 'globex']])))
    assert.equal(other.kind, 'fail')
    if (other.kind === 'fail') assert.match(other.error.message, /header x-tenant: acme → globex/)
  })

  test('multipart boundaries are normalized', async () => {
    const store = createMemoryStore()
    const form = (b: string): CapturedRequest => ({
      method: 'POST',
      url: 'https://api.test/upload',
      headers: [['content-type', `multipart/form-data; boundary=${b}`]],
      body: enc.encode(`--${b}\r\nContent-Disposition: form-data; name="f"\r\n\r\nv\r\n--${b}--\r\n`),
    })
    const rec = await openSession({ mode: 'record', trace: 't', store })
    await answer(rec, form('----formdata-undici-0123'), 201, ['done'])
    await rec.close()
    const rep = await openSession({ mode: 'replay', trace: 't', store })
    assert.equal(replayedText(rep, form('----formdata-undici-9876')).status, 201)
  })

  test('recorded errors replay as errors, with the partial body of a mid-stream failure', async () => {
    const store = createMemoryStore()
    const rec = await openSession({ mode: 'record', trace: 't', store })
    const d1 = sync(rec.handle(get('http://127.0.0.1:9/refused')))
    if (d1.kind === 'forward') await d1.recorder.fail({ code: 'ECONNREFUSED', message: 'connect ECONNREFUSED 127.0.0.1:9' }, 'connect')
    const d2 = sync(rec.handle(get('https://api.test/stream')))
    if (d2.kind === 'forward') {
      d2.recorder.responseStart({ status: 200, statusText: 'OK', headers: [['content-type', 'text/event-stream']] })
      d2.recorder.responseData(enc.encode('data: 1\n\n'))
      await d2.recorder.fail({ code: 'ECONNRESET', message: 'socket hang up' })
    }
    await rec.close()
    const rep = await openSession({ mode: 'replay', trace: 't', store })
    const r1 = sync(rep.handle(get('http://127.0.0.1:9/refused')))
    assert.ok(r1.kind === 'replay' && r1.playback.kind === 'error')
    if (r1.kind === 'replay' && r1.playback.kind === 'error') assert.deepEqual([r1.playback.error.code, r1.playback.error.phase], ['ECONNREFUSED', 'connect'])
    const r2 = sync(rep.handle(get('https://api.test/stream')))
    assert.ok(r2.kind === 'replay' && r2.playback.kind === 'error')
    if (r2.kind === 'replay' && r2.playback.kind === 'error') {
      assert.equal(r2.playback.error.phase, 'response-body')
      assert.equal(r2.playback.head?.status, 200)
      assert.deepEqual(
        (r2.playback.chunks as PlaybackChunk[]).map((c) => dec.decode(c.bytes)),
        ['data: 1\n\n'],
      )
    }
  })

  test('secrets are redacted before they reach the store', async () => {
    const store = createMemoryStore()
    const secret = 'sk-PLANTED-SECRET-123'
    const rec = await openSession({ mode: 'record', trace: 't', store, redaction: { bodyPaths: ['$.token'] } })
    await answer(
      rec,
      postJson(`https://api.test/x?api_key=${secret}`, { token: secret, keep: 1 }, [
        ['Authorization', `Bearer ${secret}`],
        ['x-api-key', secret],
        ['cookie', `sid=${secret}`],
      ]),
      200,
      [JSON.stringify({ token: secret })],
      [
        ['set-cookie', `sid=${secret}; Path=/; HttpOnly`],
        ['set-cookie', `other=${secret}`],
      ],
    )
    await rec.close()
    const trace = await store.readTrace('t')
    const everything = JSON.stringify(trace.exchanges) + [...trace.bodies.values()].map((b) => dec.decode(b)).join('')
    assert.equal(everything.includes(secret), false)
    const x = trace.exchanges[0]
    assert.ok(x && x.outcome.kind === 'response')
    if (x?.outcome.kind === 'response') {
      assert.deepEqual(
        x.outcome.response.headers.filter(([k]) => k === 'set-cookie'),
        [
          ['set-cookie', 'sid=[REDACTED]; Path=/; HttpOnly'],
          ['set-cookie', 'other=[REDACTED]'],
        ],
      )
    }
    // And the redacted request still replays (redaction is applied the same way on both sides).
    const rep = await openSession({ mode: 'replay', trace: 't', store, redaction: { bodyPaths: ['$.token'] } })
    replayedText(rep, postJson(`https://api.test/x?api_key=other`, { token: 'other', keep: 1 }))
    rep.assertDone()
  })

  test('update mode replays what matches and records what is missing', async () => {
    const store = createMemoryStore()
    const rec = await openSession({ mode: 'record', trace: 't', store })
    await answer(rec, get('https://api.test/a'), 200, ['a'])
    await rec.close()
    const up = await openSession({ mode: 'update', trace: 't', store })
    assert.equal(replayedText(up, get('https://api.test/a')).chunks[0], 'a')
    await answer(up, get('https://api.test/b'), 200, ['b'])
    const s = await up.close()
    assert.deepEqual([s.replayed, s.recorded], [1, 1])
    const rep = await openSession({ mode: 'replay', trace: 't', store })
    replayedText(rep, get('https://api.test/a'))
    replayedText(rep, get('https://api.test/b'))
    rep.assertDone()
  })

  test('replay with recordAs keeps what the app did, misses included', async () => {
    const store = createMemoryStore()
    const rec = await openSession({ mode: 'record', trace: 'base', store })
    await answer(rec, get('https://api.test/a'), 200, ['a'])
    await rec.close()
    const rep = await openSession({ mode: 'replay', trace: 'base', store, recordAs: 'observed' })
    replayedText(rep, get('https://api.test/a'))
    assert.equal(sync(rep.handle(get('https://api.test/new'))).kind, 'fail')
    await rep.close()
    const observed = await store.readTrace('observed')
    assert.deepEqual(
      observed.exchanges.map((x) => [x.seq, x.request.url, x.outcome.kind === 'error' ? x.outcome.error.code : 'response']),
      [
        [0, 'https://api.test/a', 'response'],
        [1, 'https://api.test/new', ErrorCodes.REPLAY_MISS],
      ],
    )
    assert.equal(observed.meta.labels?.observedAgainst, 'base')
  })

  test('tail live forwards after the first miss and records it', async () => {
    const processWarnings: Error[] = []
    const onWarning = (w: Error) => processWarnings.push(w)
    process.on('warning', onWarning)
    after(() => process.off('warning', onWarning))
    const store = createMemoryStore()
    const rec = await openSession({ mode: 'record', trace: 'base', store })
    await answer(rec, get('https://api.test/a'), 200, ['a'])
    await rec.close()
    const rep = await openSession({ mode: 'replay', trace: 'base', store, recordAs: 'obs', tail: 'live' })
    replayedText(rep, get('https://api.test/a'))
    await answer(rep, get('https://api.test/next'), 200, ['live'])
    await answer(rep, get('https://api.test/a'), 200, ['live again'])
    const s = await rep.close()
    const obs = await store.readTrace('obs')
    assert.equal(obs.exchanges.length, 3)
    // A live tail is an outcome, not a failure: the live exchanges are marked and reported as live.
    assert.deepEqual(
      obs.exchanges.map((x) => [x.request.url, x.origin ?? 'recorded']),
      [
        ['https://api.test/a', 'recorded'],
        ['https://api.test/next', 'live'],
        ['https://api.test/a', 'live'],
      ],
    )
    assert.equal(s.ok, true)
    assert.deepEqual([s.misses.length, s.unused.length, s.live.length], [0, 0, 2])
    assert.match(s.live[0]?.message ?? '', /went live here: no recorded exchange matches it/)
    // In-process, the warning is a process warning (printed on stderr by default).
    await new Promise((r) => setImmediate(r))
    assert.equal(
      processWarnings.filter((w) => w.name === 'ToolReplayWarning' && /went LIVE at GET https:\/\/api\.test\/next/.test(w.message)).length,
      1,
      processWarnings.map((w) => `${w.name}: ${w.message}`).join('\n'),
    )
  })

  test('tail live warns once, through onWarning, when the run stops being offline', async () => {
    const store = createMemoryStore()
    const rec = await openSession({ mode: 'record', trace: 'base', store })
    await answer(rec, get('https://api.test/a'), 200, ['a'])
    await answer(rec, get('https://api.test/b'), 200, ['b'])
    await rec.close()
    const warnings: string[] = []
    const rep = await openSession({ mode: 'replay', trace: 'base', store, recordAs: 'obs', tail: 'live', onWarning: (m) => warnings.push(m) })
    await answer(rep, get('https://api.test/other'), 200, ['live'])
    await answer(rep, get('https://api.test/more'), 200, ['live'])
    const s = await rep.close()
    assert.equal(warnings.length, 1)
    assert.match(warnings[0] as string, /went LIVE at GET https:\/\/api\.test\/other .* NOT offline/)
    assert.equal(s.ok, true, 'the recordings it never reached (a, b) are not unused: the run went another way')
  })

  test('update mode reports what it dropped, and keepUnused keeps it', async () => {
    const store = createMemoryStore()
    const rec = await openSession({ mode: 'record', trace: 't', store })
    await answer(rec, get('https://api.test/a'), 200, ['a'])
    await answer(rec, get('https://api.test/gone'), 200, ['gone'])
    await rec.close()
    const drop = await openSession({ mode: 'update', trace: 't', store })
    replayedText(drop, get('https://api.test/a'))
    const dropped = await drop.close()
    assert.deepEqual(
      dropped.dropped.map((e) => e.request),
      ['GET https://api.test/gone #0'],
    )
    assert.match(formatSummary(dropped), /1 dropped \(not requested; keepUnused/)
    assert.deepEqual(
      (await store.readTrace('t')).exchanges.map((x) => x.request.url),
      ['https://api.test/a'],
    )

    const rec2 = await openSession({ mode: 'record', trace: 'u', store })
    await answer(rec2, get('https://api.test/a'), 200, ['a'])
    await answer(rec2, get('https://api.test/kept'), 200, ['kept'])
    await rec2.close()
    const keep = await openSession({ mode: 'update', trace: 'u', store, keepUnused: true })
    await answer(keep, get('https://api.test/new'), 200, ['new'])
    replayedText(keep, get('https://api.test/a'))
    const kept = await keep.close()
    assert.deepEqual([kept.dropped.length, kept.kept.length], [0, 1])
    assert.deepEqual(
      (await store.readTrace('u')).exchanges.map((x) => [x.seq, x.request.url]),
      [
        [0, 'https://api.test/new'],
        [1, 'https://api.test/a'],
        [2, 'https://api.test/kept'],
      ],
    )
  })

  test('passthrough stores nothing; replay of an unknown trace is TR_TRACE_NOT_FOUND; bad mode is TR_INVALID_OPTION', async () => {
    const store = createMemoryStore()
    const pt = await openSession({ mode: 'passthrough', trace: 'p', store })
    await answer(pt, get('https://api.test/a'), 200, ['a'])
    const s = await pt.close()
    assert.equal(s.passedThrough, 1)
    assert.deepEqual(await store.listTraces(), [])
    await assert.rejects(openSession({ mode: 'replay', trace: 'nope', store }), (e: unknown) => isToolReplayError(e, ErrorCodes.TRACE_NOT_FOUND))
    await assert.rejects(openSession({ mode: 'rewind' as never, trace: 'x', store }), (e: unknown) => isToolReplayError(e, ErrorCodes.INVALID_OPTION))
    await assert.rejects(openSession({ mode: 'record', trace: '../escape', store }), (e: unknown) => isToolReplayError(e, ErrorCodes.INVALID_OPTION))
  })
  test('close() waits for responses still streaming, then keeps what arrived of those that never end', async (t) => {
    const store = createMemoryStore()
    const rec = await openSession({ mode: 'record', trace: 't', store })
    // The close grace (2 s) on a mock clock, stepped 10 ms at a time instead of waited out.
    t.mock.timers.enable({ apis: ['setTimeout'] })
    const slow = sync(rec.handle(get('https://api.test/slow')))
    const endless = sync(rec.handle(get('https://api.test/endless')))
    assert.ok(slow.kind === 'forward' && endless.kind === 'forward')
    if (slow.kind !== 'forward' || endless.kind !== 'forward') return
    slow.recorder.responseStart({ status: 200, statusText: 'OK', headers: [] })
    endless.recorder.responseStart({ status: 200, statusText: 'OK', headers: [] })
    endless.recorder.responseData(enc.encode('data: 1\n\n'))
    setTimeout(() => {
      slow.recorder.responseData(enc.encode('late but whole'))
      void slow.recorder.responseEnd()
    }, 50)
    let closed = false
    const closing = rec.close().finally(() => (closed = true))
    let waited = 0
    for (; !closed && waited < 5000; waited += 10) {
      await new Promise((resolve) => setImmediate(resolve))
      t.mock.timers.tick(10)
    }
    assert.ok(closed && waited >= 2000, `close() waits out its grace for the endless answer, and no longer (closed: ${closed} after ${waited} ms)`)
    const summary = await closing
    assert.equal(summary.recorded, 2)
    const trace = await store.readTrace('t')
    const byUrl = new Map(trace.exchanges.map((x) => [x.request.url, x]))
    const s = byUrl.get('https://api.test/slow')
    assert.ok(s?.outcome.kind === 'response')
    if (s?.outcome.kind === 'response') assert.equal(dec.decode(trace.bodies.get(s.outcome.response.body.digest)), 'late but whole')
    const e = byUrl.get('https://api.test/endless')
    assert.ok(e?.outcome.kind === 'error')
    if (e?.outcome.kind === 'error') {
      assert.equal(e.outcome.error.code, 'TR_SESSION_CLOSED')
      assert.equal(e.outcome.error.partial?.body.size, 'data: 1\n\n'.length)
    }
  })
  test('body-path redaction reaches gzip bodies (stored decoded) and fixes Content-Length; a bad path fails the session at once', async () => {
    const store = createMemoryStore()
    const secret = 'RESP-SECRET-42'
    const rec = await openSession({ mode: 'record', trace: 't', store, redaction: { bodyPaths: ['$.access_token'] } })
    const plain = JSON.stringify({ access_token: secret, token_type: 'bearer' })
    const d1 = sync(rec.handle(postJson('https://auth.test/token', { grant: 'x' })))
    const d2 = sync(rec.handle(postJson('https://auth.test/token-gz', { grant: 'x' })))
    assert.ok(d1.kind === 'forward' && d2.kind === 'forward')
    if (d1.kind !== 'forward' || d2.kind !== 'forward') return
    d1.recorder.responseStart({
      status: 200,
      statusText: 'OK',
      headers: [
        ['content-type', 'application/json'],
        ['content-length', String(plain.length)],
      ],
    })
    d1.recorder.responseData(enc.encode(plain))
    await d1.recorder.responseEnd()
    const gz = gzipSync(plain)
    d2.recorder.responseStart({
      status: 200,
      statusText: 'OK',
      headers: [
        ['content-type', 'application/json'],
        ['content-encoding', 'gzip'],
        ['content-length', String(gz.byteLength)],
      ],
    })
    d2.recorder.responseData(gz)
    await d2.recorder.responseEnd()
    await rec.close()
    const trace = await store.readTrace('t')
    for (const x of trace.exchanges) {
      assert.ok(x.outcome.kind === 'response')
      if (x.outcome.kind !== 'response') continue
      const bytes = trace.bodies.get(x.outcome.response.body.digest) as Uint8Array
      assert.equal(dec.decode(bytes), JSON.stringify({ access_token: '[REDACTED]', token_type: 'bearer' }), x.request.url)
      assert.equal(x.outcome.response.headers.find(([k]) => k === 'content-length')?.[1], String(bytes.byteLength))
      assert.equal(
        x.outcome.response.headers.some(([k]) => k === 'content-encoding'),
        false,
      )
    }
    await assert.rejects(
      openSession({ mode: 'record', trace: 'u', store, redaction: { bodyPaths: ['$.['] } }),
      (e: unknown) => isToolReplayError(e, ErrorCodes.INVALID_OPTION) && (e as Error).message.includes('"$.["'),
    )
  })
  test('a request the engine cannot read still fails the strict run (ledger), even when the app swallows it', async () => {
    const store = createMemoryStore()
    const rec = await openSession({ mode: 'record', trace: 't', store })
    await answer(rec, get('https://api.test/a'), 200, ['a'])
    await rec.close()
    const custom = (r: { url: string }) => {
      if (r.url.includes('/boom')) throw new Error('identity bug')
      return r.url
    }
    const rep = await openSession({ mode: 'replay', trace: 't', store, identity: { custom } })
    replayedText(rep, get('https://api.test/a'))
    const d = sync(rep.handle(get('https://api.test/boom')))
    assert.equal(d.kind, 'fail')
    assert.equal(rep.ledger.length, 1)
    assert.throws(
      () => rep.assertDone(),
      (e: unknown) => isToolReplayError(e, ErrorCodes.REPLAY_INCOMPLETE),
    )
  })
  test('upgrades pass through live modes unrecorded, and strict replay refuses them into the ledger', async () => {
    const store = createMemoryStore()
    const ws = get('https://api.test/socket', [['upgrade', 'websocket']])
    const rec = await openSession({ mode: 'record', trace: 't', store })
    assert.equal(rec.handleUpgrade(ws).kind, 'forward')
    await answer(rec, get('https://api.test/a'), 200, ['a'])
    await rec.close()
    assert.equal((await store.readTrace('t')).exchanges.length, 1, 'the upgrade is not recorded')
    const rep = await openSession({ mode: 'replay', trace: 't', store })
    replayedText(rep, get('https://api.test/a'))
    const d = rep.handleUpgrade(ws)
    assert.equal(d.kind, 'fail')
    if (d.kind === 'fail') assert.match(d.error.message, /upgrades \(WebSocket\) are not recorded, so strict replay refuses them/)
    assert.throws(
      () => rep.assertDone(),
      (e: unknown) => isToolReplayError(e, ErrorCodes.REPLAY_INCOMPLETE) && /1 unmatched/.test((e as Error).message),
    )
  })
  test('connections that are not HTTP: live modes let TCP through unrecorded; strict replay puts each in the ledger by host, port and protocol', async () => {
    const store = createMemoryStore()
    const pg = { transport: 'tcp', host: 'db.test', port: 5432, protocol: "PostgreSQL's port; not HTTP", remedy: 'Bridge it.' } as const
    const ntp = { transport: 'udp', host: '198.18.0.4', port: 123, protocol: 'UDP', remedy: 'Keep it out.' } as const
    const rec = await openSession({ mode: 'record', trace: 't', store })
    assert.equal(rec.handleConnection(pg).kind, 'forward')
    assert.equal(rec.handleConnection(ntp).kind, 'forward')
    await answer(rec, get('https://api.test/a'), 200, ['a'])
    const recorded = await rec.close()
    assert.equal(recorded.passedThrough, 1, 'TCP passed through; UDP is not (the path cannot carry it)')
    assert.equal((await store.readTrace('t')).exchanges.length, 1, 'nothing of the connection is recorded')
    const rep = await openSession({ mode: 'replay', trace: 't', store })
    replayedText(rep, get('https://api.test/a'))
    const d = rep.handleConnection(pg)
    assert.equal(d.kind, 'fail')
    if (d.kind === 'fail') {
      assert.equal(d.error.code, ErrorCodes.REPLAY_MISS)
      assert.match(d.error.message, /^Failed to replay a TCP connection to db\.test:5432 \(PostgreSQL's port; not HTTP\): .* Bridge it\.$/)
    }
    rep.handleConnection(pg) // a client's retry, right after: folded
    rep.handleConnection({ ...ntp, host: '2001:db8::1' })
    const s = await rep.close()
    assert.equal(s.ok, false)
    assert.deepEqual(
      s.misses.map((m) => [m.request, m.attempts ?? 1]),
      [
        ["TCP db.test:5432 (PostgreSQL's port; not HTTP)", 2],
        ['UDP [2001:db8::1]:123 (UDP)', 1],
      ],
    )
    assert.match(formatSummary(s), /TR_REPLAY_MISS TCP db\.test:5432/)
  })
  test('query secrets are redacted case-insensitively (Google-style key= too) and so is a URL password', async () => {
    const store = createMemoryStore()
    const rec = await openSession({ mode: 'record', trace: 't', store })
    await answer(rec, get('https://gen.test/v1/models?KEY=sk-q1&Access_Token=sk-q2&page=2'), 200, ['{}'])
    await answer(rec, get('https://user:sk-q3@basic.test/x'), 200, ['{}'])
    await rec.close()
    const urls = (await store.readTrace('t')).exchanges.map((x) => x.request.url)
    assert.deepEqual(urls, ['https://gen.test/v1/models?KEY=%5BREDACTED%5D&Access_Token=%5BREDACTED%5D&page=2', 'https://user:%5BREDACTED%5D@basic.test/x'])
  })
  test('refuse(): a request a capture path could not hand over counts in strict replay only', async () => {
    const store = createMemoryStore()
    const rec = await openSession({ mode: 'record', trace: 't', store })
    const tooBig = new ToolReplayError(ErrorCodes.PROXY_BAD_REQUEST, 'body too large')
    rec.refuse({ method: 'POST', url: 'https://api.test/upload' }, tooBig)
    assert.equal(rec.ledger.length, 0)
    await rec.close()
    const rep = await openSession({ mode: 'replay', trace: 't', store })
    rep.refuse({ method: 'POST', url: 'https://api.test/upload?api_key=sk-x' }, tooBig)
    assert.deepEqual(
      rep.ledger.map((e) => e.request),
      ['POST https://api.test/upload?api_key=%5BREDACTED%5D'],
    )
    assert.throws(
      () => rep.assertDone(),
      (e: unknown) => isToolReplayError(e, ErrorCodes.REPLAY_INCOMPLETE),
    )
  })
})
