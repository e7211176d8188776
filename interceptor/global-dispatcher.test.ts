import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Agent, getGlobalDispatcher } from 'undici'
import { currentGlobalDispatchers, installGlobalDispatcher } from './global-dispatcher.ts'

test('installGlobalDispatcher fills both undici slots and its undo restores them (idempotent, nested)', async () => {
  const before = currentGlobalDispatchers()
  const outer = new Agent()
  const inner = new Agent()
  const undoOuter = installGlobalDispatcher(outer)
  assert.deepEqual(currentGlobalDispatchers(), { v1: outer, v2: outer })
  assert.equal(getGlobalDispatcher(), outer)
  const undoInner = installGlobalDispatcher(inner)
  assert.equal(getGlobalDispatcher(), inner)
  undoInner()
  undoInner()
  assert.deepEqual(currentGlobalDispatchers(), { v1: outer, v2: outer })
  undoOuter()
  assert.deepEqual(currentGlobalDispatchers(), before)
  await Promise.all([outer.close(), inner.close()])
})
