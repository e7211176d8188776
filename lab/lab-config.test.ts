import assert from 'node:assert/strict'
import { test } from 'node:test'
import { findScenario, labConfig, runLab } from './index.ts'

test('probability replaces every rule schedule; the call budget adds a max-calls contract', () => {
  const s = findScenario('lost_ack')
  const plain = labConfig(s)
  assert.deepEqual(plain.rules[0]?.calls, [1])
  const knobs = labConfig(s, { probability: 0.25, callBudget: 2 })
  assert.equal(knobs.rules[0]?.probability, 0.25)
  assert.equal(knobs.rules[0]?.calls, undefined)
  assert.deepEqual(knobs.contracts.at(-1), { kind: 'max-calls', limit: 2 })
  assert.throws(() => labConfig(s, { probability: 2 }), { code: 'TR_INVALID_OPTION' })
  assert.throws(() => labConfig(s, { callBudget: 0 }), { code: 'TR_INVALID_OPTION' })
})

test('a call budget the agent overruns fails its policy, and the rerun line carries the knobs', async () => {
  const run = await runLab({ scenario: 'lost_ack', policies: ['idempotent'], callBudget: 2 })
  const r = run.runs[0]
  assert.equal(r?.verdict, 'FAIL')
  assert.ok(r?.problems.includes('over the call budget'), r?.problems.join('; '))
  assert.match(run.rerun, /--call-budget 2/)
})
