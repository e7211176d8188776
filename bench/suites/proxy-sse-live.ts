/**
 * Proxy SSE replay against the live run it reproduces (issue 33 item 2): is a replay ever slower than its
 * recording, and do chunks that arrived apart stay apart? Two workloads of 100 streams x 50 events, each read
 * by a client in another process (bench/clients/sse-reader.ts: undici `fetch`, reads counted at the client):
 * - back to back: the upstream writes the 50 events in one turn (the live client reads them in 1-2 reads).
 *   Ours (strict replay at the default pace, plain HTTP forward and reverse mode) against talkback (its own
 *   tapes of the same upstream) and against live (the client reading the upstream itself).
 * - 1 ms apart: the upstream waits 1 ms between events. Ours (plain HTTP forward) against live: the replay
 *   must take no longer, with the events still read apart.
 *
 *   node --conditions=tool-replay-source bench/suites/proxy-sse-live.ts      (BENCH_STREAMS=N, BENCH_ROUNDS=N)
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createMemoryStore, openSession } from 'tool-replay'
import { loadCertificateAuthority, parseReverse, startProxy } from 'tool-replay/proxy'
import { interleave, median, runSuite, type Side } from '../lib/harness.ts'
import { assertCleanReplay, runChild, startTalkback } from '../lib/servers.ts'
import { CONCURRENCY, EVENTS, STREAMS, type StreamRead, startSseServer, streamBytes } from '../lib/sse.ts'

interface Read {
  ms: number
  reads: StreamRead[]
}
interface Job {
  urls: string[]
  proxy?: string
}

const paths = Array.from({ length: STREAMS }, (_, i) => `/stream/${i}`)
const meanReads = (r: Read | undefined): number => (r?.reads ?? []).reduce((n, s) => n + s.reads, 0) / STREAMS

await runSuite('proxy-sse-live', `Proxy SSE replay against live: ${STREAMS} streams x ${EVENTS} events, back to back and 1 ms apart`, async (report) => {
  const dir = await mkdtemp(join(tmpdir(), 'tr-bench-proxy-sse-live-'))
  const plain = await startSseServer()
  const ca = await loadCertificateAuthority(join(dir, 'store'))
  const store = createMemoryStore()
  const upstream = { resolve: { 'sse.test:80': { host: '127.0.0.1', port: plain.port } } }
  report.setup(`${STREAMS} SSE streams x ${EVENTS} events, ${CONCURRENCY} at a time; client: undici fetch in a child process, reads counted`)
  report.setup('live: the client reads the upstream itself; ours: strict replay at the default pace of a trace recorded through the proxy')

  const read = async (job: Job): Promise<Read> => {
    const r = await runChild<Read>('clients/sse-reader.ts', [JSON.stringify(job)])
    r.reads.forEach((s, i) => {
      if (s.bytes !== streamBytes(job.urls[i] as string)) throw new Error(`bench: ${job.urls[i]} read ${s.bytes} bytes`)
    })
    return r
  }
  const last: Record<string, Read> = {}
  const timed =
    (name: string, run: () => Promise<Read>): Side =>
    async () => {
      const r = await run()
      last[name] = r
      return r.ms
    }
  const ours = (trace: string, job: (proxyUrl: string) => Job, reverse?: string) => async () => {
    const session = await openSession({ mode: 'replay', trace, store })
    const proxy = await startProxy({ session, ca, ...(reverse ? { reverse: parseReverse([reverse]) } : {}) })
    const r = await read(job(proxy.url)).catch(async (err) => {
      await proxy.close()
      throw err
    })
    assertCleanReplay(await proxy.close(), `SSE ${trace}`)
    return r
  }
  const record = async (trace: string, urls: string[]) => {
    const session = await openSession({ mode: 'record', trace, store })
    const proxy = await startProxy({ session, ca, upstream })
    await read({ urls, proxy: proxy.url })
    await proxy.close()
  }
  const urlsAt = (base: string, gap: number) => paths.map((p) => `${base}${p}?gap=${gap}`)
  const live = (gap: number) => () => read({ urls: urlsAt(`http://127.0.0.1:${plain.port}`, gap) })

  // Back to back.
  const burstUrls = urlsAt('http://sse.test', 0)
  await record('burst', burstUrls)
  const tapes = join(dir, 'tapes')
  const host = `http://127.0.0.1:${plain.port}`
  const recorder = await startTalkback({ host, tapes, record: 'NEW' })
  await read({ urls: urlsAt(recorder.url, 0) })
  recorder.close()
  const tb = await startTalkback({ host, tapes })
  const burst = await interleave(
    {
      'live, back to back': timed('live0', live(0)),
      'ours plain HTTP': timed(
        'plain0',
        ours('burst', (proxyUrl) => ({ urls: burstUrls, proxy: proxyUrl })),
      ),
      'ours reverse': timed(
        'reverse0',
        ours('burst', (proxyUrl) => ({ urls: urlsAt(proxyUrl, 0) }), 'http://sse.test'),
      ),
      'talkback HTTP': timed('talkback0', () => read({ urls: urlsAt(tb.url, 0) })),
    },
    undefined,
    300,
  )
  tb.close()
  const rate = (ms: number) => (STREAMS / ms) * 1000
  const liveMs0 = median(burst['live, back to back'] as number[])
  for (const [id, side, key, label] of [
    ['sse.proxy.burst.http.vs-talkback', 'ours plain HTTP', 'plain0', 'proxy SSE replay, upstream wrote back to back, plain HTTP forward vs talkback'],
    ['sse.proxy.burst.reverse.vs-talkback', 'ours reverse', 'reverse0', 'proxy SSE replay, upstream wrote back to back, reverse mode vs talkback'],
  ] as const) {
    const oursMs = median(burst[side] as number[])
    report.row({
      id,
      metric: `${label} (streams/s)`,
      ours: rate(oursMs),
      unit: 'streams/s',
      peer: { name: `talkback (${meanReads(last.talkback0).toFixed(1)} reads)`, value: rate(median(burst['talkback HTTP'] as number[])) },
      ratio: median(burst['talkback HTTP'] as number[]) / oursMs,
      ratioOf: 'peer/ours',
      ratioText: 'x talkback',
      target: { kind: 'min', value: 1.0, text: '>= 1.0x' },
      conditions: [
        {
          text: `>= the live rate (live ${rate(liveMs0).toFixed(0)} streams/s, ${meanReads(last.live0).toFixed(1)} reads; ours ${meanReads(last[key]).toFixed(1)} reads)`,
          ok: oursMs <= liveMs0,
        },
      ],
      rounds: { ours: burst[side] as number[], peer: burst['talkback HTTP'] as number[] },
    })
  }

  // 1 ms apart.
  const spacedUrls = urlsAt('http://sse.test', 1)
  await record('spaced', spacedUrls)
  const spaced = await interleave(
    {
      'live, 1 ms apart': timed('live1', live(1)),
      'ours plain HTTP, 1 ms': timed(
        'plain1',
        ours('spaced', (proxyUrl) => ({ urls: spacedUrls, proxy: proxyUrl })),
      ),
    },
    undefined,
    300,
  )
  const liveMs1 = spaced['live, 1 ms apart'] as number[]
  const oursMs1 = spaced['ours plain HTTP, 1 ms'] as number[]
  report.row({
    id: 'sse.proxy.gap1.http.vs-live',
    metric: 'proxy SSE replay, 1 ms recorded gaps, plain HTTP forward vs live (streams/s)',
    ours: rate(median(oursMs1)),
    unit: 'streams/s',
    peer: { name: `live (${meanReads(last.live1).toFixed(1)} reads)`, value: rate(median(liveMs1)) },
    ratio: median(liveMs1) / median(oursMs1),
    ratioOf: 'peer/ours',
    ratioText: 'x live',
    target: { kind: 'min', value: 1.0, text: '>= 1.0x (replay time <= live time)' },
    conditions: [{ text: `reads apart at the client >= 45 of ${EVENTS} (ours ${meanReads(last.plain1).toFixed(1)})`, ok: meanReads(last.plain1) >= 45 }],
    rounds: { ours: oursMs1, peer: liveMs1 },
  })
  plain.close()
  await store.close()
  await rm(dir, { recursive: true, force: true })
})
