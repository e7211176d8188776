import assert from 'node:assert/strict'
import { test } from 'node:test'
import { ErrorCodes, isToolReplayError } from '../trace/index.ts'
import { assertAllRulesFired, formatCoverage } from './fault-coverage.ts'
import { FaultPlanner } from './fault-planner.ts'
import { faultsFromObject } from './faults-file.ts'

const config = faultsFromObject({
  rules: [
    { id: 'lost-ack', target: { method: 'POST', url: '/shipments' }, fault: 'response_lost', calls: [1] },
    { id: 'typo', target: { url: '/shipmnets' }, fault: 'timeout' },
    { id: 'never-chosen', target: { url: '/shipments' }, fault: 'timeout', calls: [9] },
    { id: 'maybe', target: { url: '/nothing' }, fault: 'latency', optional: true, options: { ms: 5 } },
  ],
})

test('coverage counts eligible, selected and triggered per rule and explains each rule that never fired', () => {
  const planner = new FaultPlanner(config, { seed: '42' })
  for (let i = 0; i < 3; i++) {
    const d = planner.decide({ method: 'POST', url: 'http://s.test/shipments', headers: [] }, 0)
    if (d) planner.settle(d, true)
  }
  assert.equal(
    formatCoverage(planner.coverage),
    [
      'RULE          FAULT          TARGET           ELIGIBLE  SELECTED  TRIGGERED',
      'lost-ack      response_lost  POST /shipments  3         1         1',
      'typo          timeout        * /shipmnets     0         0         0          NEVER FIRED',
      'never-chosen  timeout        * /shipments     3         0         0          NEVER FIRED',
      'maybe         latency        * /nothing       0         0         0          never fired (optional)',
      'rule "typo" never fired: its target * /shipmnets matched no request: check the method and URL pattern.',
      'rule "never-chosen" never fired: its schedule chose none of the 3 matching request(s): check calls, first, probability, window or quota.',
    ].join('\n'),
  )
  assert.throws(
    () => assertAllRulesFired(planner.coverage, { seed: planner.seed, rerun: 'tr-proxy record --seed 42 -- npm test' }),
    (err: unknown) =>
      isToolReplayError(err, ErrorCodes.FAULT_NOT_FIRED) &&
      err.message.startsWith('2 fault rule(s) never fired') &&
      err.message.includes('"typo" (timeout on * /shipmnets)') &&
      err.message.endsWith('Faults seed 42; rerun: tr-proxy record --seed 42 -- npm test.'),
  )
})

test('a rule whose target matched only requests of the other kind says so: an HTTP fault on a WebSocket session, a ws_* fault on HTTP', () => {
  const planner = new FaultPlanner(
    faultsFromObject({
      rules: [
        { id: 'slow-live', target: { url: '/live' }, fault: 'latency', options: { ms: 5 } },
        { id: 'cut-api', target: { url: '/api' }, fault: 'ws_close', options: { afterMessages: 1 } },
      ],
    }),
    { seed: '1' },
  )
  for (let i = 0; i < 2; i++) {
    assert.equal(planner.decide({ method: 'GET', url: 'ws://s.test/live', headers: [] }, 0, true), undefined)
    assert.equal(planner.decide({ method: 'GET', url: 'http://s.test/api', headers: [] }, 0), undefined)
  }
  const [live, api] = planner.coverage
  assert.deepEqual([live?.eligible, api?.eligible], [0, 0])
  assert.throws(
    () => assertAllRulesFired(planner.coverage, { seed: planner.seed, rerun: 'tr-proxy record -- npm test' }),
    (err: unknown) =>
      isToolReplayError(err, ErrorCodes.FAULT_NOT_FIRED) &&
      err.message.includes(
        'its target * /live matched no request it applies to: a WebSocket session matched its target, and latency acts on HTTP responses only: use ws_close, ws_drop or ws_delay for a session',
      ) &&
      err.message.includes(
        'its target * /api matched no request it applies to: an HTTP request matched its target, and ws_close acts on WebSocket sessions only',
      ),
  )
  assert.equal(live?.notes.length, 1, 'the note is kept once')
})
