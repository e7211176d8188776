import assert from 'node:assert/strict'
import { test } from 'node:test'
import { loadedAsTestPreload, resolveTestTrace } from './test-trace.ts'

const SETUP = /(tool-replay\/proxy-node-test|shared-session-node-test\.[cm]?[jt]s)$/

test('a preloaded setup runs in a test file process, not in the `node --test` parent that only spawns them', () => {
  // `node --import tool-replay/proxy-node-test --test a.test.mjs`: the parent runs no test itself.
  assert.equal(loadedAsTestPreload(SETUP, ['--import', 'tool-replay/proxy-node-test', '--test'], {}), false)
  // Each child the runner spawns carries NODE_TEST_CONTEXT.
  assert.equal(loadedAsTestPreload(SETUP, ['--import', 'tool-replay/proxy-node-test', '--test'], { NODE_TEST_CONTEXT: 'child-v8' }), true)
  assert.equal(loadedAsTestPreload(SETUP, ['--import=tool-replay/proxy-node-test', '--test', '--test-isolation=none'], {}), true)
  assert.equal(loadedAsTestPreload(SETUP, ['--import', '/repo/proxy/shared-session-node-test.ts'], {}), true, 'node --import SETUP file.test.mjs')
  assert.equal(loadedAsTestPreload(SETUP, ['--import', 'tool-replay/node-test'], {}), false, 'another setup was preloaded')
  assert.equal(loadedAsTestPreload(SETUP, [], {}), false, 'imported by a test file, not preloaded')
})

test('the trace of a test file: option, else TOOL_REPLAY_TRACE as a group, else the file name', () => {
  assert.deepEqual(resolveTestTrace({ env: {}, testFile: '/t/orders.test.mjs' }), { mode: 'replay', trace: 'orders' })
  assert.deepEqual(resolveTestTrace({ env: { TOOL_REPLAY_TRACE: 'suite', TOOL_REPLAY_MODE: 'record' }, testFile: '/t/orders.test.mjs' }), {
    mode: 'record',
    trace: 'suite:orders',
  })
  assert.deepEqual(resolveTestTrace({ env: { TOOL_REPLAY_TRACE: 'suite' }, trace: 'mine', mode: 'update' }), { mode: 'update', trace: 'mine' })
  assert.throws(() => resolveTestTrace({ env: { TOOL_REPLAY_MODE: 'recrod' } }), {
    code: 'TR_INVALID_OPTION',
    message: /TOOL_REPLAY_MODE="recrod" is not a mode/,
  })
})
