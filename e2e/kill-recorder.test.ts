/**
 * What a client was answered is in the store first: a recorder killed with SIGKILL in the middle of a busy run
 * loses no exchange any client saw finish. Ten clients ask a local upstream for bodies small (inline in
 * LevelDB) or piece-sized (16-64 KiB: piece files beside it), through the interceptor (an app recording
 * in-process, half fetch and half node:http) and through `tr-proxy record`; the recorder is killed mid-run;
 * then every answer a client reported is looked for in the store's partial recording, body size included.
 *
 * KILL_RUNS (default 2) kills per path and size; the closing note of the round reports a run of 50.
 */
import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { setTimeout as delay } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { ProxyAgent, request } from 'undici'
import { openStore } from '../store/index.ts'
import { itemSize } from './fixtures/kill/sizes.ts'
import { tempDir } from './support/proxy-harness.ts'

const RUNS = Number(process.env.KILL_RUNS ?? 2)
const CLIENTS = 10
/** How many answers the clients must have seen before the kill, so every run kills a busy recorder. */
const ANSWERED_BEFORE_KILL = 150
const root = fileURLToPath(new URL('..', import.meta.url))
const SIZES = { small: 16_000, pieces: 64 * 1024 } as const

let upstream: string
let server: ReturnType<typeof createServer>

before(async () => {
  server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const size = Number(new URL(req.url ?? '/', 'http://x').searchParams.get('size') ?? 0)
    req.resume()
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(size) })
    res.end(Buffer.alloc(size, (req.url ?? '').slice(-1)))
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  upstream = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})
after(() => new Promise<void>((resolve) => server.close(() => resolve())))

/** Lines a child prints, as they come. */
function lines(child: ChildProcess, onLine: (line: string) => void): void {
  let rest = ''
  child.stdout?.setEncoding('utf8')
  child.stdout?.on('data', (text: string) => {
    const all = (rest + text).split('\n')
    rest = all.pop() ?? ''
    for (const l of all) onLine(l)
  })
}

/** Waits until `answered` reaches `n`, bounded. */
async function untilAnswered(answered: Set<string>, n: number, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + 60_000
  while (answered.size < n) {
    assert.ok(Date.now() < deadline, `only ${answered.size} answers in 60 s`)
    assert.equal(child.exitCode, null, 'the recorder exited on its own')
    await delay(20)
  }
}

/** What the store's partial recording holds: path → stored body size. */
async function stored(storeDir: string): Promise<Map<string, number>> {
  const store = await openStore(storeDir)
  try {
    const reader = await store.openTrace('killed', { partial: true })
    const out = new Map<string, number>()
    for await (const x of reader.exchanges()) {
      if (x.outcome.kind === 'response') out.set(new URL(x.request.url).pathname + new URL(x.request.url).search, x.outcome.response.body.size)
    }
    return out
  } finally {
    await store.close()
  }
}

/** One run through the interceptor: the app records itself and is killed. */
async function killInterceptor(max: number): Promise<{ answered: Set<string>; storeDir: string }> {
  const storeDir = join(tempDir('tr-kill-'), 'store')
  const child = spawn(process.execPath, ['--conditions=tool-replay-source', join(root, 'e2e/fixtures/kill/recording-app.ts')], {
    cwd: root,
    env: { ...process.env, TOOL_REPLAY_STORE: storeDir, KILL_UPSTREAM: upstream, KILL_CLIENTS: String(CLIENTS), KILL_MAX_SIZE: String(max) },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const answered = new Set<string>()
  lines(child, (l) => {
    if (l.startsWith('ok ')) answered.add(l.slice(3))
  })
  await untilAnswered(answered, ANSWERED_BEFORE_KILL, child)
  child.kill('SIGKILL')
  await once(child, 'exit')
  return { answered, storeDir }
}

/** One run through `tr-proxy record`: clients in this process, the proxy killed. */
async function killProxy(max: number): Promise<{ answered: Set<string>; storeDir: string }> {
  const storeDir = join(tempDir('tr-kill-'), 'store')
  const child = spawn(process.execPath, [join(root, 'bin/tr-proxy.js'), 'record', '--store', storeDir, '--trace', 'killed', '--port', '0'], {
    cwd: root,
    env: process.env,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const url = await new Promise<string>((resolve, reject) => {
    let text = ''
    const seen = (t: Buffer) => {
      text += t.toString()
      const m = /listening on (http:\/\/\S+)/.exec(text)
      if (m) resolve(m[1] as string)
    }
    child.stdout?.on('data', seen)
    child.stderr?.on('data', seen)
    child.once('exit', () => reject(new Error(`tr-proxy record exited: ${text}`)))
  })
  const agent = new ProxyAgent({ uri: url })
  const answered = new Set<string>()
  let killed = false
  const loop = async (id: number) => {
    for (let n = 0; !killed; n++) {
      const path = `/item/${id}/${n}?size=${itemSize(id, n, max)}`
      try {
        const res = await request(`${upstream}${path}`, { dispatcher: agent })
        const body = Buffer.from(await res.body.arrayBuffer())
        if (res.statusCode === 200 && body.byteLength === itemSize(id, n, max)) answered.add(path)
      } catch {
        return
      }
    }
  }
  const loops = Array.from({ length: CLIENTS }, (_, i) => loop(i))
  await untilAnswered(answered, ANSWERED_BEFORE_KILL, child)
  child.kill('SIGKILL')
  killed = true
  await once(child, 'exit')
  await Promise.all(loops)
  await agent.destroy()
  return { answered, storeDir }
}

for (const [path, kill] of [
  ['the interceptor', killInterceptor],
  ['tr-proxy record', killProxy],
] as const) {
  for (const [label, max] of Object.entries(SIZES)) {
    test(`SIGKILL through ${path}, ${label} bodies: every answer a client saw is in the store`, async () => {
      let answeredTotal = 0
      let storedTotal = 0
      for (let run = 0; run < RUNS; run++) {
        const { answered, storeDir } = await kill(max)
        const held = await stored(storeDir)
        const missing = [...answered].filter((p) => held.get(p) !== itemSize(...idOf(p), max))
        assert.deepEqual(
          missing.slice(0, 5),
          [],
          `run ${run + 1}: ${missing.length} of ${answered.size} answered exchanges are not in the store (${held.size} stored)`,
        )
        answeredTotal += answered.size
        storedTotal += held.size
      }
      process.stdout.write(`# ${path}, ${label}: ${RUNS} kills, ${answeredTotal} answered, ${storedTotal} stored, 0 answered and missing\n`)
    })
  }
}

/** The loop id and request number of a path /item/<id>/<n>?size=... */
function idOf(path: string): [number, number] {
  const m = /^\/item\/(\d+)\/(\d+)/.exec(path)
  return [Number(m?.[1]), Number(m?.[2])]
}
