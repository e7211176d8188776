/**
 * The fetch interceptor end to end: Node's built-in fetch against real local servers, recorded into
 * a LevelDB store, then replayed with the server closed.
 */
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { gzipSync } from 'node:zlib'
import { type InstallOptions, type InterceptorSession, install } from 'tool-replay/interceptor'
import { openStore, type TraceStore } from 'tool-replay/store'
import { Agent, getGlobalDispatcher } from 'undici'
// Not public API: the helper that fills both of undici's global-dispatcher slots, to set up the outer dispatcher.
import { installGlobalDispatcher } from '../interceptor/index.ts'

interface TestServer {
  url: string
  /** Sockets accepted so far. */
  connections: number
  close(): Promise<void>
}

async function startServer(handler: http.RequestListener): Promise<TestServer> {
  const server = http.createServer(handler)
  const state = { connections: 0 }
  server.on('connection', () => state.connections++)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    get connections() {
      return state.connections
    },
    async close() {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

let dir: string
let store: TraceStore
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tr-interceptor-'))
  store = await openStore(join(dir, 'store'))
})
after(async () => {
  await store.close()
  await rm(dir, { recursive: true, force: true })
})

let traceCounter = 0
/** A fresh trace name per scenario, so tests never see each other's recordings. */
const traceName = (label: string) => `${label}-${++traceCounter}`

async function session(mode: InstallOptions['mode'], trace: string, extra: Partial<InstallOptions> = {}): Promise<InterceptorSession> {
  return install({ mode, trace, store, ...extra })
}

/** Records `scenario` live, closes the server, replays it strictly; returns both results. */
async function recordThenReplay<T>(server: TestServer, scenario: () => Promise<T>, extra: Partial<InstallOptions> = {}) {
  const trace = traceName('scenario')
  const rec = await session('record', trace, extra)
  let recorded: T
  try {
    recorded = await scenario()
  } finally {
    await rec.close()
  }
  await server.close()
  const rep = await session('replay', trace, extra)
  try {
    const replayed = await scenario()
    rep.assertDone()
    return { recorded, replayed, trace }
  } finally {
    await rep.close()
  }
}

const echo: http.RequestListener = (req, res) => {
  const parts: Buffer[] = []
  req.on('data', (c: Buffer) => parts.push(c))
  req.on('end', () => {
    const body = Buffer.concat(parts)
    res.setHeader('content-type', 'application/json')
    res.end(JSON.stringify({ method: req.method, contentType: req.headers['content-type'] ?? null, length: body.byteLength, body: body.toString('latin1') }))
  })
}

test('every request body kind fetch accepts is captured, forwarded intact and replayed', async () => {
  const server = await startServer(echo)
  const bytes = new Uint8Array([0, 1, 2, 250, 251, 252])
  const kinds: Record<string, () => RequestInit> = {
    string: () => ({ method: 'POST', body: 'plain text body', headers: { 'content-type': 'text/plain' } }),
    bytes: () => ({ method: 'POST', body: bytes }),
    urlSearchParams: () => ({ method: 'POST', body: new URLSearchParams({ a: '1', b: 'two words' }) }),
    blob: () => ({ method: 'POST', body: new Blob(['blob ', 'parts'], { type: 'application/x-blob' }) }),
    formData: () => {
      const form = new FormData()
      form.append('field', 'value')
      form.append('file', new Blob(['file content']), 'a.txt')
      return { method: 'PUT', body: form }
    },
    readableStream: () =>
      ({
        method: 'POST',
        duplex: 'half',
        body: new ReadableStream({
          start(c) {
            c.enqueue(new TextEncoder().encode('streamed '))
            c.enqueue(new TextEncoder().encode('body'))
            c.close()
          },
        }),
      }) as RequestInit,
  }
  const run = async () => {
    const out: Record<string, { method: string; contentType: string | null; length: number; body: string }> = {}
    for (const [kind, init] of Object.entries(kinds)) out[kind] = await (await fetch(`${server.url}/echo/${kind}`, init())).json()
    return out
  }
  const { recorded, replayed } = await recordThenReplay(server, run)
  assert.equal(recorded.string?.body, 'plain text body')
  assert.equal(recorded.bytes?.body, Buffer.from(bytes).toString('latin1'))
  assert.equal(recorded.urlSearchParams?.body, 'a=1&b=two+words')
  assert.equal(recorded.blob?.body, 'blob parts')
  assert.equal(recorded.blob?.contentType, 'application/x-blob')
  assert.match(recorded.formData?.contentType ?? '', /^multipart\/form-data; boundary=/)
  assert.match(recorded.formData?.body ?? '', /file content/)
  const boundary = /boundary=(.+)$/.exec(recorded.formData?.contentType ?? '')?.[1] ?? 'none'
  assert.ok(recorded.formData?.body.startsWith(`--${boundary}\r\n`), 'the multipart body uses the boundary its content-type announces')
  assert.equal(recorded.readableStream?.body, 'streamed body')
  assert.deepEqual(replayed, recorded)
})

/** Collects what a raw dispatch delivers, through the legacy handler API Node's bundled fetch uses. */
function dispatchLegacy(
  dispatcher: InterceptorSession['dispatcher'],
  url: string,
  options: { pauseAfter?: number } = {},
): Promise<{ status: number; chunks: Buffer[]; resume: () => void; pausedAt: number[]; error?: Error }> & { resumeRef: { fn?: () => void } } {
  const resumeRef: { fn?: () => void } = {}
  const u = new URL(url)
  const promise = new Promise<{ status: number; chunks: Buffer[]; resume: () => void; pausedAt: number[]; error?: Error }>((resolve) => {
    const chunks: Buffer[] = []
    const pausedAt: number[] = []
    let status = 0
    dispatcher.dispatch({ origin: u.origin, path: u.pathname, method: 'GET', headers: {} }, {
      onConnect() {},
      onHeaders(s: number, _raw: Buffer[], resume: () => void) {
        status = s
        resumeRef.fn = resume
        return true
      },
      onData(chunk: Buffer) {
        chunks.push(Buffer.from(chunk))
        if (options.pauseAfter !== undefined && chunks.length === options.pauseAfter) {
          pausedAt.push(chunks.length)
          return false
        }
        return true
      },
      onComplete() {
        resolve({ status, chunks, resume: resumeRef.fn as () => void, pausedAt })
      },
      onError(error: Error) {
        resolve({ status, chunks, resume: resumeRef.fn as () => void, pausedAt, error })
      },
    } as never)
  })
  return Object.assign(promise, { resumeRef })
}

test('replay delivers exactly the recorded chunks: one onData per chunk, identical bytes', async () => {
  const N = 6
  const server = await startServer(async (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' })
    for (let i = 0; i < N; i++) {
      res.write(`chunk-${i}-${'x'.repeat(i * 100)}|`)
      await sleep(25)
    }
    res.end()
  })
  const trace = traceName('chunks')
  const rec = await session('record', trace)
  const live = await (await fetch(`${server.url}/stream`)).text()
  await rec.close()
  await server.close()

  const stored = await store.readTrace(trace)
  const outcome = stored.exchanges[0]?.outcome
  assert.equal(outcome?.kind, 'response')
  const recordedChunks = outcome?.kind === 'response' ? outcome.response.body.chunks : []
  assert.equal(recordedChunks.length, N, 'the live stream arrived in N chunks')

  const rep = await session('replay', trace)
  const result = await dispatchLegacy(rep.dispatcher, `${server.url}/stream`)
  assert.equal(result.status, 200)
  assert.equal(result.chunks.length, N)
  assert.deepEqual(
    result.chunks.map((c) => c.byteLength),
    recordedChunks.map((c) => c.size),
  )
  assert.equal(Buffer.concat(result.chunks).toString(), live)
  rep.assertDone()
  await rep.close()
})

test('replay honours back-pressure: onData returning false pauses until resume, controller.pause too, abort stops', async () => {
  const server = await startServer((_req, res) => {
    res.writeHead(200)
    let i = 0
    const timer = setInterval(() => {
      res.write(`part-${i}.`)
      if (++i === 4) {
        clearInterval(timer)
        res.end()
      }
    }, 10)
  })
  const trace = traceName('backpressure')
  const rec = await session('record', trace)
  for (let i = 0; i < 3; i++) await (await fetch(`${server.url}/bp`)).text()
  await rec.close()
  await server.close()

  const rep = await session('replay', trace)
  // Legacy API: returning false from onData.
  const pending = dispatchLegacy(rep.dispatcher, `${server.url}/bp`, { pauseAfter: 1 })
  await sleep(30)
  assert.ok(pending.resumeRef.fn, 'headers arrived')
  let settled = false
  void pending.then(() => (settled = true))
  await sleep(30)
  assert.equal(settled, false, 'nothing more is delivered while paused')
  pending.resumeRef.fn?.()
  const legacy = await pending
  assert.equal(legacy.chunks.length, 4)
  assert.deepEqual(legacy.pausedAt, [1])

  // Controller API: pause() in onResponseData, resume() later; then abort() in another request.
  const u = new URL(`${server.url}/bp`)
  const controllerRun = await new Promise<{ chunks: string[]; pausedFor: number }>((resolve, reject) => {
    const chunks: string[] = []
    let pausedAt = 0
    rep.dispatcher.dispatch(
      { origin: u.origin, path: u.pathname, method: 'GET', headers: {} },
      {
        onRequestStart() {},
        onResponseStart() {},
        onResponseData(controller, chunk) {
          chunks.push(chunk.toString())
          if (chunks.length === 2) {
            controller.pause()
            pausedAt = performance.now()
            setTimeout(() => controller.resume(), 40)
          }
        },
        onResponseEnd() {
          resolve({ chunks, pausedFor: performance.now() - pausedAt })
        },
        onResponseError(_c, err) {
          reject(err)
        },
      },
    )
  })
  assert.equal(controllerRun.chunks.length, 4)
  assert.ok(controllerRun.pausedFor >= 35, `stayed paused ${controllerRun.pausedFor} ms`)

  const aborted = await new Promise<{ chunks: number; error: Error }>((resolve) => {
    let chunks = 0
    rep.dispatcher.dispatch(
      { origin: u.origin, path: u.pathname, method: 'GET', headers: {} },
      {
        onRequestStart() {},
        onResponseData(controller) {
          chunks++
          controller.abort(new Error('app gave up'))
        },
        onResponseEnd() {
          resolve({ chunks, error: new Error('completed despite abort') })
        },
        onResponseError(_c, error) {
          resolve({ chunks, error })
        },
      },
    )
  })
  assert.equal(aborted.chunks, 1)
  assert.equal(aborted.error.message, 'app gave up')
  rep.assertDone()
  await rep.close()
})

test('pacing: scale 0 replays without waiting, scale 1 takes the recorded time', async () => {
  const server = await startServer(async (_req, res) => {
    await sleep(100)
    res.writeHead(200)
    res.write('a')
    await sleep(100)
    res.end('b')
  })
  const trace = traceName('pace')
  const rec = await session('record', trace)
  await (await fetch(`${server.url}/slow`)).text()
  await (await fetch(`${server.url}/slow`)).text()
  await rec.close()
  await server.close()

  const fast = await session('replay', trace)
  let t0 = performance.now()
  assert.equal(await (await fetch(`${server.url}/slow`)).text(), 'ab')
  const fastMs = performance.now() - t0
  fast.uninstall()
  const paced = await session('replay', trace, { pace: 1 })
  t0 = performance.now()
  assert.equal(await (await fetch(`${server.url}/slow`)).text(), 'ab')
  const pacedMs = performance.now() - t0
  await paced.close()
  // The first session's only remaining exchange was consumed by the second; both are strict on their own.
  assert.ok(fastMs + 100 < pacedMs, `unpaced replay took ${fastMs} ms, paced ${pacedMs} ms`)
  assert.ok(pacedMs >= 190, `paced replay took ${pacedMs} ms`)
  await fast.close()
})

test('gzip bodies are stored compressed, as on the wire, and fetch still decodes the replay', async () => {
  const text = JSON.stringify({ message: 'compressed '.repeat(200) })
  const server = await startServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' })
    res.end(gzipSync(text))
  })
  const { recorded, replayed, trace } = await recordThenReplay(server, async () => (await fetch(`${server.url}/gz`)).text())
  assert.equal(recorded, text)
  assert.equal(replayed, text)
  const stored = await store.readTrace(trace)
  const outcome = stored.exchanges[0]?.outcome
  assert.ok(outcome?.kind === 'response')
  const body = stored.bodies.get(outcome.response.body.digest)
  assert.deepEqual([...(body ?? []).slice(0, 2)], [0x1f, 0x8b], 'gzip magic bytes')
})

/** A port that refuses connections: bound once, then released. */
async function closedPort(): Promise<string> {
  const s = await startServer(() => {})
  await s.close()
  return s.url
}

/** What a failed fetch looks like to the app. */
async function failure(p: Promise<unknown>): Promise<{ message: string; causeCode: string | undefined; causeName: string | undefined }> {
  try {
    await p
  } catch (err) {
    const e = err as Error & { cause?: Error & { code?: string } }
    return { message: e.message, causeCode: e.cause?.code, causeName: e.cause?.name }
  }
  assert.fail('expected the request to fail')
}

test('a recorded ECONNREFUSED replays as the same fetch failure', async () => {
  const url = await closedPort()
  const trace = traceName('refused')
  const rec = await session('record', trace)
  const live = await failure(fetch(`${url}/nothing`))
  await rec.close()
  assert.deepEqual(live, { message: 'fetch failed', causeCode: 'ECONNREFUSED', causeName: 'Error' })
  const rep = await session('replay', trace)
  const replayed = await failure(fetch(`${url}/nothing`))
  rep.assertDone()
  await rep.close()
  assert.equal(replayed.message, live.message)
  assert.equal(replayed.causeCode, live.causeCode)
})

test('a connection reset mid-body replays headers, the partial chunks, then the same error', async () => {
  const server = await startServer(async (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' })
    res.write('first;')
    await sleep(15)
    res.write('second;')
    await sleep(15)
    res.socket?.destroy()
  })
  const run = async () => {
    const res = await fetch(`${server.url}/reset`)
    const reader = (res.body as ReadableStream<Uint8Array>).getReader()
    const got: string[] = []
    try {
      for (;;) {
        const { done, value } = await reader.read()
        if (done) break
        got.push(Buffer.from(value).toString())
      }
      return { status: res.status, got, error: null }
    } catch (err) {
      const e = err as Error & { cause?: { code?: string } }
      return { status: res.status, got, error: { message: e.message, causeCode: e.cause?.code } }
    }
  }
  const { recorded, replayed, trace } = await recordThenReplay(server, run)
  assert.equal(recorded.status, 200)
  assert.ok(recorded.error, 'the live body failed')
  assert.ok(recorded.error.causeCode && ['UND_ERR_SOCKET', 'ECONNRESET'].includes(recorded.error.causeCode), String(recorded.error.causeCode))
  // fetch's body stream may merge chunks that arrive in one tick; the dispatcher-level count is tested above.
  assert.deepEqual({ ...replayed, got: replayed.got.join('') }, { ...recorded, got: recorded.got.join('') })
  assert.equal(replayed.got.join(''), 'first;second;')
  const stored = await store.readTrace(trace)
  const outcome = stored.exchanges[0]?.outcome
  assert.ok(outcome?.kind === 'error')
  assert.equal(outcome.error.phase, 'response-body')
  assert.equal(outcome.error.partial?.body.chunks.length, 2)
})

test('repeated Set-Cookie survives: redacted values, still two headers', async () => {
  const server = await startServer((_req, res) => {
    res.setHeader('set-cookie', ['session=s3cr3t-value; Path=/; HttpOnly', 'theme=dark; Path=/'])
    res.end('ok')
  })
  const { recorded, replayed } = await recordThenReplay(server, async () => (await fetch(`${server.url}/cookies`)).headers.getSetCookie())
  assert.deepEqual(recorded, ['session=s3cr3t-value; Path=/; HttpOnly', 'theme=dark; Path=/'])
  assert.deepEqual(replayed, ['session=[REDACTED]; Path=/; HttpOnly', 'theme=[REDACTED]; Path=/'])
})

test('occurrences replay in order, and one request too many is TR_REPLAY_EXHAUSTED', async () => {
  let n = 0
  const server = await startServer((_req, res) => res.end(`response #${++n}`))
  const trace = traceName('occurrence')
  const rec = await session('record', trace)
  for (let i = 0; i < 3; i++) await (await fetch(`${server.url}/counter`)).text()
  await rec.close()
  await server.close()
  const rep = await session('replay', trace)
  const bodies = []
  for (let i = 0; i < 3; i++) bodies.push(await (await fetch(`${server.url}/counter`)).text())
  assert.deepEqual(bodies, ['response #1', 'response #2', 'response #3'])
  const refused = await fetch(`${server.url}/counter`)
  assert.equal(refused.status, 403)
  assert.equal(refused.headers.get('x-tool-replay-error'), 'TR_REPLAY_EXHAUSTED')
  const { error } = (await refused.json()) as { error: { code: string; message: string } }
  assert.equal(error.code, 'TR_REPLAY_EXHAUSTED')
  assert.match(error.message, /recorded this request 3 time\(s\) \(#0 to #2\) and this is #3/)
  assert.throws(() => rep.assertDone(), { code: 'TR_REPLAY_INCOMPLETE' })
  await rep.close()
})

test('concurrent different requests do not interfere', async () => {
  const server = await startServer(async (req, res) => {
    const id = Number(new URL(req.url ?? '/', 'http://x').searchParams.get('id'))
    await sleep((7 - (id % 7)) * 3)
    res.writeHead(200, { 'content-type': 'application/json' })
    res.write(`{"id":${id},`)
    await sleep(2)
    res.end(`"data":"${'d'.repeat(id * 50)}"}`)
  })
  const ids = Array.from({ length: 20 }, (_, i) => i)
  const run = () => Promise.all(ids.map(async (id) => (await fetch(`${server.url}/item?id=${id}`)).json() as Promise<{ id: number; data: string }>))
  const { recorded, replayed } = await recordThenReplay(server, run)
  assert.deepEqual(
    replayed.map((r) => r.id),
    ids,
  )
  assert.deepEqual(replayed, recorded)
})

test('a miss is answered with the refusal response carrying TR_REPLAY_MISS, the closest recording and what differs', async () => {
  const server = await startServer(echo)
  const trace = traceName('miss')
  const rec = await session('record', trace)
  await fetch(`${server.url}/api/orders`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ item: 'book', qty: 1 }) })
  await rec.close()
  await server.close()
  const rep = await session('replay', trace)
  const refused = await fetch(`${server.url}/api/orders`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ item: 'book', qty: 2 }),
  })
  assert.equal(refused.status, 403)
  assert.equal(refused.statusText, 'Tool Replay Refused')
  assert.equal(refused.headers.get('x-tool-replay-error'), 'TR_REPLAY_MISS')
  assert.equal(refused.headers.get('x-should-retry'), 'false')
  const body = (await refused.json()) as { type: string; message: string; error: { type: string; code: string; message: string } }
  assert.equal(body.type, 'error')
  assert.equal(body.error.code, 'TR_REPLAY_MISS')
  assert.equal(body.message, body.error.message)
  const message = body.error.message
  assert.ok(message.startsWith(`TR_REPLAY_MISS: Failed to replay "POST ${server.url}/api/orders": no recorded exchange in trace "${trace}" matches`), message)
  assert.ok(message.includes(`closest recorded: "POST ${server.url}/api/orders" (differs: body $.qty: 1 → 2)`), message)
  assert.equal(rep.summary().misses.length, 1)
  await rep.close()
})

test('an unused recording is reported by assertDone and the summary', async () => {
  const server = await startServer((req, res) => res.end(req.url))
  const trace = traceName('unused')
  const rec = await session('record', trace)
  await (await fetch(`${server.url}/a`)).text()
  await (await fetch(`${server.url}/b`)).text()
  await rec.close()
  await server.close()
  const rep = await session('replay', trace)
  assert.equal(await (await fetch(`${server.url}/a`)).text(), '/a')
  assert.throws(
    () => rep.assertDone(),
    (err: Error & { code?: string }) => err.code === 'TR_REPLAY_INCOMPLETE' && err.message.includes(`TR_REPLAY_UNUSED GET ${server.url}/b #0`),
  )
  const summary = await rep.close()
  assert.equal(summary.unused.length, 1)
  assert.equal(summary.ok, false)
})

test('a miss the app swallowed still fails assertDone', async () => {
  const server = await startServer((_req, res) => res.end('x'))
  const trace = traceName('swallowed')
  const rec = await session('record', trace)
  await (await fetch(`${server.url}/known`)).text()
  await rec.close()
  await server.close()
  const rep = await session('replay', trace)
  await (await fetch(`${server.url}/known`)).text()
  // An app that retries or falls back and never surfaces the error.
  await fetch(`${server.url}/unknown`).catch(() => undefined)
  assert.throws(
    () => rep.assertDone(),
    (err: Error & { code?: string }) => err.code === 'TR_REPLAY_INCOMPLETE' && err.message.includes(`TR_REPLAY_MISS GET ${server.url}/unknown`),
  )
  await rep.close()
})

test('install and uninstall restore the previous global dispatcher (both undici slots)', async () => {
  const v1 = Symbol.for('undici.globalDispatcher.1')
  const v2 = Symbol.for('undici.globalDispatcher.2')
  const g = globalThis as unknown as Record<symbol, unknown>
  const mine = new Agent()
  const restoreOuter = installGlobalDispatcher(mine)
  const before1 = g[v1]
  const before2 = g[v2]
  assert.equal(getGlobalDispatcher(), mine)
  const tr = await session('record', traceName('global'))
  assert.equal(g[v1], tr.dispatcher)
  assert.equal(g[v2], tr.dispatcher)
  assert.equal(getGlobalDispatcher(), tr.dispatcher)
  tr.uninstall()
  assert.equal(g[v1], before1)
  assert.equal(g[v2], before2)
  await tr.close()
  assert.equal(getGlobalDispatcher(), mine)
  restoreOuter()
  await mine.close()
})

test('replay is offline: no connection reaches the upstream, open or closed', async () => {
  const server = await startServer((req, res) => res.end(`hello ${req.url}`))
  const run = async () => {
    const out = []
    for (const p of ['/a', '/b', '/c']) out.push(await (await fetch(`${server.url}${p}`)).text())
    out.push(await (await fetch(`${server.url}/d`, { method: 'POST', body: 'x' })).text())
    return out
  }
  const trace = traceName('offline')
  const rec = await session('record', trace)
  const live = await run()
  await rec.close()
  assert.ok(server.connections > 0)
  const before = server.connections
  const rep = await session('replay', trace)
  assert.deepEqual(await run(), live)
  rep.assertDone()
  await rep.close()
  assert.equal(server.connections - before, 0, 'replay opened no connection while the upstream was up')
  await server.close()
  const again = await session('replay', trace)
  assert.deepEqual(await run(), live)
  again.assertDone()
  await again.close()
})

test('matching is by identity, not bytes: reordered JSON keys and query parameters still replay', async () => {
  const server = await startServer(echo)
  const trace = traceName('identity')
  const rec = await session('record', trace)
  const live = await (
    await fetch(`${server.url}/search?b=2&a=1`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"q":"x","page":1}' })
  ).json()
  await rec.close()
  await server.close()
  const rep = await session('replay', trace)
  const replayed = await (
    await fetch(`${server.url}/search?a=1&b=2`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{ "page": 1, "q": "x" }' })
  ).json()
  rep.assertDone()
  await rep.close()
  assert.deepEqual(replayed, live)
})

test('an app abort mid-stream: the recording drains the response (bounded), and an endless one is kept as the abort', async () => {
  let finite = true
  const server = await startServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    res.write('data: first\n\n')
    if (finite) {
      setTimeout(() => res.end('data: last\n\n'), 30)
      return
    }
    // Endless: one event every 20 ms until the client goes away.
    const timer = setInterval(() => res.write('data: more\n\n'), 20)
    res.on('close', () => clearInterval(timer))
  })
  const readFirstThenAbort = async (url: string) => {
    const ac = new AbortController()
    const res = await fetch(url, { signal: ac.signal })
    const reader = (res.body as ReadableStream<Uint8Array>).getReader()
    const first = new TextDecoder().decode((await reader.read()).value)
    ac.abort()
    await reader.read().catch(() => {})
    return first
  }
  try {
    const trace = traceName('abort-drain')
    const rec = await session('record', trace, { drainAfterAbortMs: 150 })
    // Live, a loaded machine may read two events off the socket at once: only the start is certain.
    const liveFinite = await readFirstThenAbort(`${server.url}/finite`)
    assert.ok(liveFinite.startsWith('data: first\n\n'), liveFinite)
    finite = false
    const liveEndless = await readFirstThenAbort(`${server.url}/endless`)
    assert.ok(liveEndless.startsWith('data: first\n\n'), liveEndless)
    await rec.close()
    const recorded = await store.readTrace(trace)
    const [a, b] = recorded.exchanges
    assert.equal(a?.outcome.kind, 'response', 'the finite stream is recorded whole although the app aborted')
    if (a?.outcome.kind === 'response') assert.equal(a.outcome.response.body.size, 'data: first\n\ndata: last\n\n'.length)
    assert.equal(b?.outcome.kind, 'error', 'the endless stream is cut after the drain bound')
    if (b?.outcome.kind === 'error') {
      // The same code the proxy records for a client that went away (engine/transport-rules.ts).
      assert.equal(b.outcome.error.code, 'UND_ERR_ABORTED')
      assert.ok((b.outcome.error.partial?.body.size ?? 0) >= 'data: first\n\n'.length)
    }
    // Replay re-enacts it: the app reads the first event and aborts, with nothing left over. The default
    // pace ('chunks') hands the first chunk over as a read of its own.
    const rep = await session('replay', trace)
    assert.equal(await readFirstThenAbort(`${server.url}/finite`), liveFinite)
    assert.equal(await readFirstThenAbort(`${server.url}/endless`), liveEndless)
    rep.assertDone()
    await rep.close()
  } finally {
    await server.close()
  }
})
