import assert from 'node:assert/strict'
import { test } from 'node:test'
import { buildTrace, chatTurn } from '../e2e/fixtures/fixture-trace.ts'
import { assertValidTrace, type Exchange, ToolReplayError, type Trace } from '../trace/index.ts'
import { driftUpdatedTrace, planDrift } from './drift-plan.ts'
import { driftReport, formatDriftText, type LiveAnswers, traceDriftReport } from './drift-report.ts'

const recorded = (): Trace =>
  buildTrace('shop', [
    {
      url: 'https://api.test/items/1?api_key=%5BREDACTED%5D',
      requestHeaders: [
        ['authorization', '[REDACTED]'],
        ['accept', 'application/json'],
      ],
      body: '{"id":1,"name":"a"}',
    },
    { method: 'POST', url: 'https://api.test/orders', requestBody: '{"sku":"A1","token":"[REDACTED]"}', status: 201, body: '{"order":7}' },
    chatTurn({ messages: [{ role: 'user', content: 'hi' }], content: 'hello' }),
    { method: 'HEAD', url: 'https://api.test/health', body: '' },
  ])

test('plan: safe methods are sent; other methods and model calls only when asked, each with its reason', () => {
  const plan = planDrift(recorded())
  assert.deepEqual(
    plan.map((p) => [p.label, p.kind, p.send, p.send ? '' : p.reason]),
    [
      ['GET https://api.test/items/1?api_key=%5BREDACTED%5D #0', 'safe', true, ''],
      ['POST https://api.test/orders #0', 'unsafe', false, 'POST is not a safe method: pass --unsafe to re-send it'],
      ['POST https://api.openai.com/v1/chat/completions #0', 'model', false, 'a model call (it costs tokens): pass --model-calls to re-send it'],
      ['HEAD https://api.test/health #0', 'safe', true, ''],
    ],
  )
  // --unsafe does not send model calls; --model-calls does not send other POSTs.
  assert.deepEqual(
    planDrift(recorded(), { unsafe: true }).map((p) => p.send),
    [true, true, false, true],
  )
  assert.deepEqual(
    planDrift(recorded(), { modelCalls: true }).map((p) => p.send),
    [true, false, true, true],
  )
})

test('plan: a redacted header is left out unless filled; redacted URL and body values are noted', () => {
  const [first, second] = planDrift(recorded(), { unsafe: true })
  assert.ok(first?.send && second?.send)
  assert.deepEqual(first.request.headers, [['accept', 'application/json']])
  assert.deepEqual(first.notes, [
    'header authorization was redacted in the recording and is sent without it (give it with --fill-header authorization=ENV_VAR)',
    'the URL holds a redacted value, sent as it was recorded',
  ])
  assert.deepEqual(second.notes, ['the request body holds a redacted value, sent as it was recorded'])
  assert.equal(new TextDecoder().decode(second.request.body ?? new Uint8Array()), '{"sku":"A1","token":"[REDACTED]"}')
  const [filled] = planDrift(recorded(), { fill: new Map([['authorization', 'Bearer real']]) })
  assert.ok(filled?.send)
  assert.deepEqual(filled.request.headers, [
    ['authorization', 'Bearer real'],
    ['accept', 'application/json'],
  ])
})

test('plan: an exchange a fork patched, or a fault answered before forwarding, is not compared with the live upstream', () => {
  const t = recorded()
  const x0 = t.exchanges[0] as Exchange
  const x3 = t.exchanges[3] as Exchange
  x0.origin = 'patched'
  x3.fault = { rule: 'r', kind: 'timeout', phase: 'before-forward', seed: 's', call: 1, upstream: null }
  const plan = planDrift(t)
  assert.deepEqual(
    [plan[0], plan[3]].map((p) => (p && !p.send ? p.reason : '')),
    ['a fork patched this answer: it is not what the upstream said', 'an injected fault answered it before forwarding: no upstream answer was recorded'],
  )
})

test('report and --update: drift, same, skipped and failed; the new trace keeps positions, start times and the rest as recorded', () => {
  const rec = recorded()
  const live = buildTrace('drift-live', [
    { url: 'https://api.test/items/1', body: '{"id":2,"title":"b"}' },
    { method: 'HEAD', url: 'https://api.test/health', body: '' },
  ])
  const answers: LiveAnswers = new Map<number, { trace: Trace; exchange: Exchange } | { error: ToolReplayError }>([
    [0, { trace: live, exchange: live.exchanges[0] as Exchange }],
    [3, { error: new ToolReplayError('TR_INTERNAL', 'boom') }],
  ])
  const report = traceDriftReport(rec, planDrift(rec), answers)
  assert.deepEqual(
    report.exchanges.map((e) => e.status),
    ['drift', 'skipped', 'skipped', 'failed'],
  )
  assert.deepEqual([report.checked, report.drifted, report.skipped, report.failed], [2, 1, 2, 1])
  assert.equal(
    formatDriftText(driftReport([report]))
      .split('\n')
      .slice(0, 5)
      .join('\n'),
    [
      'drift of trace "shop": 2 re-sent live, 1 drifted, 1 failed, 0 unchanged, 2 skipped',
      '  DRIFT GET https://api.test/items/1?api_key=%5BREDACTED%5D #0',
      '      removed $.name (string)',
      '      added $.title (string)',
      '      note: header authorization was redacted in the recording and is sent without it (give it with --fill-header authorization=ENV_VAR)',
    ].join('\n'),
  )
  assert.equal(driftReport([report]).drift, true)

  const updated = driftUpdatedTrace(rec, new Map([[0, { trace: live, exchange: live.exchanges[0] as Exchange }]]), 'shop.drift')
  assertValidTrace(updated)
  assert.equal(updated.meta.labels?.driftOf, 'shop')
  assert.equal(updated.exchanges.length, 4)
  assert.equal(updated.exchanges[0]?.request.url, 'https://api.test/items/1')
  assert.equal(updated.exchanges[0]?.timing.startMs, rec.exchanges[0]?.timing.startMs)
  assert.deepEqual(updated.exchanges.slice(1), rec.exchanges.slice(1))
  for (const x of updated.exchanges) if (x.outcome.kind === 'response') assert.ok(updated.bodies.has(x.outcome.response.body.digest))
})

test('report: a live answer that never reached the server (DNS, refused, timeout) is unreachable with its cause, not drift', () => {
  const rec = recorded()
  const live = buildTrace('drift-live', [
    { url: 'https://api.test/items/1', body: '' },
    { method: 'HEAD', url: 'https://api.test/health', body: '' },
  ])
  const cut = (code: string, phase: 'connect' | 'response-headers' | 'response-body'): Exchange => ({
    ...(live.exchanges[0] as Exchange),
    outcome: { kind: 'error', error: { code, message: `${code} api.test`, phase } },
  })
  const reportOf = (x: Exchange) =>
    traceDriftReport(
      rec,
      planDrift(rec),
      new Map([
        [0, { trace: live, exchange: x }],
        [3, { trace: live, exchange: live.exchanges[1] as Exchange }],
      ]),
    )
  for (const [code, phase] of [
    ['ENOTFOUND', 'connect'],
    ['ECONNREFUSED', 'connect'],
    ['UND_ERR_CONNECT_TIMEOUT', 'connect'],
    ['UND_ERR_HEADERS_TIMEOUT', 'response-headers'],
  ] as const) {
    const report = reportOf(cut(code, phase))
    assert.equal(report.exchanges[0]?.status, 'unreachable', code)
    assert.equal(report.exchanges[0]?.reason, `${code} during ${phase}: ${code} api.test`)
    assert.deepEqual([report.checked, report.drifted, report.unreachable, report.failed], [2, 0, 1, 0])
    const whole = driftReport([report])
    assert.deepEqual([whole.drift, whole.unreachable], [false, true])
    const text = formatDriftText(whole)
    assert.match(text, /^drift of trace "shop": 2 re-sent live, 0 drifted, 1 unreachable, 1 unchanged, 2 skipped\n {2}UNREACHABLE GET /)
    assert.match(text, /1 exchange\(s\) unreachable: the server could not be reached .* This is not drift/)
  }
  // A reset mid-body (the server answered) and a TLS failure are not reachability: they stay drift.
  for (const x of [cut('ECONNRESET', 'response-body'), cut('UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'connect')]) {
    assert.equal(reportOf(x).exchanges[0]?.status, 'drift')
  }
})

test('a WebSocket session is skipped as `websocket` with its reason (never re-sent as its upgrade GET alone); --update keeps its messages', async () => {
  const { realtimeTrace, weatherConversation } = await import('../e2e/fixtures/realtime-session.ts')
  const rt = realtimeTrace('voice', [weatherConversation()])
  const plan = planDrift(rt, { unsafe: true, modelCalls: true })
  assert.equal(plan[0]?.send, false)
  assert.match(plan[0]?.send === false ? plan[0].reason : '', /^websocket: a WebSocket session \(\d+ message\(s\)\) is not re-opened live/)
  const report = traceDriftReport(rt, plan, new Map())
  assert.deepEqual([report.checked, report.skipped], [0, 1])
  assert.match(
    formatDriftText(driftReport([report])),
    /\n {2}skip {2}GET https:\/\/api\.openai\.com\/v1\/realtime\?model=gpt-realtime #0: websocket: a WebSocket session/,
  )
  const updated = driftUpdatedTrace(rt, new Map(), 'voice.drift')
  for (const m of updated.exchanges[0]?.websocket?.messages ?? []) assert.ok(updated.bodies.has(m.body.digest), 'message body kept')
})
