/**
 * The global fetch answering a played stream itself (interceptor/fetch-answer.ts): what the app observes must be
 * what fetch's own Response gives for the same recording. Each check reads the same trace twice, through the
 * wrapped global fetch (the played Response) and through fetch with the session's dispatcher given explicitly
 * (fetch's own Response, the path every replay took before), and compares.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { install } from '../interceptor/index.ts'
import { createMemoryStore } from '../store/index.ts'
import { bodyFromChunks, type Exchange, TRACE_FORMAT_VERSION, type Trace } from '../trace/index.ts'

const event = (path: string, i: number) => `data: {"n":${i},"path":"${path}"}\n\n`

/** A trace of SSE answers of `chunks` chunks: /events, /events2 behind a 302 from /old, and /long. */
function trace(name: string, chunks: number): Trace {
  const bodies = new Map<string, Uint8Array>()
  const sse = (seq: number, path: string, headers: Array<[string, string]>): Exchange => {
    const body = bodyFromChunks(Array.from({ length: chunks }, (_, i) => ({ bytes: Buffer.from(event(path, i)), atMs: 5 + i })))
    bodies.set(body.ref.digest, body.bytes)
    return {
      seq,
      request: { method: 'GET', url: `https://api.test${path}`, headers: [], body: null },
      outcome: { kind: 'response', response: { status: 200, statusText: 'OK', headers, body: body.ref, trailers: [] } },
      timing: { startMs: seq, headersMs: 2 },
    }
  }
  const empty = bodyFromChunks([])
  bodies.set(empty.ref.digest, empty.bytes)
  const moved: Exchange = {
    seq: 1,
    request: { method: 'GET', url: 'https://api.test/old', headers: [], body: null },
    outcome: { kind: 'response', response: { status: 302, statusText: 'Found', headers: [['location', '/events2']], body: empty.ref, trailers: [] } },
    timing: { startMs: 1, headersMs: 1 },
  }
  const headers: Array<[string, string]> = [
    ['Content-Type', 'text/event-stream'],
    ['Set-Cookie', 'a=1; Path=/'],
    ['Set-Cookie', 'b=2; Path=/'],
    ['X-Trace', 'one'],
    ['x-trace', 'two'],
  ]
  const exchanges = [sse(0, '/events', headers), moved, sse(2, '/events2', [['content-type', 'text/event-stream']])]
  return { meta: { name, format: TRACE_FORMAT_VERSION }, exchanges, bodies }
}

/** What an app can see of a Response without reading its body. */
function looks(res: Response) {
  const headers: string[][] = []
  res.headers.forEach((value, name) => {
    headers.push([name, value])
  })
  return {
    status: res.status,
    statusText: res.statusText,
    ok: res.ok,
    url: res.url,
    redirected: res.redirected,
    type: res.type,
    headers,
    cookies: res.headers.getSetCookie(),
    name: res.constructor.name,
    isResponse: res instanceof Response,
    bodyUsed: res.bodyUsed,
    immutable: (() => {
      try {
        res.headers.set('x-changed', 'yes')
        return false
      } catch {
        return true
      }
    })(),
  }
}

/** Reads a body with a BYOB reader (fetch's body is a byte stream), counting reads. */
async function readByob(body: ReadableStream<Uint8Array>): Promise<{ text: string; reads: number }> {
  const reader = body.getReader({ mode: 'byob' })
  let text = ''
  let reads = 0
  const decoder = new TextDecoder()
  for (;;) {
    const { done, value } = await reader.read(new Uint8Array(256))
    if (done) break
    reads++
    text += decoder.decode(value, { stream: true })
  }
  return { text, reads }
}

/** Runs `fn` on a strict replay of `name` with the global fetch wrapped; checks every recording was used. */
async function replaying<T>(store: ReturnType<typeof createMemoryStore>, name: string, fn: (dispatcher: unknown) => Promise<T>): Promise<T> {
  const tr = await install({ mode: 'replay', trace: name, store, nodeHttp: false, http2: false, config: false })
  try {
    const out = await fn(tr.dispatcher)
    tr.assertDone()
    return out
  } finally {
    await tr.close()
  }
}

test('a played stream looks as fetch would have made it: head, url, redirect, type, cookies, clones, a byte stream', async () => {
  const store = createMemoryStore()
  await store.putTrace(trace('look', 6))
  const run = (own: boolean) =>
    replaying(store, 'look', async (dispatcher) => {
      const get = (url: string) => (own ? fetch(url, { dispatcher } as RequestInit) : fetch(url))
      const res = await get('https://api.test/events')
      const played = Object.getPrototypeOf(res) !== Response.prototype
      const copy = res.clone()
      const [first, second] = [await readByob(res.body as ReadableStream<Uint8Array>), await copy.text()]
      const moved = await get('https://api.test/old')
      return { played, look: looks(res), copy: looks(copy), first, second, moved: looks(moved), movedText: await moved.text() }
    })
  const [played, own] = [await run(false), await run(true)]
  assert.equal(played.played, true, 'the wrapped global fetch answered the played stream itself')
  assert.equal(own.played, false, "a call with its own dispatcher got fetch's own Response")
  const { played: _a, ...a } = played
  const { played: _b, ...b } = own
  assert.deepEqual(a, b)
  assert.equal(played.look.url, 'https://api.test/events')
  assert.equal(played.moved.redirected, true)
  assert.deepEqual(played.look.cookies, ['a=1; Path=/', 'b=2; Path=/'])
  assert.equal(played.second, Array.from({ length: 6 }, (_, i) => event('/events', i)).join(''))
  await store.close()
})

test('an abort of the call mid-stream fails the next read with its reason, as fetch does; the session goes on', async () => {
  const store = createMemoryStore()
  await store.putTrace(trace('abort', 40))
  const run = (own: boolean) =>
    replaying(store, 'abort', async (dispatcher) => {
      const controller = new AbortController()
      const res = await fetch('https://api.test/events', { signal: controller.signal, ...(own ? { dispatcher } : {}) } as RequestInit)
      const reader = (res.body as ReadableStream<Uint8Array>).getReader()
      const texts = [await reader.read(), await reader.read()].map((r) => Buffer.from(r.value as Uint8Array).toString())
      const reason = new Error('the user closed the tab')
      controller.abort(reason)
      const failed = await reader.read().then(
        () => 'read on',
        (err: unknown) => (err === reason ? 'the reason' : String(err)),
      )
      // The rest of the trace still replays in this session.
      await fetch('https://api.test/old').then((r) => r.text())
      return { texts, failed }
    })
  const [played, own] = [await run(false), await run(true)]
  assert.deepEqual(played, own)
  assert.deepEqual(played, { texts: [event('/events', 0), event('/events', 1)], failed: 'the reason' })
  await store.close()
})

test('a played stream the app cancels stops there: the session closes and the next request replays', async () => {
  const store = createMemoryStore()
  await store.putTrace(trace('cancel', 500))
  const got = await replaying(store, 'cancel', async () => {
    const res = await fetch('https://api.test/events')
    const reader = (res.body as ReadableStream<Uint8Array>).getReader()
    const first = Buffer.from((await reader.read()).value as Uint8Array).toString()
    await reader.cancel()
    const moved = await fetch('https://api.test/old')
    return { first, moved: (await moved.text()).length }
  })
  assert.deepEqual(got, { first: event('/events', 0), moved: Array.from({ length: 500 }, (_, i) => event('/events2', i)).join('').length })
  await store.close()
})

test("fetch(request) without an init, and a call with its own dispatcher, keep fetch's own Response; uninstall puts fetch back", async () => {
  const store = createMemoryStore()
  await store.putTrace(trace('plain', 3))
  const before = globalThis.fetch
  const tr = await install({ mode: 'replay', trace: 'plain', store, nodeHttp: false, http2: false, config: false })
  assert.notEqual(globalThis.fetch, before)
  assert.equal(globalThis.fetch.name, 'fetch')
  assert.equal(globalThis.fetch.length, before.length)
  const res = await fetch(new Request('https://api.test/events'))
  assert.equal(Object.getPrototypeOf(res), Response.prototype)
  assert.equal(await res.text(), Array.from({ length: 3 }, (_, i) => event('/events', i)).join(''))
  const moved = await fetch('https://api.test/old', { dispatcher: tr.dispatcher } as RequestInit)
  assert.equal(Object.getPrototypeOf(moved), Response.prototype)
  assert.equal(moved.url, 'https://api.test/events2')
  await moved.text()
  tr.assertDone()
  await tr.close()
  assert.equal(globalThis.fetch, before)
  await store.close()
})

test('a played body the app never reads is not kept alive by a signal that outlives it', async () => {
  setFlagsFromString('--expose-gc')
  const gc = runInNewContext('gc') as () => void
  const store = createMemoryStore()
  await store.putTrace(trace('dropped', 3000))
  const app = new AbortController()
  const tr = await install({ mode: 'replay', trace: 'dropped', store, nodeHttp: false, http2: false, config: false })
  let body: WeakRef<object> | undefined
  await (async () => {
    const res = await fetch('https://api.test/events', { signal: app.signal })
    assert.notEqual(Object.getPrototypeOf(res), Response.prototype, 'a played Response')
    body = new WeakRef(res.body as object)
  })()
  for (let i = 0; i < 20 && body?.deref(); i++) {
    await sleep(10)
    gc()
  }
  assert.equal(body?.deref(), undefined, "the app's long-lived signal still holds the unread body")
  tr.uninstall()
  await store.close()
})
