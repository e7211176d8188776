import assert from 'node:assert/strict'
import { Readable } from 'node:stream'
import { test } from 'node:test'
import type { Playback } from '../engine/index.ts'
import { playBack, rawHeaderBuffers, readableKeepsChunksApart } from './playback.ts'
import { createResponseSink } from './response-sink.ts'

const enc = (s: string) => new TextEncoder().encode(s)

function response(chunks: Array<[string, number]>, headersMs = 0): Playback {
  return {
    kind: 'response',
    head: { status: 200, statusText: 'OK', headers: [['content-type', 'text/plain']] },
    headersMs,
    chunks: chunks.map(([s, atMs]) => ({ bytes: enc(s), atMs })),
    trailers: [],
  }
}

/** A legacy handler that logs every callback; `pauseOn` makes onData return false for that chunk. */
function recorder(pauseOn?: number) {
  const log: string[] = []
  let resume: (() => void) | undefined
  let n = 0
  let settle: () => void = () => {}
  const done = new Promise<void>((resolve) => {
    settle = resolve
  })
  const sink = createResponseSink({
    onHeaders(status, _raw, r) {
      resume = r
      log.push(`head ${status}`)
      return true
    },
    onData(chunk) {
      log.push(`data ${chunk.toString()}`)
      return ++n !== pauseOn
    },
    onComplete() {
      log.push('end')
      settle()
    },
    onError(err) {
      log.push(`error ${(err as Error & { code?: string }).code ?? err.message}`)
      settle()
    },
  })
  return { log, sink, done, resume: () => resume?.() }
}

test('one data callback per recorded chunk, in order, then the end', async () => {
  const r = recorder()
  playBack(
    response([
      ['a', 0],
      ['bb', 0],
      ['ccc', 0],
    ]),
    r.sink,
    { kind: 'none' },
  )
  await r.done
  assert.deepEqual(r.log, ['head 200', 'data a', 'data bb', 'data ccc', 'end'])
})

test('a paused consumer gets nothing more until it resumes', async () => {
  const r = recorder(1)
  playBack(
    response([
      ['a', 0],
      ['b', 0],
      ['c', 0],
    ]),
    r.sink,
    { kind: 'none' },
  )
  await new Promise((resolve) => setTimeout(resolve, 10))
  assert.deepEqual(r.log, ['head 200', 'data a'])
  r.resume()
  await r.done
  assert.deepEqual(r.log, ['head 200', 'data a', 'data b', 'data c', 'end'])
})

test('abort stops playback and reports the reason once', async () => {
  const r = recorder()
  r.sink.controller.onAbort((reason) => r.sink.error(reason))
  r.sink.controller.pause()
  playBack(
    response([
      ['a', 0],
      ['b', 0],
    ]),
    r.sink,
    { kind: 'none' },
  )
  r.sink.controller.abort(new Error('stop'))
  await r.done
  assert.deepEqual(r.log, ['head 200', 'error stop'])
})

test('pace scales the recorded delays', async () => {
  const r = recorder()
  const t0 = performance.now()
  playBack(
    response(
      [
        ['a', 20],
        ['b', 40],
      ],
      10,
    ),
    r.sink,
    { kind: 'recorded', factor: 1 },
  )
  await r.done
  assert.ok(performance.now() - t0 >= 38)
  const fast = recorder()
  const t1 = performance.now()
  playBack(response([['a', 2000]], 1000), fast.sink, { kind: 'none' })
  await fast.done
  // The recording waited 2000 ms; unpaced playback must not (generous bound for loaded CI machines).
  assert.ok(performance.now() - t1 < 1000)
})

test('a recorded mid-body failure replays head, partial chunks, then the error after a macrotask', async () => {
  const r = recorder()
  const playback: Playback = {
    kind: 'error',
    error: { code: 'ECONNRESET', message: 'read ECONNRESET', phase: 'response-body' },
    headersMs: 0,
    head: { status: 200, statusText: 'OK', headers: [] },
    chunks: [{ bytes: enc('part'), atMs: 0 }],
  }
  playBack(playback, r.sink, { kind: 'none' })
  await Promise.resolve()
  assert.deepEqual(r.log, ['head 200', 'data part'], 'the error waits for a macrotask')
  await r.done
  assert.deepEqual(r.log, ['head 200', 'data part', 'error ECONNRESET'])
})

test('a recorded connect failure replays as the error alone', async () => {
  const r = recorder()
  playBack({ kind: 'error', error: { code: 'ECONNREFUSED', message: 'connect ECONNREFUSED', phase: 'connect' }, headersMs: 0, chunks: [] }, r.sink, {
    kind: 'none',
  })
  await r.done
  assert.deepEqual(r.log, ['error ECONNREFUSED'])
})

test('rawHeaderBuffers keeps repeated headers and caches per header list', () => {
  const pairs: Array<[string, string]> = [
    ['Set-Cookie', 'a'],
    ['Set-Cookie', 'b'],
  ]
  const raw = rawHeaderBuffers(pairs)
  assert.deepEqual(
    raw.map((b) => b.toString()),
    ['Set-Cookie', 'a', 'Set-Cookie', 'b'],
  )
  assert.equal(rawHeaderBuffers(pairs), raw)
})

test('the Readable probe says what an async iterator over a Readable (fetch reads its body so) does with chunks pushed together', async () => {
  const r = new Readable({ read() {} })
  for (const s of ['a', 'b', 'c']) r.push(Buffer.from(s))
  r.push(null)
  let reads = 0
  for await (const _ of r) reads++
  assert.equal(readableKeepsChunksApart(), reads === 3)
})
