import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Dispatcher } from 'undici'
import { openSession } from '../engine/index.ts'
import { createMemoryStore } from '../store/index.ts'
import { DispatcherShell } from './dispatcher-shell.ts'
import { LateRequestDispatcher } from './late-requests.ts'
import { RecordReplayDispatcher } from './record-replay-dispatcher.ts'
import { loadedUndici, loadUndici, UndiciDispatcher } from './undici-loader.ts'

test("the base class taken from undici's file is the Dispatcher undici exports, API methods and all", async () => {
  assert.equal(UndiciDispatcher, Dispatcher)
  const undici = await loadUndici()
  assert.equal(loadedUndici(), undici)
  assert.equal(undici.Dispatcher, UndiciDispatcher)
  // Tool Replay's dispatchers are built on one shell (close/destroy once), which extends undici's Dispatcher.
  assert.equal(Object.getPrototypeOf(DispatcherShell), Dispatcher)
  assert.equal(Object.getPrototypeOf(RecordReplayDispatcher), DispatcherShell)
  assert.equal(Object.getPrototypeOf(LateRequestDispatcher), DispatcherShell)
  const dispatcher = new RecordReplayDispatcher({ session: await openSession({ mode: 'record', trace: 't', store: createMemoryStore() }) })
  assert.ok(dispatcher instanceof Dispatcher)
  for (const method of ['request', 'stream', 'pipeline', 'connect', 'upgrade', 'compose'] as const) assert.equal(typeof dispatcher[method], 'function', method)
  await dispatcher.session.close()
  await dispatcher.close()
})

test('the shell gives close and destroy both ways: a promise, or a callback once done; destroy passes its error', async () => {
  const calls: Array<string> = []
  class Probe extends DispatcherShell {
    override dispatch(): boolean {
      return false
    }
    protected override closing(): Promise<void> {
      calls.push('closing')
      return Promise.resolve()
    }
    protected override destroying(err: Error | null): Promise<void> {
      calls.push(`destroying ${err?.message ?? 'null'}`)
      return Promise.resolve()
    }
  }
  const probe = new Probe()
  assert.equal(await probe.close(), undefined)
  assert.equal(
    await new Promise<string>((resolve) =>
      assert.equal(
        probe.close(() => resolve('called')),
        undefined,
      ),
    ),
    'called',
  )
  await probe.destroy()
  await probe.destroy(new Error('boom'))
  await new Promise<void>((resolve) => probe.destroy(new Error('cb'), resolve))
  await new Promise<void>((resolve) => probe.destroy(resolve))
  assert.deepEqual(calls, ['closing', 'closing', 'destroying null', 'destroying boom', 'destroying cb', 'destroying null'])
})
