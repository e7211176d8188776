import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { Dispatcher } from 'undici'
import { createResponseSink, parseRawHeaders, ResponseController } from './response-sink.ts'

const raw = (...kv: string[]) => kv.map((s) => Buffer.from(s, 'latin1'))

test('parseRawHeaders lowercases names and keeps repeated fields as arrays', () => {
  assert.deepEqual(parseRawHeaders(raw('Content-Type', 'text/plain', 'Set-Cookie', 'a=1', 'set-cookie', 'b=2')), {
    'content-type': 'text/plain',
    'set-cookie': ['a=1', 'b=2'],
  })
})

test('a legacy handler gets raw Buffers; returning false pauses; resume() resumes; calls after the end are ignored', () => {
  const calls: string[] = []
  let resume: (() => void) | undefined
  const sink = createResponseSink({
    onConnect: () => calls.push('connect'),
    onHeaders(status, headers, r, statusText) {
      resume = r
      calls.push(`headers ${status} ${statusText} ${headers.length}`)
      return true
    },
    onData(chunk) {
      calls.push(`data ${chunk.toString()}`)
      return false
    },
    onComplete: () => calls.push('complete'),
    onError: (e) => calls.push(`error ${e.message}`),
  })
  sink.start()
  assert.equal(sink.responseStart(200, raw('a', '1'), 'OK'), true)
  assert.equal(sink.data(Buffer.from('x')), false)
  assert.equal(sink.controller.paused, true)
  resume?.()
  assert.equal(sink.controller.paused, false)
  sink.end([])
  sink.error(new Error('late'))
  assert.deepEqual(calls, ['connect', 'headers 200 OK 2', 'data x', 'complete'])
  assert.equal(sink.finished, true)
})

test('a controller handler gets parsed headers, controller.rawHeaders, and pauses through the controller', () => {
  const seen: unknown[] = []
  const handler: Dispatcher.DispatchHandler = {
    onResponseStart(controller, status, headers) {
      seen.push(status, headers, controller.rawHeaders?.length)
    },
    onResponseData(controller, chunk) {
      seen.push(chunk.toString())
      controller.pause()
    },
    onResponseError(_c, err) {
      seen.push(err.message)
    },
  }
  const sink = createResponseSink(handler)
  sink.start()
  sink.responseStart(201, raw('Set-Cookie', 'a', 'Set-Cookie', 'b'), 'Created')
  assert.equal(sink.data(Buffer.from('chunk')), false)
  sink.error(new Error('boom'))
  assert.deepEqual(seen, [201, { 'set-cookie': ['a', 'b'] }, 4, 'chunk', 'boom'])
})

test('ResponseController reports an abort once, with its reason, and remembers a pause until resume', () => {
  const c = new ResponseController()
  c.pause()
  assert.equal(c.paused, true)
  let resumed = 0
  c.whenResumed(() => resumed++)
  c.resume()
  assert.equal(c.paused, false)
  const aborted = new ResponseController()
  const hook: string[] = []
  aborted.onAbort((r) => hook.push(r.message))
  aborted.abort(new Error('early'))
  aborted.abort(new Error('again'))
  assert.deepEqual(hook, ['early'], 'the abort hook hears the first abort only')
  assert.equal(aborted.reason?.message, 'early')
  return new Promise<void>((resolve) =>
    queueMicrotask(() => {
      assert.equal(resumed, 1, 'a waiter for resume runs once resumed')
      resolve()
    }),
  )
})

test('abort() without a reason uses an AbortError', () => {
  const c = new ResponseController()
  c.abort()
  assert.equal(c.reason?.name, 'AbortError')
})
