import assert from 'node:assert/strict'
import { test } from 'node:test'
import { FAULTS_SEED_ENV, rerunCommand, resolveSeed, seedLine } from './fault-seed.ts'

test('the seed in use: option, then environment, then file, then a random one', () => {
  assert.deepEqual(resolveSeed({ option: 5, env: { [FAULTS_SEED_ENV]: '6' }, file: '7' }), { seed: '5', source: 'option' })
  assert.deepEqual(resolveSeed({ env: { [FAULTS_SEED_ENV]: '6' }, file: '7' }), { seed: '6', source: 'env' })
  assert.deepEqual(resolveSeed({ env: {}, file: '7' }), { seed: '7', source: 'file' })
  const random = resolveSeed({ env: {} })
  assert.equal(random.source, 'random')
  assert.match(random.seed, /^\d+$/)
})

test('the rerun command replaces any --seed and keeps a wrapped command after --', () => {
  assert.equal(rerunCommand(['tr-proxy', 'demo', '--scenario', 'lost_ack', '--seed', '1'], '42'), 'tr-proxy demo --scenario lost_ack --seed 42')
  assert.equal(
    rerunCommand(['tr-proxy', 'record', '--seed=3', '--faults', 'f.yaml', '--', 'npm', 'run', 'it works'], '9'),
    "tr-proxy record --faults f.yaml --seed 9 -- npm run 'it works'",
  )
  assert.equal(seedLine('42', 'random', 'tr-proxy demo --seed 42'), 'faults seed 42 (random); rerun: tr-proxy demo --seed 42')
})
