/**
 * Chunk-exact SSE replay in-process: 100 streams x 50 events (10 read at a time), reads counted at the app's
 * reader (`for await` over fetch's body), interleaved in rounds.
 *
 * How each side is set up, and why that is fair:
 * - ours: `createRecordReplayDispatcher` on undici's `fetch`, strict replay at the default pace (`chunks`: every
 *   recorded chunk is its own read) of a trace recorded once from the live upstream; a fresh session a round.
 * - ours on the global fetch: `install()` (which also wraps the global fetch: interceptor/fetch-answer.ts), the
 *   same trace; against SnapshotAgent made the global dispatcher (`setGlobalDispatcher`), on the same fetch.
 * - undici `SnapshotAgent` in `playback` mode, snapshot recorded from the same upstream: same `fetch`, same
 *   dispatcher slot. It stores the body as one string, so the app gets it in one read: the ratio is the price
 *   of keeping the chunks (target >= 0.8x).
 * - the chunk floor (bench/lib/floors.ts `ChunkFloor`): a bare dispatcher handing fetch the upstream's 50 events
 *   from memory, one macrotask apart, nothing else: the least any chunk-exact replay through fetch costs, so
 *   the target (>= 0.8x SnapshotAgent) can be read against it. Not a peer.
 * - the fetch-answer floor (bench/lib/floors.ts `answerFetchFloor`): the global fetch answered at the fetch level
 *   over a byte stream, one chunk per read, from memory, nothing else: the least the global fetch's row costs.
 * - msw 2 `setupServer` with one handler answering a `ReadableStream` that enqueues one recorded event per
 *   pull, as msw's docs stream a response (global `fetch`, which msw patches). Reads reported, no target.
 * - an app that awaits a 1 ms timer after each read (any I/O between reads: a token written to a file or a
 *   socket), over TIMER_STREAMS streams: reads of 50 at the app, ours through undici's fetch and through the
 *   global fetch (`install()`), against the chunk floor's (one macrotask a chunk, no pull).
 *
 *   node --conditions=tool-replay-source bench/suites/sse-in-process.ts
 */

import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { HttpResponse, http } from 'msw2'
import { setupServer } from 'msw2/node'
import { createMemoryStore, openSession, type TraceStore } from 'tool-replay'
import { createRecordReplayDispatcher, install } from 'tool-replay/interceptor'
import { Agent, type Dispatcher, getGlobalDispatcher, SnapshotAgent, setGlobalDispatcher, fetch as undiciFetch } from 'undici'
import { answerFetchFloor, ChunkFloor } from '../lib/floors.ts'
import { faster, interleave, type Metric, median, PROFILE, runSuite, type SuiteReport } from '../lib/harness.ts'
import { profiled, summarizeProfile } from '../lib/profile.ts'
import {
  CONCURRENCY,
  EVENTS,
  exactReads,
  GAP_MS,
  inBatches,
  readCounted,
  recordedChunks,
  STREAMS,
  type StreamRead,
  sseEvent,
  startSseServer,
  streamBytes,
} from '../lib/sse.ts'

/** Streams read by the timer app (each read waits 1 ms more, so fewer streams than the throughput rows). */
const TIMER_STREAMS = Math.min(STREAMS, 20)

/** Reads a body as an app that awaits a 1 ms timer after each read, counting reads. */
async function readWithTimer(body: AsyncIterable<Uint8Array> | null): Promise<StreamRead> {
  let reads = 0
  let bytes = 0
  for await (const chunk of body ?? []) {
    reads++
    bytes += chunk.byteLength
    await sleep(1)
  }
  return { reads, bytes }
}

/** The rows for an app that awaits a 1 ms timer between reads: reads of EVENTS at the app, on both fetches. */
async function timerAppRows(report: SuiteReport, urls: string[], store: TraceStore, floor: Dispatcher): Promise<void> {
  const first = urls.slice(0, TIMER_STREAMS)
  const read = async (get: (url: string) => Promise<Response | Awaited<ReturnType<typeof undiciFetch>>>): Promise<number> => {
    const reads = await inBatches(first.length, async (i) => readWithTimer((await get(first[i] as string)).body as AsyncIterable<Uint8Array> | null))
    if (!reads.every((r, i) => r.bytes === streamBytes(first[i] as string))) throw new Error('bench: a stream read by the timer app has the wrong length')
    return reads.reduce((n, r) => n + r.reads, 0) / reads.length
  }
  const floorReads = await read((url) => undiciFetch(url, { dispatcher: floor }))
  // Strict replay of the first TIMER_STREAMS recordings: the rest stay unused (no assertDone here).
  const session = await openSession({ mode: 'replay', trace: 'sse', store })
  const dispatcher = createRecordReplayDispatcher({ session })
  const undiciReads = await read((url) => undiciFetch(url, { dispatcher }))
  await session.close()
  const tr = await install({ mode: 'replay', trace: 'sse', store, nodeHttp: false, config: false })
  const globalReads = await read((url) => fetch(url))
  await tr.close()
  for (const [id, what, reads] of [
    ['sse.inproc.timer-app.undici', "undici's fetch through the dispatcher", undiciReads],
    ['sse.inproc.timer-app.global', 'the global fetch (install())', globalReads],
  ] as const) {
    report.row({
      id,
      metric: `reads of ${EVENTS} for an app awaiting a 1 ms timer per read, ${what} (mean of ${TIMER_STREAMS} streams)`,
      ours: reads,
      unit: 'reads',
      peer: { name: 'chunk floor (a macrotask a chunk)', value: floorReads },
      target: { kind: 'min', value: EVENTS, text: `${EVENTS} of ${EVENTS}`, on: 'ours' },
    })
  }
}

await runSuite('sse-in-process', `Chunk-exact SSE replay in-process: ${STREAMS} streams x ${EVENTS} events`, async (report) => {
  const upstream = await startSseServer()
  const base = `http://127.0.0.1:${upstream.port}`
  const urls = Array.from({ length: STREAMS }, (_, i) => `${base}/stream/${i}`)
  const dir = await mkdtemp(join(tmpdir(), 'tr-bench-sse-'))
  report.setup(
    `${STREAMS} SSE streams x ${EVENTS} events (${GAP_MS} ms apart live), ${CONCURRENCY} at a time; reads counted by the app (for await over fetch's body)`,
  )

  const readAll = async (dispatcher: Dispatcher | undefined): Promise<{ ms: number; reads: StreamRead[] }> => {
    const t0 = performance.now()
    const reads = await inBatches(STREAMS, async (i) => {
      const res = dispatcher ? await undiciFetch(urls[i] as string, { dispatcher }) : await fetch(urls[i] as string)
      return readCounted(res.body as AsyncIterable<Uint8Array> | null)
    })
    const ms = performance.now() - t0
    if (!reads.every((r, i) => r.bytes === streamBytes(urls[i] as string))) throw new Error('bench: a replayed stream has the wrong length')
    return { ms, reads }
  }

  const live = new Agent()
  const store = createMemoryStore()
  const rec = await openSession({ mode: 'record', trace: 'sse', store })
  await readAll(createRecordReplayDispatcher({ session: rec, upstream: live }))
  await rec.close()
  const recorded = await recordedChunks(store, 'sse')

  const snapshotPath = join(dir, 'sse-snapshot.json')
  const snapRecorder = new SnapshotAgent({ mode: 'record', snapshotPath })
  await readAll(snapRecorder)
  await snapRecorder.saveSnapshots()
  await snapRecorder.close()
  const snapshot = new SnapshotAgent({ mode: 'playback', snapshotPath })
  await snapshot.loadSnapshots()
  // Node's fetch sends other headers than undici's, and SnapshotAgent matches on them: its own snapshot.
  const onGlobal = async <T>(dispatcher: Dispatcher, fn: () => Promise<T>): Promise<T> => {
    const before = getGlobalDispatcher()
    setGlobalDispatcher(dispatcher)
    try {
      return await fn()
    } finally {
      setGlobalDispatcher(before)
    }
  }
  const globalSnapshotPath = join(dir, 'sse-snapshot-global.json')
  const globalRecorder = new SnapshotAgent({ mode: 'record', snapshotPath: globalSnapshotPath })
  await onGlobal(globalRecorder, () => readAll(undefined))
  await globalRecorder.saveSnapshots()
  await globalRecorder.close()
  const globalSnapshot = new SnapshotAgent({ mode: 'playback', snapshotPath: globalSnapshotPath })
  await globalSnapshot.loadSnapshots()

  const encoder = new TextEncoder()
  const msw = setupServer(
    http.get(`${base}/stream/:i`, ({ request }) => {
      const path = new URL(request.url).pathname
      let n = 0
      const stream = new ReadableStream<Uint8Array>({
        pull(controller) {
          controller.enqueue(encoder.encode(sseEvent(path, n)))
          if (++n === EVENTS) controller.close()
        },
      })
      return new HttpResponse(stream, { headers: { 'content-type': 'text/event-stream' } })
    }),
  )

  const events = new Map<string, Buffer[]>()
  const answerOf = (path: string) => {
    let chunks = events.get(path)
    if (!chunks) events.set(path, (chunks = Array.from({ length: EVENTS }, (_, n) => Buffer.from(sseEvent(path, n)))))
    return { statusCode: 200, headers: { 'content-type': 'text/event-stream' }, chunks }
  }
  const floor = new ChunkFloor(answerOf)

  const lastReads: Record<string, StreamRead[]> = {}
  const ours = async () => {
    const session = await openSession({ mode: 'replay', trace: 'sse', store })
    const { ms, reads } = await readAll(createRecordReplayDispatcher({ session }))
    session.assertDone()
    await session.close()
    lastReads.ours = reads
    return ms
  }
  const oursGlobal = async () => {
    const tr = await install({ mode: 'replay', trace: 'sse', store, nodeHttp: false, http2: false, config: false })
    try {
      const { ms, reads } = await readAll(undefined)
      tr.assertDone()
      lastReads.oursGlobal = reads
      return ms
    } finally {
      await tr.close()
    }
  }
  const ms = await interleave({
    ours,
    SnapshotAgent: async () => {
      snapshot.resetCallCounts()
      const { ms, reads } = await readAll(snapshot)
      lastReads.SnapshotAgent = reads
      return ms
    },
    'ours, global fetch': oursGlobal,
    'fetch-answer floor': async () => {
      const restore = answerFetchFloor(answerOf)
      try {
        const { ms, reads } = await readAll(undefined)
        lastReads.fetchFloor = reads
        return ms
      } finally {
        restore()
      }
    },
    'SnapshotAgent, global fetch': async () => {
      globalSnapshot.resetCallCounts()
      return (await onGlobal(globalSnapshot, () => readAll(undefined))).ms
    },
    'chunk floor': async () => {
      const { ms, reads } = await readAll(floor)
      lastReads.floor = reads
      return ms
    },
    'msw 2 stream': async () => {
      msw.listen({ onUnhandledRequest: 'error' })
      try {
        const { ms, reads } = await readAll(undefined)
        lastReads.msw = reads
        return ms
      } finally {
        msw.close()
      }
    },
  })
  const exact = exactReads(urls, lastReads.ours as StreamRead[], recorded)
  const meanReads = (name: string) => (lastReads[name] ?? []).reduce((n, r) => n + r.reads, 0) / STREAMS
  report.setup(
    `reads per stream: ours ${exact.meanReads.toFixed(1)} (recorded ${exact.min}-${exact.max} chunks), SnapshotAgent ${meanReads('SnapshotAgent').toFixed(1)}, msw ${meanReads('msw').toFixed(1)}`,
  )
  const m = (name: string) => median(ms[name] as number[])
  /** A streams/s row: side `name` against side `peer` shown as `peerName` (higher is better). */
  const rateRow = (id: string, metric: string, name: string, peer: string, peerName: string, ratioText: string, more: Partial<Metric> = {}) =>
    report.row({
      id,
      metric,
      ours: (STREAMS / m(name)) * 1000,
      unit: 'streams/s',
      peer: { name: peerName, value: (STREAMS / m(peer)) * 1000 },
      ratio: faster(1 / m(name), 1 / m(peer)),
      ratioOf: 'peer/ours',
      ratioText,
      rounds: { ours: ms[name] as number[], peer: ms[peer] as number[] },
      ...more,
    })
  const exactGlobal = exactReads(urls, lastReads.oursGlobal as StreamRead[], recorded)
  rateRow(
    'sse.inproc.global.vs-snapshot',
    'in-process chunk-exact SSE replay, the global fetch (install()) vs SnapshotAgent (streams/s)',
    'ours, global fetch',
    'SnapshotAgent, global fetch',
    'SnapshotAgent (1 read), global fetch',
    'x SnapshotAgent',
    {
      target: { kind: 'min', value: 0.8, text: '>= 0.8x' },
      conditions: [{ text: `every chunk its own read (${exactGlobal.exact}/${STREAMS} streams)`, ok: exactGlobal.exact === STREAMS }],
    },
  )
  const fetchFloorExact = (lastReads.fetchFloor ?? []).filter((r) => r.reads === EVENTS).length
  rateRow(
    'sse.inproc.fetch-floor.vs-snapshot',
    'in-process fetch-answer floor (the global fetch answered over a byte stream, one chunk per read) vs SnapshotAgent (streams/s)',
    'fetch-answer floor',
    'SnapshotAgent, global fetch',
    'SnapshotAgent (1 read), global fetch',
    'x SnapshotAgent',
    {
      note: `the least a chunk-exact fetch-level answer with fetch's byte stream costs here (${fetchFloorExact}/${STREAMS} streams read apart); not ours, no target`,
    },
  )
  rateRow(
    'sse.inproc.global.vs-fetch-floor',
    'in-process chunk-exact SSE replay, the global fetch, vs the fetch-answer floor (streams/s)',
    'ours, global fetch',
    'fetch-answer floor',
    'fetch-answer floor',
    'x floor',
  )
  const node26 = Number(process.versions.node.split('.')[0]) >= 26
  rateRow(
    'sse.inproc.vs-snapshot',
    "in-process chunk-exact SSE replay, undici's fetch through the dispatcher vs SnapshotAgent (streams/s)",
    'ours',
    'SnapshotAgent',
    'SnapshotAgent (1 read)',
    'x SnapshotAgent',
    {
      target: { kind: 'min', value: node26 ? 0.5 : 0.3, text: node26 ? '>= 0.5x on Node 26' : '>= 0.3x' },
      conditions: [{ text: `every chunk its own read (${exact.exact}/${STREAMS} streams)`, ok: exact.exact === STREAMS }],
    },
  )
  const floorExact = (lastReads.floor ?? []).filter((r) => r.reads === EVENTS).length
  rateRow(
    'sse.inproc.floor.vs-snapshot',
    'in-process chunk floor (a bare dispatcher, one macrotask per chunk) vs SnapshotAgent (streams/s)',
    'chunk floor',
    'SnapshotAgent',
    'SnapshotAgent (1 read)',
    'x SnapshotAgent',
    { note: `the least a chunk-exact replay through fetch's dispatcher API costs here (${floorExact}/${STREAMS} streams read apart); not ours, no target` },
  )
  rateRow('sse.inproc.vs-floor', 'in-process chunk-exact SSE replay vs the chunk floor (streams/s)', 'ours', 'chunk floor', 'chunk floor', 'x floor')
  rateRow(
    'sse.inproc.vs-msw',
    'in-process chunk-exact SSE replay vs msw 2 stream (streams/s)',
    'ours',
    'msw 2 stream',
    `msw 2 (${meanReads('msw').toFixed(0)} reads)`,
    'x msw',
  )
  await timerAppRows(report, urls, store, floor)
  if (PROFILE) {
    for (const [name, side] of [
      ['in-process SSE replay, dispatcher', ours],
      ['in-process SSE replay, global fetch', oursGlobal],
    ] as const) {
      const { file } = await profiled(name, async () => {
        for (let i = 0; i < 3; i++) await side()
      })
      report.profile(summarizeProfile(name, file))
    }
  }
  await snapshot.close()
  await globalSnapshot.close()
  await live.close()
  await store.close()
  upstream.close()
  await rm(dir, { recursive: true, force: true })
})
