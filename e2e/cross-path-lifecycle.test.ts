/**
 * One capture lifecycle: the same app, run through fetch (the dispatcher), node:http (msw) and the proxy, meets
 * the events where paths used to differ — a client that gives up while its request waits for an earlier
 * identical one, a request body over the limit, a client that abandons a stream, an upstream that closes
 * before the head or resets after it, a session closed with a request in flight — and on every path:
 * - the app sees the same outcome class (an answer, a refusal with its code, its own abort, a failure);
 * - the three recordings hold the same exchanges, and `tr-proxy diff` finds no difference between them;
 * - strict replay (upstream stopped) gives the app the same outcomes again, and the session's summary is ok
 *   but for the over-large request it must count;
 * - the session closes promptly once the last request settled (no grace timer waited out).
 */
import assert from 'node:assert/strict'
import http from 'node:http'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { setTimeout as delay } from 'node:timers/promises'
import { type Dispatcher, fetch, ProxyAgent, type RequestInit } from 'undici'
import { runCli } from '../cli/index.ts'
import type { SessionSummary } from '../engine/index.ts'
import { install } from '../interceptor/index.ts'
import { openStore, type TraceStore } from '../store/index.ts'
import { startTestProxy, tempDir } from './support/proxy-harness.ts'
import { JSON_BODY, startUpstream, type TestUpstream } from './support/proxy-upstream.ts'

type PathName = 'fetch' | 'node:http' | 'proxy'
const PATHS: PathName[] = ['fetch', 'node:http', 'proxy']
const MAX_BODY = 1024
const ECHO = JSON.stringify({ order: 'o-1', items: [1, 2, 3] })

/** One request as the app makes it. `parts`: the body, sent part by part `gapMs` apart. */
interface Call {
  method: 'GET' | 'POST'
  path: string
  parts?: string[]
  gapMs?: number
  signal?: AbortSignal
  /** Read the first chunk of the answer, then abort. */
  abortAfterFirstRead?: boolean
}

/** How an app on one path makes requests; returns the outcome class it saw. */
type Client = (call: Call) => Promise<string>

let up: TestUpstream
let base: string
const dir = tempDir('tr-lifecycle-')
const storeDir = join(dir, 'store')
let store: TraceStore

before(async () => {
  up = await startUpstream()
  base = `http://127.0.0.1:${up.port}`
  store = await openStore(storeDir)
})
after(async () => {
  await store.close()
  await up.close()
})

/** The outcome class of an answer: ours (a refusal, the proxy's report of an upstream failure) or the upstream's. */
function classify(status: number, header: (name: string) => string | undefined, body: string): string {
  if (header('x-tool-replay-upstream-error')) return 'failed'
  const code = header('x-tool-replay-error')
  return code ? `refused ${status} ${code}` : `ok ${status} ${body}`
}

/** A body sent part by part, as a stream. */
function slowBody(parts: string[], gapMs: number): ReadableStream<Uint8Array> {
  let i = 0
  return new ReadableStream({
    async pull(controller) {
      if (i > 0) await delay(gapMs)
      if (i < parts.length) controller.enqueue(new TextEncoder().encode(parts[i++]))
      else controller.close()
    },
  })
}

function fetchClient(dispatcher?: Dispatcher): Client {
  return async (call) => {
    const body = call.parts && (call.parts.length === 1 ? call.parts[0] : slowBody(call.parts, call.gapMs ?? 0))
    const init: RequestInit = {
      method: call.method,
      ...(body ? { body: body as RequestInit['body'], duplex: 'half' as const } : {}),
      ...(call.signal ? { signal: call.signal } : {}),
      ...(dispatcher ? { dispatcher } : {}),
    }
    try {
      if (call.abortAfterFirstRead) {
        const ac = new AbortController()
        const res = await fetch(`${base}${call.path}`, { ...init, signal: ac.signal })
        const reader = (res.body as ReadableStream<Uint8Array>).getReader()
        const first = await reader.read()
        ac.abort()
        await reader.read().catch(() => {})
        return first.value && first.value.byteLength > 0 ? 'first-read' : 'nothing read'
      }
      const res = await fetch(`${base}${call.path}`, init)
      return classify(res.status, (n) => res.headers.get(n) ?? undefined, await res.text())
    } catch (err) {
      return (err as Error).name === 'AbortError' ? 'aborted' : 'failed'
    }
  }
}

function nodeHttpClient(): Client {
  return (call) =>
    new Promise((resolve) => {
      let settled = false
      const done = (outcome: string) => {
        if (settled) return
        settled = true
        resolve(outcome)
      }
      const ac = call.abortAfterFirstRead ? new AbortController() : undefined
      const signal = ac?.signal ?? call.signal
      // The fields fetch adds on its own, so the recordings differ only where the lifecycle could make them differ.
      const headers: Record<string, string> = { accept: '*/*', 'accept-encoding': 'gzip, deflate', 'accept-language': '*', 'sec-fetch-mode': 'cors' }
      // fetch sends a string body with its type and length, a streamed one chunked.
      if (call.parts?.length === 1) {
        headers['content-type'] = 'text/plain;charset=UTF-8'
        headers['content-length'] = String(Buffer.byteLength(call.parts[0] as string))
      }
      const req = http.request(`${base}${call.path}`, { method: call.method, headers, ...(signal ? { signal } : {}) }, (res) => {
        let text = ''
        res.setEncoding('latin1')
        res.on('data', (chunk: string) => {
          text += chunk
          if (ac && !ac.signal.aborted) {
            ac.abort()
            done('first-read')
          }
        })
        res.on('end', () => done(classify(res.statusCode ?? 0, (n) => res.headers[n] as string | undefined, text)))
        res.on('error', () => done(signal?.aborted ? 'aborted' : 'failed'))
      })
      req.on('error', () => done(signal?.aborted ? 'aborted' : 'failed'))
      void (async () => {
        const parts = call.parts ?? []
        for (let i = 0; i < parts.length; i++) {
          if (i > 0) await delay(call.gapMs ?? 0)
          if (req.destroyed) return
          req.write(parts[i])
        }
        req.end()
      })()
    })
}

/** The app: every event in turn, each outcome noted. */
async function scenario(client: Client): Promise<string[]> {
  const seen: string[] = []
  seen.push(`json: ${await client({ method: 'GET', path: '/json' })}`)
  seen.push(`too large: ${await client({ method: 'POST', path: '/echo', parts: ['x'.repeat(MAX_BODY * 4)] })}`)
  // A's body takes 400 ms to arrive; B, identical, comes after A and waits for A's turn; the app gives up on B.
  const a = client({ method: 'POST', path: '/echo', parts: [ECHO.slice(0, 10), ECHO.slice(10)], gapMs: 400 })
  await delay(100)
  const giveUp = new AbortController()
  const b = client({ method: 'POST', path: '/echo', parts: [ECHO], signal: giveUp.signal })
  await delay(100)
  giveUp.abort()
  seen.push(`waiting A: ${await a}`, `waiting B: ${await b}`)
  seen.push(`closed before head: ${await client({ method: 'GET', path: '/hangup' })}`)
  seen.push(`reset after head: ${await client({ method: 'GET', path: '/reset' })}`)
  seen.push(`abandoned stream: ${await client({ method: 'GET', path: '/sse?n=4&gap=20', abortAfterFirstRead: true })}`)
  return seen
}

/** What each path's app must see (live, and again in strict replay). */
const EXPECTED = [
  `json: ok 200 ${JSON_BODY}`,
  'too large: refused 413 TR_REQUEST_TOO_LARGE',
  `waiting A: ok 200 ${ECHO}`,
  'waiting B: aborted',
  'closed before head: failed',
  'reset after head: failed',
  'abandoned stream: first-read',
]

/** Runs the scenario on one path in one mode; resolves with what the app saw, the summary and how long close() took after it. */
async function runPath(path: PathName, mode: 'record' | 'replay', trace: string): Promise<{ seen: string[]; summary: SessionSummary; closeMs: number }> {
  if (path === 'proxy') {
    const proxy = await startTestProxy({ store, storeDir, mode, trace, maxBodyBytes: MAX_BODY })
    const agent = new ProxyAgent({ uri: proxy.url })
    try {
      const seen = await scenario(fetchClient(agent))
      const t0 = performance.now()
      const summary = await proxy.close()
      return { seen, summary, closeMs: performance.now() - t0 }
    } finally {
      await agent.close()
    }
  }
  const tr = await install({ mode, trace, store, maxBodyBytes: MAX_BODY, nodeHttp: path === 'node:http' })
  let seen: string[]
  try {
    seen = await scenario(path === 'fetch' ? fetchClient() : nodeHttpClient())
  } catch (err) {
    await tr.close()
    throw err
  }
  const t0 = performance.now()
  const summary = await tr.close()
  return { seen, summary, closeMs: performance.now() - t0 }
}

/** A trace as one line per exchange: URL, then status and body size, or the recorded failure and its phase. */
async function outline(name: string): Promise<string[]> {
  return (await store.readTrace(name)).exchanges.map((x) =>
    x.outcome.kind === 'error'
      ? `${x.request.method} ${new URL(x.request.url).pathname} ${x.outcome.error.code} ${x.outcome.error.phase}`
      : `${x.request.method} ${new URL(x.request.url).pathname} ${x.outcome.response.status} ${x.outcome.response.body.size}`,
  )
}

test('every path: the same outcomes live and in strict replay, the same recording, a prompt close', async () => {
  const outlines: string[][] = []
  for (const path of PATHS) {
    const trace = `lifecycle-${path.replace(':', '-')}`
    const recorded = await runPath(path, 'record', trace)
    assert.deepEqual(recorded.seen, EXPECTED, `${path}: what the app saw live`)
    // Measured from the moment the app's last request settled: no grace period (2 s in-process, 5 s proxy) waited out.
    assert.ok(recorded.closeMs < 1000, `${path}: close() took ${Math.round(recorded.closeMs)} ms after the last request settled`)
    outlines.push(await outline(trace))

    const before = up.connections
    const replayed = await runPath(path, 'replay', trace)
    assert.equal(up.connections, before, `${path}: strict replay opened no connection upstream`)
    assert.deepEqual(replayed.seen, EXPECTED, `${path}: what the app saw in strict replay`)
    assert.deepEqual(
      replayed.summary.misses.map((m) => m.code),
      ['TR_REQUEST_TOO_LARGE'],
      `${path}: strict replay counts the over-large request, and nothing else is missing`,
    )
    assert.deepEqual(replayed.summary.unused, [], `${path}: every recording was used, the aborted one included`)
    assert.ok(replayed.closeMs < 1000, `${path}: replay close() took ${Math.round(replayed.closeMs)} ms`)
  }
  assert.deepEqual(outlines[0], [
    `GET /json 200 ${JSON_BODY.length}`,
    `POST /echo 200 ${ECHO.length}`,
    'POST /echo UND_ERR_ABORTED connect',
    'GET /hangup UND_ERR_SOCKET response-headers',
    'GET /reset ECONNRESET response-body',
    'GET /sse 200 148',
  ])
  assert.deepEqual(outlines[1], outlines[0], 'node:http recorded what fetch recorded')
  assert.deepEqual(outlines[2], outlines[0], 'the proxy recorded what fetch recorded')
  for (const other of ['lifecycle-node-http', 'lifecycle-proxy']) {
    const out: string[] = []
    const code = await runCli(['diff', 'lifecycle-fetch', other, '--store', storeDir, '--exit-code'], { out: (t) => out.push(t), err: (t) => out.push(t) })
    assert.equal(code, 0, `tr-proxy diff lifecycle-fetch ${other}:\n${out.join('\n')}`)
  }
})
