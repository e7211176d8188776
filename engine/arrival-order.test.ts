import assert from 'node:assert/strict'
import { test } from 'node:test'
import { setTimeout as delay } from 'node:timers/promises'
import { ArrivalOrder } from './arrival-order.ts'

test('turns run in ticket order, whatever order the requests come in', async () => {
  const order = new ArrivalOrder(1000)
  const [a, b, c] = [order.ticket(), order.ticket(), order.ticket()]
  const ran: string[] = []
  const pc = c.turn(() => ran.push('c'))
  const pb = b.turn(() => ran.push('b'))
  assert.equal(ran.length, 0, 'b and c wait for a')
  const first = a.turn(() => ran.push('a'))
  assert.equal(first, 1, "a's turn runs at once, synchronously")
  await Promise.all([pb, pc])
  assert.deepEqual(ran, ['a', 'b', 'c'])
})

test('a ticket given up (connection closed) stops holding the others; one that makes no progress is skipped after the wait', async () => {
  // A wait far longer than the delays below, so a loaded machine's late timers cannot skip `idle` early.
  const order = new ArrivalOrder(1500)
  const [gone, idle, later] = [order.ticket(), order.ticket(), order.ticket()]
  const ran: string[] = []
  const p = later.turn(() => ran.push('later'))
  gone.release()
  await delay(20)
  idle.progress()
  await delay(100)
  assert.equal(ran.length, 0, 'idle made progress recently: it still holds its place')
  // (The order's own timer does not keep a process alive; a socket would. Here a bounded wait does.)
  await Promise.race([p, delay(10_000)])
  assert.deepEqual(ran, ['later'])
  // The skipped ticket's request, when it finally comes, runs at once.
  assert.equal(
    idle.turn(() => 'idle ran'),
    'idle ran',
  )
})
