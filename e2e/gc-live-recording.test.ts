/**
 * Issue 31 item 1: gc never takes a live recording's bytes. `tr-proxy gc` runs back to back, from another
 * process, while a recorder records on each capture path (an app through the interceptor, clients through
 * `tr-proxy record`); bodies are new ones (small, piece-sized, streamed past a piece) and bodies of a trace
 * deleted just before (already stored, so the recording does not write them again: gc wants them, the recording
 * references them). Afterwards every exchange's bodies are read back and checked: by the trace reader (which
 * verifies each body against its SHA-256) and against the bytes the upstream served, then by `fsck`.
 *
 * GC_LIVE_REQUESTS (default 200; the closing figures are from GC_LIVE_REQUESTS=2000) requests per path.
 */
import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { after, before, type TestContext, test } from 'node:test'
import { setTimeout as delay } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { ProxyAgent, request } from 'undici'
import { runCli } from '../cli/index.ts'
import { openStore } from '../store/index.ts'
import { bodyFromBytes, type Exchange, TRACE_FORMAT_VERSION } from '../trace/index.ts'
import { bodyAt, pathOf, sharedPaths } from './fixtures/gc/live-bodies.ts'
import { agePieces } from './support/files-under.ts'
import { tempDir } from './support/proxy-harness.ts'

const REQUESTS = Number(process.env.GC_LIVE_REQUESTS ?? 200)
const CLIENTS = 8
const root = fileURLToPath(new URL('..', import.meta.url))

let upstream: string
let server: ReturnType<typeof createServer>

before(async () => {
  server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const body = bodyAt(new URL(req.url ?? '/', 'http://x').pathname)
    req.resume()
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(body.byteLength) })
    res.end(body)
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  upstream = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})
after(() => new Promise<void>((resolve) => server.close(() => resolve())))

const cli = async (...argv: string[]) => {
  const out: string[] = []
  const err: string[] = []
  const code = await runCli(argv, { out: (t) => out.push(t), err: (t) => err.push(t) })
  return { code, out: out.join('\n'), err: err.join('\n') }
}

/** A store holding the shared bodies only as garbage: trace "old" stored them and was removed. */
async function storeWithGarbage(): Promise<string> {
  const dir = join(tempDir('tr-gc-live-'), 'store')
  const store = await openStore(dir)
  const bodies = new Map<string, Uint8Array>()
  const exchanges: Exchange[] = sharedPaths().map((path, seq) => {
    const body = bodyFromBytes(bodyAt(path))
    bodies.set(body.ref.digest, body.bytes)
    return {
      seq,
      request: { method: 'GET', url: `https://old.test${path}`, headers: [], body: null },
      outcome: { kind: 'response', response: { status: 200, statusText: 'OK', headers: [], body: body.ref, trailers: [] } },
      timing: { startMs: seq, headersMs: 1 },
    }
  })
  await store.putTrace({ meta: { name: 'old', format: TRACE_FORMAT_VERSION }, exchanges, bodies })
  assert.equal(await store.deleteTrace('old'), true)
  await store.close()
  // gc keeps piece files written since a running recording began, less 2 s of clock slack (store/gc.ts): the
  // old trace's pieces must be older than that, or gc rightly keeps them whatever the recording does.
  assert.ok((await agePieces(dir, 60_000)) > 0, 'the old trace has piece files')
  return dir
}

/** Runs `tr-proxy gc` back to back until `done()`; returns how many runs completed. */
async function gcLoop(dir: string, done: () => boolean): Promise<{ runs: number; bodies: number }> {
  let runs = 0
  let bodies = 0
  while (!done()) {
    const gc = await cli('gc', '--store', dir, '--json')
    assert.equal(gc.code, 0, gc.err)
    bodies += (JSON.parse(gc.out) as { bodies: number }).bodies
    runs++
  }
  return { runs, bodies }
}

/** Every exchange of trace "live", its response body read (verified against its SHA-256) and compared. */
async function checkLive(dir: string): Promise<{ exchanges: number; missing: string[] }> {
  const store = await openStore(dir)
  const missing: string[] = []
  let exchanges = 0
  try {
    const reader = await store.openTrace('live')
    for await (const x of reader.exchanges()) {
      exchanges++
      const path = new URL(x.request.url).pathname
      assert.equal(x.outcome.kind, 'response')
      if (x.outcome.kind !== 'response') continue
      try {
        const bytes = await reader.bodyBytes(x.outcome.response.body, 'response')
        if (Buffer.compare(Buffer.from(bytes), Buffer.from(bodyAt(path))) !== 0) missing.push(`#${x.seq} ${path}: other bytes`)
      } catch (err) {
        missing.push(`#${x.seq} ${path}: ${(err as { code?: string }).code ?? (err as Error).message}`)
      }
    }
  } finally {
    await store.close()
  }
  return { exchanges, missing }
}

/**
 * The child's exit, watched from its spawn and awaited with a bound. Watched early because 'exit' is emitted
 * once: a listener added after it (the app exits while the last gc run is still going) would wait forever.
 */
function exitOf(child: ChildProcess): (timeoutMs: number) => Promise<number | null> {
  const exited = once(child, 'exit').then(([code]) => code as number | null)
  return async (timeoutMs) => {
    const bound = new AbortController()
    const late = delay(timeoutMs, undefined, { signal: bound.signal }).then(
      () => Promise.reject(new Error(`pid ${child.pid} did not exit in ${timeoutMs} ms`)),
      () => null,
    )
    try {
      return await Promise.race([exited, late])
    } finally {
      bound.abort()
    }
  }
}

/** The first line of `child`'s stdout that `match` accepts, bounded. */
function lineOf(child: ChildProcess, match: RegExp, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = ''
    const timer = setTimeout(() => reject(new Error(`no line matching ${match} in ${timeoutMs} ms: ${text.slice(-2000)}`)), timeoutMs)
    const seen = (t: Buffer) => {
      text += t.toString()
      const m = match.exec(text)
      if (m) {
        clearTimeout(timer)
        resolve(m[1] ?? m[0])
      }
    }
    child.stdout?.on('data', seen)
    child.stderr?.on('data', seen)
    child.once('exit', (code) => {
      clearTimeout(timer)
      reject(new Error(`exited (${code}) before a line matching ${match}: ${text.slice(-2000)}`))
    })
  })
}

async function throughInterceptor(t: TestContext, dir: string): Promise<{ answered: number }> {
  const child = spawn(process.execPath, ['--conditions=tool-replay-source', join(root, 'e2e/fixtures/gc/recording-app.ts')], {
    cwd: root,
    env: { ...process.env, TOOL_REPLAY_STORE: dir, GC_UPSTREAM: upstream, GC_REQUESTS: String(REQUESTS), GC_CLIENTS: String(CLIENTS) },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const exited = exitOf(child)
  t.after(() => child.kill('SIGKILL'))
  await lineOf(child, /^ready$/m, 60_000)
  let finished = false
  const summary = lineOf(child, /^(\{"answered".*\})$/m, 300_000).finally(() => {
    finished = true
  })
  const gc = await gcLoop(dir, () => finished)
  const result = JSON.parse(await summary) as { answered: number; wrong: number }
  assert.equal(await exited(30_000), 0, 'the recording app exited cleanly')
  assert.equal(result.wrong, 0)
  process.stdout.write(`# interceptor: ${result.answered} answered, ${gc.runs} gc runs (${gc.bodies} bodies removed)\n`)
  return result
}

async function throughProxy(t: TestContext, dir: string): Promise<{ answered: number }> {
  const child = spawn(process.execPath, [join(root, 'bin/tr-proxy.js'), 'record', '--store', dir, '--trace', 'live', '--port', '0'], {
    cwd: root,
    env: process.env,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const exited = exitOf(child)
  t.after(() => child.kill('SIGKILL'))
  const url = await lineOf(child, /listening on (http:\/\/\S+)/, 60_000)
  const agent = new ProxyAgent({ uri: url })
  let next = 0
  let answered = 0
  const loop = async () => {
    for (let n = next++; n < REQUESTS; n = next++) {
      const res = await request(`${upstream}${pathOf(n)}?n=${n}`, { dispatcher: agent })
      const body = Buffer.from(await res.body.arrayBuffer())
      assert.equal(res.statusCode, 200)
      assert.equal(Buffer.compare(body, Buffer.from(bodyAt(pathOf(n)))), 0, `request ${n} answered other bytes`)
      answered++
    }
  }
  let finished = false
  const clients = Promise.all(Array.from({ length: CLIENTS }, loop)).finally(() => {
    finished = true
  })
  const gc = await gcLoop(dir, () => finished)
  await clients
  await agent.close()
  child.kill('SIGINT')
  assert.equal(await exited(30_000), 0, 'tr-proxy record closed its recording')
  process.stdout.write(`# tr-proxy record: ${answered} answered, ${gc.runs} gc runs (${gc.bodies} bodies removed)\n`)
  return { answered }
}

for (const [path, run] of [
  ['the interceptor', throughInterceptor],
  ['tr-proxy record', throughProxy],
] as const) {
  test(`gc back to back beside a recording through ${path}: every exchange keeps its bodies`, async (t) => {
    const dir = await storeWithGarbage()
    const { answered } = await run(t, dir)
    assert.equal(answered, REQUESTS)
    const { exchanges, missing } = await checkLive(dir)
    process.stdout.write(`# ${path}: ${exchanges} exchanges stored, ${missing.length} with a body missing or damaged\n`)
    assert.equal(exchanges, REQUESTS)
    assert.deepEqual(missing.slice(0, 10), [], `${missing.length} of ${exchanges} exchanges lost a body`)
    const fsck = await cli('fsck', '--store', dir, '--json')
    assert.equal(fsck.code, 0, fsck.out || fsck.err)
    // Once the recording is closed, one more gc keeps everything it references.
    assert.equal((await cli('gc', '--store', dir)).code, 0)
    assert.deepEqual((await checkLive(dir)).missing, [])
  })
}
