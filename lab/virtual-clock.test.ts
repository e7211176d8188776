import assert from 'node:assert/strict'
import { test } from 'node:test'
import { VirtualClock } from './virtual-clock.ts'

test('sleeping moves virtual time at once; concurrent sleepers wake in time order', async () => {
  const clock = new VirtualClock()
  const woke: Array<[string, number]> = []
  const started = performance.now()
  await Promise.all([clock.sleep(30_000).then(() => woke.push(['long', clock.now()])), clock.sleep(2_000).then(() => woke.push(['short', clock.now()]))])
  assert.deepEqual(woke, [
    ['short', 2_000],
    ['long', 30_000],
  ])
  assert.ok(performance.now() - started < 1_000)
})

test('a timeout signal fires when a sleeper passes it and aborts that sleeper at the timeout', async () => {
  const clock = new VirtualClock()
  const t = clock.timeout(5_000)
  await assert.rejects(clock.sleep(30_000, t.signal), (err: Error) => err.name === 'TimeoutError')
  assert.equal(clock.now(), 5_000)
  // Nobody sleeps: a pending timeout never fires by itself (I/O takes no virtual time).
  const idle = clock.timeout(1)
  await new Promise((r) => setTimeout(r, 20))
  assert.equal(idle.signal.aborted, false)
  idle.clear()
  await clock.sleep(10)
  assert.equal(idle.signal.aborted, false)
  assert.equal(clock.now(), 5_010)
})
