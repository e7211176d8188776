import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { ErrorCodes, isToolReplayError } from '../trace/index.ts'
import { commitEvidence } from './commit-evidence.ts'
import { assertContracts, checkContracts, formatContractReport } from './contracts.ts'
import { faultsFromObject } from './faults-file.ts'
import { type ExchangeSpec, traceOf } from './fixtures/trace-builder.ts'

const API = 'http://shipping.test'
const order = '{"orderId":"o-1","rateId":"r-eco"}'
const lost = { rule: 'lost-ack', kind: 'response_lost' as const, phase: 'after-response' as const }

/** POST /shipments as the app sent it; `ship` is the shipment id the upstream committed. */
const post = (ship: string, extra: Partial<ExchangeSpec> = {}): ExchangeSpec => ({
  method: 'POST',
  url: `${API}/shipments`,
  requestBody: order,
  status: 201,
  body: `{"shipment":{"id":"${ship}"}}`,
  ...extra,
})

const config = (contracts: unknown[], extra: Record<string, unknown> = {}) =>
  faultsFromObject({
    rules: [{ id: 'lost-ack', target: { method: 'POST', url: '/shipments' }, fault: 'response_lost', calls: [1] }],
    effects: [{ target: { method: 'POST', url: '/shipments' }, id: '$.shipment.id', name: 'shipment' }],
    contracts,
    ...extra,
  })

const lostAck = (ship: string, seqStart = 0): ExchangeSpec =>
  post(ship, {
    status: undefined,
    error: 'ECONNRESET',
    startMs: seqStart,
    fault: { ...lost, upstreamStatus: 201, upstreamBody: `{"shipment":{"id":"${ship}"}}` },
  })

describe('commit evidence', () => {
  test('a response the app never saw still committed; GETs and failures commit nothing', () => {
    const trace = traceOf('t', [
      { url: `${API}/rates` },
      lostAck('s-1'),
      post('s-2'),
      post('x', { status: 500 }),
      post('s-9', { status: undefined, error: 'ECONNREFUSED', fault: { rule: 'down', kind: 'blackout', phase: 'before-forward' } }),
    ])
    const effects = commitEvidence(trace, config([]).effects)
    assert.deepEqual(
      effects.map((e) => [e.label, e.id, e.seenByApp, e.fault]),
      [
        ['#1 POST /shipments', 's-1', false, 'lost-ack'],
        ['#2 POST /shipments', 's-2', true, undefined],
      ],
    )
  })

  test('without an id path the idempotency-key names the effect; a header id is read from the upstream response', () => {
    const key = (k: string) => [['idempotency-key', k]] as Array<[string, string]>
    const trace = traceOf('t', [
      post('s-1', { requestHeaders: key('k1') }),
      post('s-1', { requestHeaders: key('k1'), headers: [['location', '/shipments/s-1']] }),
    ])
    const byKey = commitEvidence(trace, faultsFromObject({ rules: [], effects: [{ target: { url: '/shipments' } }], contracts: [] }).effects)
    assert.deepEqual(
      byKey.map((e) => [e.id, e.idFrom]),
      [
        ['k1', 'idempotency-key'],
        ['k1', 'idempotency-key'],
      ],
    )
    const byHeader = commitEvidence(
      trace,
      faultsFromObject({ rules: [], effects: [{ target: { url: '/shipments' }, id: 'header:location' }], contracts: [] }).effects,
    )
    assert.deepEqual(
      byHeader.map((e) => [e.id, e.idFrom]),
      [
        ['exchange #0', 'exchange'],
        ['/shipments/s-1', 'header'],
      ],
    )
  })
})

describe('contracts: the broken app fails, the corrected app passes', () => {
  test('no-duplicate-effects: unchecked retry after a lost ack commits twice; an idempotent retry commits once', () => {
    const c = config(['no-duplicate-effects'])
    const broken = checkContracts(traceOf('unchecked', [{ url: `${API}/rates` }, lostAck('s-1'), post('s-2')]), c)
    assert.equal(broken.ok, false)
    assert.equal(
      broken.results[0]?.violations[0]?.message,
      `#1 POST /shipments and #2 POST /shipments committed shipment s-1 and s-2 for one call (the same request: POST /shipments {"orderId":"o-1","rateId":"r-eco"}); the app never got the answer of #1 (fault rule lost-ack)`,
    )
    assert.deepEqual(broken.results[0]?.violations[0]?.exchanges, [1, 2])
    const fixed = checkContracts(traceOf('idempotent', [{ url: `${API}/rates` }, lostAck('s-1'), post('s-1', { status: 200 })]), c)
    assert.equal(fixed.ok, true)
    assert.equal(fixed.results[0]?.summary, '1 effect(s) committed, none twice for one call')
    // A group path makes requests with different bodies one logical call (here: one order).
    const grouped = config(['no-duplicate-effects'], {
      effects: [{ target: { url: '/shipments' }, id: '$.shipment.id', group: '$.orderId', name: 'shipment' }],
    })
    const differentBodies = traceOf('b', [post('s-1'), post('s-2', { requestBody: '{"orderId":"o-1","attempt":2}' })])
    assert.match(checkContracts(differentBodies, grouped).results[0]?.summary ?? '', /committed shipment s-1 and s-2 for one call \(\$\.orderId = "o-1"\)/)
    assert.equal(checkContracts(differentBodies, c).ok, true, 'without the group they are two different calls')
  })

  test('max-calls: total and per target', () => {
    const trace = traceOf('t', [{ url: `${API}/rates` }, post('s-1', { status: 503 }), post('s-1', { status: 503 }), post('s-1')])
    const total = checkContracts(trace, config([{ 'max-calls': 3 }]))
    assert.equal(total.results[0]?.summary, '4 calls (#0 GET /rates, #1 POST /shipments, #2 POST /shipments and #3 POST /shipments), at most 3 allowed')
    const perTarget = checkContracts(trace, config([{ 'max-calls': { limit: 2, target: { method: 'POST', url: '/shipments' } } }]))
    assert.equal(perTarget.ok, false)
    assert.match(perTarget.results[0]?.contract ?? '', /max-calls 2 \(POST \/shipments\)/)
    assert.equal(checkContracts(trace, config([{ 'max-calls': { limit: 3, target: { url: '/shipments' } } }])).ok, true)
  })

  test('honours-retry-after: a retry before the delay the 429 asked for fails; waiting passes; retry-after-ms wins over retry-after', () => {
    const limited = (startMs: number) =>
      post('x', {
        status: 429,
        startMs,
        headersMs: 2,
        headers: [
          ['retry-after', '2'],
          ['retry-after-ms', '1500'],
        ],
      })
    const c = config(['honours-retry-after'])
    const broken = checkContracts(traceOf('t', [limited(0), post('s-1', { startMs: 102 })]), c)
    assert.equal(broken.results[0]?.summary, '#1 POST /shipments was sent 100 ms after #0 POST /shipments got 429 asking to wait 1.5 s (retry-after-ms: 1500)')
    assert.equal(checkContracts(traceOf('t', [limited(0), post('s-1', { startMs: 1502 })]), c).ok, true)
    assert.equal(checkContracts(traceOf('t', [limited(0), post('s-1', { startMs: 1450 })]), config([{ 'honours-retry-after': { toleranceMs: 60 } }])).ok, true)
    // Per host: any request to the host counts, not only the retry.
    const other = traceOf('t', [limited(0), { url: `${API}/rates`, startMs: 50 }])
    assert.equal(checkContracts(other, c).ok, true)
    assert.equal(checkContracts(other, config([{ 'honours-retry-after': { scope: 'host' } }])).ok, false)
  })

  test('bounded-retries: attempts after failures count; a repeat after a success is a new call', () => {
    const fail = post('x', { status: 503 })
    const c = config([{ 'bounded-retries': 2 }])
    const broken = checkContracts(traceOf('t', [fail, fail, fail, post('s-1')]), c)
    assert.equal(
      broken.results[0]?.summary,
      '#0 POST /shipments, #1 POST /shipments, #2 POST /shipments and #3 POST /shipments: 4 attempts of one call (3 retries), at most 2 retries allowed',
    )
    assert.equal(checkContracts(traceOf('t', [fail, fail, post('s-1'), post('s-2'), fail, post('s-3')]), c).ok, true)
    assert.equal(checkContracts(traceOf('t', [post('x', { error: 'ECONNRESET' }), post('s-1')]), config([{ 'bounded-retries': 0 }])).ok, false)
  })

  test('all-rules-fired: a rule whose target matched nothing fails, unless optional', () => {
    const c = config(['all-rules-fired'], {
      rules: [
        { id: 'lost-ack', target: { method: 'POST', url: '/shipments' }, fault: 'response_lost', calls: [1] },
        { id: 'typo', target: { url: '/shipmnets' }, fault: 'timeout' },
      ],
    })
    const report = checkContracts(traceOf('t', [lostAck('s-1'), post('s-1')]), c)
    assert.equal(
      report.results[0]?.summary,
      'rule "typo" (timeout on * /shipmnets) never fired: its target * /shipmnets matched no request: check the method and URL pattern',
    )
    const optional = config(['all-rules-fired'], {
      rules: [
        { id: 'lost-ack', target: { method: 'POST', url: '/shipments' }, fault: 'response_lost', calls: [1] },
        { id: 'typo', target: { url: '/shipmnets' }, fault: 'timeout', optional: true },
      ],
    })
    assert.equal(checkContracts(traceOf('t', [lostAck('s-1'), post('s-1')]), optional).ok, true)
    assert.equal(checkContracts(traceOf('t', [post('s-1')]), config(['all-rules-fired'])).ok, false, 'a rule with matches but no fault record did not fire')
  })

  test('assertContracts throws TR_CONTRACT_VIOLATED with the readable report and the seed; the report is deterministic', () => {
    const trace = traceOf('unchecked', [lostAck('s-1'), post('s-2')])
    const c = config(['no-duplicate-effects', { 'max-calls': 5 }, 'all-rules-fired'])
    assert.throws(
      () => assertContracts(trace, c),
      (err: unknown) =>
        isToolReplayError(err, ErrorCodes.CONTRACT_VIOLATED) && /breaks 1 behaviour contract/.test(err.message) && /faults seed 42/.test(err.message),
    )
    assert.equal(
      formatContractReport(checkContracts(trace, c)),
      [
        'check "unchecked" (2 exchanges)',
        'FAIL  no-duplicate-effects  #0 POST /shipments and #1 POST /shipments committed shipment s-1 and s-2 for one call (the same request: POST /shipments {"orderId":"o-1","rateId":"r-eco"}); the app never got the answer of #0 (fault rule lost-ack)',
        'PASS  max-calls 5           2 call(s), at most 5',
        'PASS  all-rules-fired       1 of 1 rule(s) fired (lost-ack ×1)',
        'effects: shipment s-1 by #0 (the app never got the answer: fault rule lost-ack), shipment s-2 by #1',
        'faults seed 42 (recorded in the trace)',
        '1 of 3 contract(s) failed.',
      ].join('\n'),
    )
  })
})
