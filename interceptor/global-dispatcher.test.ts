import assert from 'node:assert/strict'
import { test } from 'node:test'
import { runInNewContext } from 'node:vm'
import { Agent, getGlobalDispatcher } from 'undici'
import { createMemoryStore } from '../store/index.ts'
import { isToolReplayError } from '../trace/index.ts'
import { currentGlobalDispatchers, globalFetchIsCapturable, installGlobalDispatcher } from './global-dispatcher.ts'
import { install } from './install.ts'

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

test("a fetch from another realm (jest's environments) is not capturable, and a global install() refuses", async (t) => {
  assert.equal(globalFetchIsCapturable(), true)
  const realFetch = globalThis.fetch
  // What jest does: the test realm's fetch is a function made in another realm, reading that realm's dispatcher.
  globalThis.fetch = runInNewContext('(function fetch() {})') as typeof fetch
  t.after(() => {
    globalThis.fetch = realFetch
  })
  assert.equal(globalFetchIsCapturable(), false)
  const store = createMemoryStore()
  await assert.rejects(install({ mode: 'replay', trace: 'x', store }), (err: unknown) => {
    assert.ok(isToolReplayError(err, 'TR_CAPTURE_UNAVAILABLE'), String(err))
    assert.match(err.message, /another JavaScript realm .* every request would reach the network/)
    return true
  })
  assert.deepEqual(await store.listTraces(), [], 'nothing was opened or recorded')
  // Routing requests explicitly does not depend on the global slots.
  await store.putTrace({ meta: { name: 'x', format: 1 }, exchanges: [], bodies: new Map() })
  const tr = await install({ mode: 'replay', trace: 'x', store, global: false })
  await tr.close()
})
