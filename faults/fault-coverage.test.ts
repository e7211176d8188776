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
