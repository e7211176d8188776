import assert from 'node:assert/strict'
import { test } from 'node:test'
import { resolveTestSetup, traceNameForTestFile } from './interceptor-setup.ts'

test('trace names derive from the test file: its path from the project root, or its name outside one', () => {
  assert.equal(traceNameForTestFile('/repo/e2e/checkout.test.ts'), 'checkout', 'no package.json above it')
  assert.equal(traceNameForTestFile('src/orders.spec.mjs'), 'src:orders', 'relative to the cwd, inside this checkout')
  assert.equal(traceNameForTestFile('C:/x/weird name!.test.js', '/nowhere'), 'weird-name-')
  assert.equal(traceNameForTestFile('/nowhere/plain.js', '/nowhere'), 'plain')
})

test('options win over TOOL_REPLAY_* variables, which win over defaults', () => {
  assert.deepEqual(resolveTestSetup({ env: {}, testFile: '/t/a.test.ts' }), { mode: 'replay', trace: 'a', storeDir: undefined })
  assert.deepEqual(
    resolveTestSetup({ env: { TOOL_REPLAY_MODE: 'record', TOOL_REPLAY_TRACE: 'env-trace', TOOL_REPLAY_STORE: '/s' }, testFile: '/t/a.test.ts' }),
    {
      mode: 'record',
      trace: 'env-trace:a',
      storeDir: '/s',
    },
  )
  assert.deepEqual(resolveTestSetup({ mode: 'update', trace: 'opt', storeDir: '/o', env: { TOOL_REPLAY_MODE: 'record', TOOL_REPLAY_TRACE: 'env' } }), {
    mode: 'update',
    trace: 'opt',
    storeDir: '/o',
  })
})

test('an unknown TOOL_REPLAY_MODE is TR_INVALID_OPTION naming the valid modes', () => {
  assert.throws(() => resolveTestSetup({ env: { TOOL_REPLAY_MODE: 'replya' } }), {
    code: 'TR_INVALID_OPTION',
    message: 'TOOL_REPLAY_MODE="replya" is not a mode. Use one of: record, replay, passthrough, update.',
  })
})
