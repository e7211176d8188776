import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Dispatcher } from 'undici'
import { openSession } from '../engine/index.ts'
import { createMemoryStore } from '../store/index.ts'
import { LateRequestDispatcher } from './late-requests.ts'
import { RecordReplayDispatcher } from './record-replay-dispatcher.ts'
import { loadedUndici, loadUndici, UndiciDispatcher } from './undici-loader.ts'

test("the base class taken from undici's file is the Dispatcher undici exports, API methods and all", async () => {
  assert.equal(UndiciDispatcher, Dispatcher)
  const undici = await loadUndici()
  assert.equal(loadedUndici(), undici)
  assert.equal(undici.Dispatcher, UndiciDispatcher)
  assert.equal(Object.getPrototypeOf(RecordReplayDispatcher), Dispatcher)
  assert.equal(Object.getPrototypeOf(LateRequestDispatcher), Dispatcher)
  const dispatcher = new RecordReplayDispatcher({ session: await openSession({ mode: 'record', trace: 't', store: createMemoryStore() }) })
  assert.ok(dispatcher instanceof Dispatcher)
  for (const method of ['request', 'stream', 'pipeline', 'connect', 'upgrade', 'compose'] as const) assert.equal(typeof dispatcher[method], 'function', method)
  await dispatcher.session.close()
  await dispatcher.close()
})
