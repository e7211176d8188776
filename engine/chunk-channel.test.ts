import assert from 'node:assert/strict'
import { test } from 'node:test'
import { ChunkChannel } from './chunk-channel.ts'

const chunk = (n: number) => ({ bytes: new Uint8Array(n), atMs: 0 })

test('a producer past the high-water mark waits until the reader caught up; the reader gets every chunk, then the end', async () => {
  const channel = new ChunkChannel()
  assert.equal(channel.push(chunk(600 * 1024)), undefined)
  const waiting = channel.push(chunk(600 * 1024))
  assert.ok(waiting instanceof Promise, 'over 1 MiB unread: the producer is told to wait')
  let released = false
  void waiting.then(() => (released = true))
  await new Promise((resolve) => setImmediate(resolve))
  assert.equal(released, false)
  channel.end()
  const sizes: number[] = []
  for await (const c of channel) sizes.push(c.bytes.byteLength)
  assert.deepEqual(sizes, [600 * 1024, 600 * 1024])
  await waiting
})

test('a failure reaches the reader after the queued chunks; a reader that stops early releases the producer', async () => {
  const failing = new ChunkChannel()
  failing.push(chunk(3))
  failing.fail(Object.assign(new Error('reset'), { code: 'ECONNRESET' }))
  const got: number[] = []
  await assert.rejects(
    (async () => {
      for await (const c of failing) got.push(c.bytes.byteLength)
    })(),
    { code: 'ECONNRESET' },
  )
  assert.deepEqual(got, [3])

  const abandoned = new ChunkChannel()
  abandoned.push(chunk(1))
  const waiting = abandoned.push(chunk(2 * 1024 * 1024))
  for await (const _ of abandoned) break
  await waiting
  assert.equal(abandoned.closed, true)
  assert.equal(abandoned.push(chunk(1)), undefined, 'pushes after the reader left are dropped')
})
