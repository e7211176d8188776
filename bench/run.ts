/**
 * One benchmark run: the interceptor's replay and record throughput against baselines measured in the
 * same process on the same workload. Stream fidelity (reads the app sees) is bench/stream-reads.ts.
 *
 *   npm run bench            (node --conditions=tool-replay-source bench/run.ts)
 *   BENCH_CALLS=500 BENCH_ROUNDS=3 npm run bench     (a quicker run)
 *   BENCH_ONLY=replay,SnapshotAgent npm run bench    (only those rows, e.g. under --cpu-prof; the ratio table then shows NaN)
 *
 * Every client call goes through undici 8's `fetch` with a per-request `dispatcher`, so each row differs
 * only in the dispatcher: a plain Agent (live), ours (record / replay), MockAgent, SnapshotAgent.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { Agent, type Dispatcher, MockAgent, SnapshotAgent, fetch as undiciFetch } from 'undici'
import { openSession } from '../engine/index.ts'
import { createRecordReplayDispatcher } from '../interceptor/index.ts'
import { createMemoryStore, openStore, type TraceStore } from '../store/index.ts'

const CALLS = Number(process.env.BENCH_CALLS ?? 2000)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5)

// ---- workload ---------------------------------------------------------------------------------

const small = (i: number) => JSON.stringify({ id: i, kind: 'small', pad: 'x'.repeat(1000 - 40 - String(i).length) })
const big = Buffer.alloc(256 * 1024, 'abcdefghijklmnopqrstuvwxyz0123456789')

interface Call {
  method: 'GET' | 'POST'
  path: string
  body?: string
  /** What the server answers, so MockAgent can be preloaded with the same thing. */
  response: string | Buffer
}

/** 50% GET 1 KB JSON, 40% POST with distinct ~1 KB JSON bodies, 10% GET 256 KB; deterministic order. */
function workload(n: number): Call[] {
  const calls: Call[] = []
  for (let i = 0; i < n; i++) {
    const r = i % 10
    if (r < 5) calls.push({ method: 'GET', path: `/small/${i}`, response: small(i) })
    else if (r < 9) {
      const body = JSON.stringify({ op: 'create', seq: i, payload: 'p'.repeat(980 - String(i).length) })
      calls.push({ method: 'POST', path: `/echo/${i}`, body, response: `{"ok":true,"len":${body.length},"seq":${i}}` })
    } else calls.push({ method: 'GET', path: `/big/${i}`, response: big })
  }
  return calls
}

function startServer(calls: Call[]): Promise<{ url: string; server: http.Server }> {
  const byPath = new Map(calls.map((c) => [c.path, c]))
  const server = http.createServer((req, res) => {
    const path = req.url ?? '/'
    req.resume()
    req.on('end', () => {
      const call = byPath.get(path)
      if (!call) {
        res.writeHead(404)
        res.end()
        return
      }
      res.writeHead(200, { 'content-type': Buffer.isBuffer(call.response) ? 'application/octet-stream' : 'application/json' })
      res.end(call.response)
    })
  })
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server })))
}

/** Runs every call in sequence through `dispatcher`, reading each body fully. */
async function drive(base: string, calls: Call[], dispatcher: Dispatcher): Promise<number> {
  collectGarbage()
  const t0 = performance.now()
  for (const c of calls) {
    const res = await undiciFetch(
      `${base}${c.path}`,
      c.body === undefined ? { dispatcher } : { method: 'POST', body: c.body, headers: { 'content-type': 'application/json' }, dispatcher },
    )
    const bytes = await res.arrayBuffer()
    if (res.status !== 200 || bytes.byteLength !== (Buffer.isBuffer(c.response) ? c.response.byteLength : Buffer.byteLength(c.response))) {
      throw new Error(`bench: ${c.method} ${c.path} gave ${res.status} with ${bytes.byteLength} bytes`)
    }
  }
  return performance.now() - t0
}

// A full GC before every timed loop, for every row alike: otherwise one row pays for the garbage the
// previous row (or its own setup, like opening a session) left behind. `npm run bench` passes no flags.
setFlagsFromString('--expose-gc')
const collectGarbage = runInNewContext('gc') as () => void

/** Idle time before each timed round, for background work of the previous row to settle. */
const SETTLE_MS = 250
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number

/**
 * Runs each row's round once to warm up, then ROUNDS times interleaved (A B C, B C A, C A B, ...) so a
 * busy machine slows every row alike; returns each row's median ms.
 */
async function measure(rows: Record<string, () => Promise<number>>): Promise<Record<string, number>> {
  const only = process.env.BENCH_ONLY?.split(',')
  if (only) rows = Object.fromEntries(Object.entries(rows).filter(([name]) => only.includes(name)))
  const times: Record<string, number[]> = {}
  for (const [name, round] of Object.entries(rows)) {
    await round()
    times[name] = []
  }
  const entries = Object.entries(rows)
  for (let i = 0; i < ROUNDS; i++) {
    // Rotated each round, and with a pause between rows: a row's leftovers (LevelDB flushing and
    // compacting in its own threads after the LevelDB row) otherwise always landed on the same next row.
    for (let j = 0; j < entries.length; j++) {
      const [name, round] = entries[(i + j) % entries.length] as [string, () => Promise<number>]
      await sleep(SETTLE_MS)
      times[name]?.push(await round())
    }
  }
  const out: Record<string, number> = {}
  for (const [name, list] of Object.entries(times)) {
    out[name] = median(list)
    process.stderr.write(`  ${name.padEnd(16)} ${list.map((t) => t.toFixed(0)).join(' / ')} ms\n`)
  }
  return out
}

// ---- rows ---------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const calls = workload(CALLS)
  const { url, server } = await startServer(calls)
  const dir = await mkdtemp(join(tmpdir(), 'tr-bench-'))
  const memory = createMemoryStore()
  const level = await openStore(join(dir, 'store'))
  const live = new Agent()
  process.stderr.write(`Tool Replay bench: ${CALLS} calls, ${ROUNDS} interleaved rounds after 1 warm-up, Node ${process.version}\n`)

  let traceNo = 0
  const record = (store: TraceStore) => async () => {
    const session = await openSession({ mode: 'record', trace: `bench-${++traceNo}`, store })
    const dispatcher = createRecordReplayDispatcher({ session, upstream: live })
    const ms = await drive(url, calls, dispatcher)
    // Timed too: the recording is not done until close() has waited for its writes, and leaving it out
    // would let a store that defers its work look free.
    const t0 = performance.now()
    await session.close()
    return ms + (performance.now() - t0)
  }
  // The replayed trace is recorded once up front; each round replays it with a fresh strict session.
  await record(memory)()
  const replayTrace = `bench-${traceNo}`
  const replay = async () => {
    const session = await openSession({ mode: 'replay', trace: replayTrace, store: memory })
    const dispatcher = createRecordReplayDispatcher({ session })
    const ms = await drive(url, calls, dispatcher)
    session.assertDone()
    await session.close()
    return ms
  }
  const mock = async () => {
    const agent = new MockAgent()
    agent.disableNetConnect()
    const pool = agent.get(url)
    for (const c of calls) {
      pool
        .intercept({ path: c.path, method: c.method, ...(c.body ? { body: c.body } : {}) })
        .reply(200, c.response, { headers: { 'content-type': Buffer.isBuffer(c.response) ? 'application/octet-stream' : 'application/json' } })
    }
    const ms = await drive(url, calls, agent)
    await agent.close()
    return ms
  }
  const snapshotPath = join(dir, 'snapshot.json')
  const snapRecorder = new SnapshotAgent({ mode: 'record', snapshotPath })
  await drive(url, calls, snapRecorder)
  await snapRecorder.saveSnapshots()
  await snapRecorder.close()
  const snapshot = new SnapshotAgent({ mode: 'playback', snapshotPath })
  await snapshot.loadSnapshots()
  const snapshotPlayback = async () => {
    snapshot.resetCallCounts()
    return drive(url, calls, snapshot)
  }

  const ms = await measure({
    live: () => drive(url, calls, live),
    'record memory': record(memory),
    'record LevelDB': record(level),
    replay,
    MockAgent: mock,
    SnapshotAgent: snapshotPlayback,
  })
  await snapshot.close()
  const liveMs = ms.live as number
  const recordMemoryMs = ms['record memory'] as number
  const recordLevelMs = ms['record LevelDB'] as number
  const replayMs = ms.replay as number
  const mockMs = ms.MockAgent as number
  const snapshotMs = ms.SnapshotAgent as number

  // ---- report ----
  const rate = (ms: number) => (CALLS / ms) * 1000
  const rows: Array<[string, number, string]> = [
    ['live fetch (undici Agent)', liveMs, ''],
    ['record, memory store', recordMemoryMs, `${(recordMemoryMs / liveMs).toFixed(2)}x live time (target <= 1.15)`],
    ['record, LevelDB store', recordLevelMs, `${(recordLevelMs / liveMs).toFixed(2)}x live time (target <= 1.15)`],
    ['replay, strict (Tool Replay)', replayMs, `${(rate(replayMs) / rate(snapshotMs)).toFixed(2)}x SnapshotAgent calls/s (target >= 1.0)`],
    ['MockAgent, preloaded', mockMs, `replay = ${(rate(replayMs) / rate(mockMs)).toFixed(2)}x MockAgent calls/s`],
    ['SnapshotAgent playback', snapshotMs, ''],
  ]
  const out = [
    '',
    `${CALLS} sequential fetch calls (50% GET 1 KB, 40% POST ~1 KB JSON, 10% GET 256 KB); median of ${ROUNDS} interleaved rounds after 1 warm-up`,
    '',
    `${'row'.padEnd(32)}${'ms'.padStart(10)}${'calls/s'.padStart(12)}   ratio`,
    ...rows.map(([name, ms, ratio]) => `${name.padEnd(32)}${ms.toFixed(1).padStart(10)}${rate(ms).toFixed(0).padStart(12)}   ${ratio}`),
    '',
  ]
  process.stdout.write(out.join('\n'))

  await live.close()
  await level.close()
  await memory.close()
  server.closeAllConnections()
  server.close()
  await rm(dir, { recursive: true, force: true })
}

await main()
