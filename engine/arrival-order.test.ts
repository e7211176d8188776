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

test('a ticket given up (connection closed) stops holding the others at once', () => {
  // A wait far longer than the test: only release() can let `later` run now.
  const order = new ArrivalOrder(60_000)
  const [gone, later] = [order.ticket(), order.ticket()]
  gone.release()
  assert.equal(
    later.turn(() => 'later ran'),
    'later ran',
    'runs synchronously: the released ticket holds no place',
  )
})

test('a ticket released while its turn waits still has its turn, in order: its caller is never left hanging', async () => {
  const order = new ArrivalOrder(60_000)
  const [first, waiting, after] = [order.ticket(), order.ticket(), order.ticket()]
  const ran: string[] = []
  const pw = waiting.turn(() => ran.push('waiting'))
  const pa = after.turn(() => ran.push('after'))
  // The client of `waiting` closes its connection while it waits (the proxy releases on close).
  waiting.release()
  first.turn(() => ran.push('first'))
  await Promise.all([pw, pa])
  assert.deepEqual(ran, ['first', 'waiting', 'after'])
})

test('a ticket that makes progress keeps its place past the wait; one that makes none is skipped after it', async () => {
  // Margins of a second or more either way, so a loaded machine's late timers cannot decide the outcome.
  const order = new ArrivalOrder(3000)
  const [idle, later] = [order.ticket(), order.ticket()]
  const ran: string[] = []
  const p = later.turn(() => ran.push('later'))
  await delay(1500)
  idle.progress()
  await delay(2000)
  // 3500 ms after it was issued, past the 3000 ms wait: only the progress at 1500 ms keeps it in place.
  assert.equal(ran.length, 0, 'idle made progress recently: it still holds its place')
  // (The order's own timer does not keep a process alive; a socket would. Here a bounded wait does.)
  await Promise.race([p, delay(10_000)])
  assert.deepEqual(ran, ['later'], 'with no more progress, idle is skipped')
  // The skipped ticket's request, when it finally comes, runs at once.
  assert.equal(
    idle.turn(() => 'idle ran'),
    'idle ran',
  )
})
