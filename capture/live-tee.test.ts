import assert from 'node:assert/strict'
import { test } from 'node:test'
import { setTimeout as delay } from 'node:timers/promises'
import type { ExchangeRecorder } from '../engine/index.ts'
import type { HeaderPairs, RecordedError, ResponseHead } from '../trace/index.ts'
import { type ClientTarget, LiveTee, type UpstreamControl } from './live-tee.ts'

const enc = (s: string) => new TextEncoder().encode(s)
const dec = (b: Uint8Array) => new TextDecoder().decode(b)

/** A deferred promise, settled by the test. */
function later(): { promise: Promise<void>; resolve: () => void } {
  let resolve: () => void = () => {}
  const promise = new Promise<void>((r) => (resolve = r))
  return { promise, resolve }
}

/** A recorder that logs, with commits the test settles (`commit.resolve()`). */
function recorder(options: { storeBehind?: Promise<void> } = {}) {
  const log: string[] = []
  const commit = later()
  const r: ExchangeRecorder = {
    recording: true,
    responseStart: (h) => void log.push(`rec head ${h.status}`),
    responseData: (c) => {
      log.push(`rec data ${dec(c)}`)
      return options.storeBehind
    },
    responseEnd: () => {
      log.push('rec end')
      return commit.promise
    },
    fail: (e) => {
      log.push(`rec fail ${e.code}`)
      return commit.promise
    },
  }
  return { r, log, commit }
}

/** A client that logs; `slow` makes every chunk wait for the test's `read()`. */
function client(options: { slow?: boolean } = {}) {
  const log: string[] = []
  let gone = false
  const goneFns: Array<() => void> = []
  let reading: (() => void) | undefined
  const c: ClientTarget = {
    get gone() {
      return gone
    },
    onGone: (fn) => void goneFns.push(fn),
    head: (h: ResponseHead) => void log.push(`head ${h.status}`),
    chunk: (b) => {
      log.push(`chunk ${dec(b)}`)
      if (!options.slow) return undefined
      return new Promise<void>((resolve) => (reading = resolve))
    },
    separate: () => Promise.resolve(),
    end: (_t: HeaderPairs) => void log.push('end'),
    fail: (e: RecordedError) => void log.push(`fail ${e.code}`),
    failLive: (_err, recorded) => void log.push(`failLive ${recorded.code} ${recorded.phase}`),
    failWith: (err) => void log.push(`failWith ${err.message}`),
  }
  return {
    c,
    log,
    read: () => reading?.(),
    leave: () => {
      gone = true
      for (const fn of goneFns) fn()
    },
  }
}

/** An upstream control that logs pause/resume/abort. */
function upstream() {
  const log: string[] = []
  const control: UpstreamControl = {
    pause: () => void log.push('pause'),
    resume: () => void log.push('resume'),
    abort: (reason) => void log.push(`abort ${reason.message}`),
  }
  return { control, log }
}

const head = (status: number, headers: HeaderPairs = []): ResponseHead => ({ status, statusText: 'OK', headers })

test('the chunk that completes a sized body waits for the commit; the ones before it go out at once', async () => {
  const rec = recorder()
  const app = client()
  const tee = new LiveTee({ recorder: rec.r, client: app.c, method: 'GET', detached: false, drainMs: 1000 })
  tee.control(upstream().control)
  tee.started()
  tee.head(head(200, [['content-length', '6']]))
  tee.data(enc('abc'))
  tee.data(enc('def'))
  tee.end([])
  await delay(1)
  assert.deepEqual(app.log, ['head 200', 'chunk abc'], 'the last chunk waits for the store')
  rec.commit.resolve()
  await tee.done
  assert.deepEqual(app.log, ['head 200', 'chunk abc', 'chunk def', 'end'])
})

test('without a length the end waits for the commit; without a body (HEAD, 204) the head does', async () => {
  for (const [method, h, expectBefore] of [
    ['GET', head(200), ['head 200', 'chunk x']],
    ['HEAD', head(200, [['content-length', '10']]), []],
    ['GET', head(204), []],
  ] as const) {
    const rec = recorder()
    const app = client()
    const tee = new LiveTee({ recorder: rec.r, client: app.c, method, detached: false, drainMs: 1000 })
    tee.control(upstream().control)
    tee.head(h)
    if (method === 'GET' && h.status === 200) tee.data(enc('x'))
    tee.end([])
    await delay(1)
    assert.deepEqual(app.log, expectBefore, `${method} ${h.status}: before the commit`)
    rec.commit.resolve()
    await tee.done
    assert.equal(app.log.at(-1), 'end', `${method} ${h.status}: the end after the commit`)
  }
})

test('a piece the transport marks final (an MCP answer line) waits for the commit, as the last chunk of a sized body does', async () => {
  const rec = recorder()
  const app = client()
  const tee = new LiveTee({ recorder: rec.r, client: app.c, method: 'POST', detached: false, drainMs: 1000 })
  tee.control(upstream().control)
  tee.head(head(200, [['content-type', 'application/x-ndjson']]))
  tee.data(enc('note'))
  tee.data(enc('answer'), true)
  tee.end([])
  await delay(1)
  assert.deepEqual(app.log, ['head 200', 'chunk note'], 'the final piece waits for the store')
  assert.deepEqual(rec.log, ['rec head 200', 'rec data note', 'rec data answer', 'rec end'])
  rec.commit.resolve()
  await tee.done
  assert.deepEqual(app.log, ['head 200', 'chunk note', 'chunk answer', 'end'])
})

test('the upstream is paused while the client or the store is behind, and resumes only when neither is', async () => {
  const store = later()
  const rec = recorder({ storeBehind: store.promise })
  const app = client({ slow: true })
  const up = upstream()
  const tee = new LiveTee({ recorder: rec.r, client: app.c, method: 'GET', detached: false, drainMs: 1000 })
  tee.control(up.control)
  tee.head(head(200))
  tee.data(enc('a'))
  assert.deepEqual(up.log, ['pause'], 'paused once for both reasons')
  app.read()
  await delay(1)
  assert.deepEqual(up.log, ['pause'], 'the store still holds it')
  store.resolve()
  await delay(1)
  assert.deepEqual(up.log, ['pause', 'resume'])
})

test('a client that leaves before the head: the live request ends and is recorded as the client abort', async () => {
  const rec = recorder()
  const app = client()
  const up = upstream()
  const tee = new LiveTee({ recorder: rec.r, client: app.c, method: 'GET', detached: false, drainMs: 1000 })
  tee.control(up.control)
  tee.started()
  tee.sent()
  app.leave()
  assert.deepEqual(rec.log, ['rec fail UND_ERR_ABORTED'])
  assert.match(up.log.join(), /^abort /)
  tee.error(new Error('aborted'))
  assert.deepEqual(rec.log, ['rec fail UND_ERR_ABORTED'], 'the abort it caused is not recorded again')
  assert.deepEqual(app.log, [], 'the client hears nothing more (its own abort already reached it)')
})

test('a client that leaves after the head: the response is drained into the recording, or cut as the abort after drainMs', async () => {
  const whole = recorder()
  const app = client()
  const drained = new LiveTee({ recorder: whole.r, client: app.c, method: 'GET', detached: false, drainMs: 1000 })
  drained.control(upstream().control)
  drained.head(head(200))
  drained.data(enc('first'))
  app.leave()
  drained.data(enc('rest'))
  drained.end([])
  assert.deepEqual(whole.log, ['rec head 200', 'rec data first', 'rec data rest', 'rec end'])
  assert.deepEqual(app.log, ['head 200', 'chunk first'])

  const cut = recorder()
  const up = upstream()
  const leaver = client()
  const t2 = new LiveTee({ recorder: cut.r, client: leaver.c, method: 'GET', detached: false, drainMs: 20 })
  t2.control(up.control)
  t2.started()
  t2.head(head(200))
  t2.data(enc('tick'))
  leaver.leave()
  await delay(60)
  assert.deepEqual(cut.log, ['rec head 200', 'rec data tick', 'rec fail UND_ERR_ABORTED'])
  assert.match(up.log.join(), /abort /)
})

test('detached (a fault decides what the client gets): the client is never written to, and its leaving changes nothing', async () => {
  const rec = recorder()
  const app = client()
  const up = upstream()
  const tee = new LiveTee({ recorder: rec.r, client: app.c, method: 'GET', detached: true, drainMs: 0 })
  tee.control(up.control)
  tee.head(head(200))
  app.leave()
  tee.data(enc('x'))
  tee.end([])
  rec.commit.resolve()
  await tee.done
  assert.deepEqual(app.log, [])
  assert.deepEqual(up.log, [])
  assert.deepEqual(rec.log, ['rec head 200', 'rec data x', 'rec end'])
})

test('a live failure is recorded with its phase and reaches the client as it came, after the commit', async () => {
  const rec = recorder()
  const app = client()
  const tee = new LiveTee({ recorder: rec.r, client: app.c, method: 'GET', detached: false, drainMs: 1000 })
  tee.control(upstream().control)
  tee.started()
  tee.sent()
  tee.error(Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' }))
  assert.deepEqual(rec.log, ['rec fail UND_ERR_SOCKET'])
  await delay(1)
  assert.deepEqual(app.log, [])
  rec.commit.resolve()
  await tee.done
  assert.deepEqual(app.log, ['failLive UND_ERR_SOCKET response-headers'])
})
