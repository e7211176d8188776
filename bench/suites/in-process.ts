/**
 * In-process replay and record: the 2,000-call workload (bench/lib/workload.ts) against the peers an app
 * developer would pick instead, all in this process, interleaved in rounds.
 *
 * How each side is set up, and why that is fair:
 * - ours, `createRecordReplayDispatcher` on undici's `fetch` (the `dispatcher:` form; `install()` sets the same
 *   dispatcher globally): strict replay of a trace recorded once from the upstream, a fresh session per round
 *   (each recording is used once, checked by `assertDone()`), default pace (`chunks`), memory store and the
 *   LevelDB store (the default). Session opening is outside the timed loop, as every peer's loading is.
 * - ours, `install()` + the global `fetch`: the documented default set-up, on the client msw and nock patch.
 * - undici `SnapshotAgent` in `playback` mode (its replay mode; `record` mode made the snapshot file from the
 *   same upstream first, loaded once): same undici `fetch`, same dispatcher slot. By default it matches method,
 *   URL, every header and the body; each recorded response is replayed again and again (no occurrence check).
 * - undici `MockAgent`, preloaded with one `intercept().reply()` per call (body matched for POSTs), net
 *   connect disabled: the floor of a dispatcher that answers from memory.
 * - msw 2 `setupServer` (msw/node) with three handlers (`/small/:id`, `/echo/:id`, `/big/:id`) that look the
 *   recorded answer up in a Map and check the POST body, `onUnhandledRequest: 'error'`: how the msw docs
 *   write handlers for many endpoints (one handler per path would make msw scan 2,000 handlers a call).
 *   msw patches the global `fetch`, so its client is the global `fetch`.
 * - nock `back` in `lockdown` mode (its documented record/replay mode: the fixture was recorded with
 *   `back` in `record` mode from the same upstream; lockdown replays and refuses the network), global `fetch`.
 * - live: undici `fetch` through a plain `Agent` to the upstream on 127.0.0.1, the baseline for recording.
 * - the record floor (bench/lib/floors.ts `RecordFloor`): a bare dispatcher on the same kind of Agent that only
 *   copies and hashes both bodies as they pass, no store: the least any in-process recorder costs here, so the
 *   record target (<= 1.10x live) can be read against it. Not a peer.
 * Every side reads every body whole and checks status and length.
 *
 *   node --conditions=tool-replay-source bench/suites/in-process.ts      (BENCH_QUICK=1, BENCH_ROUNDS=N)
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type HttpHandler, HttpResponse, http } from 'msw2'
import { setupServer } from 'msw2/node'
import nock from 'nock'
import { createMemoryStore, type TraceStore } from 'tool-replay'
import { install } from 'tool-replay/interceptor'
import { openStore } from 'tool-replay/store'
import { Agent, MockAgent } from 'undici'
import { RecordFloor } from '../lib/floors.ts'
import { interleave, type Metric, PROFILE, pick, promiseCostMs, runSuite, type Side, timeRow } from '../lib/harness.ts'
import { recordInto, replayRateRow, replaySide, snapshotSide, viaDispatcher } from '../lib/in-process.ts'
import { profiled, summarizeProfile } from '../lib/profile.ts'
import { type Call, drive, type FetchLike, startWorkloadServer, workload } from '../lib/workload.ts'

// nock activates its interception when imported; it stays off until its own side runs.
nock.restore()

const CALLS = Number(process.env.BENCH_CALLS ?? 2000)

const globalFetch: FetchLike = (url, init) => globalThis.fetch(url, init)

function mswHandlers(base: string, calls: readonly Call[]): HttpHandler[] {
  const byPath = new Map(calls.map((c) => [c.path, c]))
  const answer = (path: string) => {
    const c = byPath.get(path)
    if (!c) return HttpResponse.text('not recorded', { status: 500 })
    return new HttpResponse(c.response, { status: 200, headers: { 'content-type': c.contentType } })
  }
  return [
    http.get(`${base}/small/:id`, ({ request }) => answer(new URL(request.url).pathname)),
    http.get(`${base}/big/:id`, ({ request }) => answer(new URL(request.url).pathname)),
    http.post(`${base}/echo/:id`, async ({ request }) => {
      const path = new URL(request.url).pathname
      if ((await request.text()) !== byPath.get(path)?.body) return HttpResponse.text('body differs from the recording', { status: 500 })
      return answer(path)
    }),
  ]
}

await runSuite('in-process', 'In-process replay and record: 2,000 mixed fetch calls', async (report) => {
  const calls = workload(CALLS)
  const upstream = await startWorkloadServer(calls)
  const dir = await mkdtemp(join(tmpdir(), 'tr-bench-inproc-'))
  const memory = createMemoryStore()
  const level = await openStore(join(dir, 'store'))
  const live = new Agent()
  report.setup(`${CALLS} sequential calls: 50% GET 1 KB JSON, 40% POST ~1 KB JSON (distinct bodies), 10% GET 256 KB; upstream node:http on 127.0.0.1`)

  let traceNo = 0
  const record = (store: TraceStore) => () => recordInto(upstream.url, calls, live, store, `bench-${++traceNo}`)
  await record(memory)()
  const memoryTrace = `bench-${traceNo}`
  await record(level)()
  const levelTrace = `bench-${traceNo}`
  const replay = (store: TraceStore, trace: string) => replaySide(upstream.url, calls, store, trace)
  const replayGlobal = async () => {
    const tr = await install({ mode: 'replay', trace: memoryTrace, store: memory })
    try {
      const ms = await drive(upstream.url, calls, globalFetch)
      tr.assertDone()
      return ms
    } finally {
      await tr.close()
    }
  }

  const mockAgent = async () => {
    const agent = new MockAgent()
    agent.disableNetConnect()
    const pool = agent.get(upstream.url)
    for (const c of calls) {
      pool
        .intercept({ path: c.path, method: c.method, ...(c.body ? { body: c.body } : {}) })
        .reply(200, c.response, { headers: { 'content-type': c.contentType } })
    }
    const ms = await drive(upstream.url, calls, viaDispatcher(agent))
    await agent.close()
    return ms
  }

  const snapshot = await snapshotSide(upstream.url, calls, dir)

  const msw = async () => {
    const server = setupServer(...mswHandlers(upstream.url, calls))
    server.listen({ onUnhandledRequest: 'error' })
    try {
      return await drive(upstream.url, calls, globalFetch)
    } finally {
      server.close()
    }
  }

  nock.back.fixtures = dir
  nock.back.setMode('record')
  const recording = await nock.back('workload.json')
  await drive(upstream.url, calls, globalFetch)
  recording.nockDone()
  nock.restore()
  const nockBack = async () => {
    nock.back.setMode('lockdown')
    const { nockDone, context } = await nock.back('workload.json')
    try {
      const ms = await drive(upstream.url, calls, globalFetch)
      context.assertScopesFinished()
      return ms
    } finally {
      nockDone()
      nock.cleanAll()
      nock.enableNetConnect()
      nock.restore()
    }
  }

  // The set-ups above (nock back's recording, msw) have used AsyncLocalStorage: on Node 22 promise hooks are on
  // from here on, for every side alike (bench/suites/in-process-no-als.ts measures without them).
  report.setup(`1M promises take ${promiseCostMs().toFixed(0)} ms in this process (Node 22: promise hooks on after msw's and nock's set-ups)`)
  const ours: Record<string, Side> = {
    'replay (memory store)': replay(memory, memoryTrace),
    'replay (LevelDB store)': replay(level, levelTrace),
    'replay (install, global fetch)': replayGlobal,
    'record (memory store)': record(memory),
    'record (LevelDB store)': record(level),
  }
  const floorAgent = new Agent()
  const recordFloor = async () => {
    const floor = new RecordFloor(floorAgent)
    const ms = await drive(upstream.url, calls, viaDispatcher(floor))
    if (floor.recorded !== calls.length) throw new Error(`bench: the record floor kept ${floor.recorded} of ${calls.length} exchanges`)
    return ms
  }
  const ms = await interleave({
    ...ours,
    live: () => drive(upstream.url, calls, viaDispatcher(live)),
    'record floor': recordFloor,
    SnapshotAgent: snapshot.side,
    MockAgent: mockAgent,
    'msw 2 setupServer': msw,
    'nock back lockdown': nockBack,
  })
  const replayRow = (id: string, name: string, peer: string, target: boolean) => replayRateRow(report, ms, CALLS, { id, name, peer, target })
  replayRow('inproc.replay.memory.vs-snapshot', 'replay (memory store)', 'SnapshotAgent', true)
  replayRow('inproc.replay.level.vs-snapshot', 'replay (LevelDB store)', 'SnapshotAgent', true)
  replayRow('inproc.replay.memory.vs-mockagent', 'replay (memory store)', 'MockAgent', false)
  replayRow('inproc.replay.global.vs-msw', 'replay (install, global fetch)', 'msw 2 setupServer', false)
  replayRow('inproc.replay.global.vs-nock', 'replay (install, global fetch)', 'nock back lockdown', false)
  const timeRowOf = (id: string, metric: string, name: string, peer: string, ratioText: string, more: Partial<Metric> = {}) =>
    timeRow(report, ms, { id, metric, ours: name, peer, ratioText }, more)
  const recordTarget = { target: { kind: 'max', value: 1.1, text: '<= 1.10x' } } as const
  timeRowOf(
    'inproc.record.memory.vs-live',
    'in-process record (memory store) vs live fetch (time)',
    'record (memory store)',
    'live',
    'x live time',
    recordTarget,
  )
  timeRowOf(
    'inproc.record.level.vs-live',
    'in-process record (LevelDB store) vs live fetch (time)',
    'record (LevelDB store)',
    'live',
    'x live time',
    recordTarget,
  )
  timeRowOf(
    'inproc.record.floor.vs-live',
    'in-process record floor (copy and SHA-256 of both bodies, no store) vs live fetch (time)',
    'record floor',
    'live',
    'x live time',
    {
      note: 'about the least an in-process recorder costs on this workload; not ours, no target',
    },
  )
  timeRowOf(
    'inproc.record.memory.vs-floor',
    'in-process record (memory store) vs the record floor (time)',
    'record (memory store)',
    'record floor',
    'x floor time',
  )

  if (PROFILE) {
    for (const [name, side] of Object.entries(ours)) {
      const { file } = await profiled(`in-process ${name}`, async () => {
        for (let i = 0; i < pick(2, 3); i++) await side()
      })
      report.profile(summarizeProfile(`in-process ${name}`, file))
    }
  }

  await snapshot.close()
  await live.close()
  await floorAgent.close()
  await level.close()
  await memory.close()
  upstream.close()
  await rm(dir, { recursive: true, force: true })
})
