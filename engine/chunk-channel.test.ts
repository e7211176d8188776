import assert from 'node:assert/strict'
import { once } from 'node:events'
import { test } from 'node:test'
import { Worker } from 'node:worker_threads'
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

test('linear in its chunks: 256 KiB queued a byte at a time is read in order without moving the queue per chunk', async () => {
  // Each read shifted the queue: a queue past V8's fast left-trim moved whole per chunk (quadratic, minutes here).
  // Read in a worker thread: the test runner's async hook (an init and a destroy for every promise) makes each
  // awaited read here ten times what it costs an app, and this test alone took 2.4 s of the unit run.
  const drain = `
    const { parentPort, workerData } = require('node:worker_threads')
    import(workerData.module).then(async ({ ChunkChannel }) => {
      const channel = new ChunkChannel()
      for (let i = 0; i < workerData.n; i++) {
        if (channel.push({ bytes: new Uint8Array([i & 0xff]), atMs: 0 }) !== undefined) throw new Error('push ' + i + ' was held')
      }
      channel.end()
      const t0 = performance.now()
      let read = 0
      for await (const c of channel) if (c.bytes[0] !== (read++ & 0xff)) throw new Error('chunk ' + (read - 1) + ' out of order')
      parentPort.postMessage({ read, ms: performance.now() - t0 })
    })`
  const n = 256 * 1024
  const module = new URL('./chunk-channel.ts', import.meta.url).href
  const worker = new Worker(drain, { eval: true, execArgv: [], workerData: { module, n } })
  const failed = once(worker, 'error').then(([error]) => Promise.reject(error))
  const [{ read, ms }] = (await Promise.race([once(worker, 'message'), failed])) as [{ read: number; ms: number }]
  await worker.terminate()
  assert.equal(read, n)
  assert.ok(ms < 20_000, `${n} one-byte chunks took ${ms.toFixed(0)} ms to read`)
})
