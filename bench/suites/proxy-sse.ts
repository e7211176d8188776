/**
 * Chunk-exact SSE replay through the proxy: 100 streams x 50 events read by a client in another process
 * (bench/clients/sse-reader.ts: undici `fetch`, reads counted at the client), on plain HTTP (forward,
 * absolute-form), HTTPS (CONNECT + MITM) and reverse mode (a base URL), against talkback, interleaved in rounds.
 *
 * How each side is set up, and why that is fair:
 * - ours: strict replay at the default pace (`chunks`) of traces recorded through the proxy itself from the
 *   live upstream (one over plain HTTP, one over HTTPS; reverse mode replays the plain one, which it records
 *   the same way); a fresh proxy and session a round, whose summary must be clean.
 * - talkback: replay mode (`record: DISABLED`, `allowHeaders: []`), tapes recorded by talkback itself from the
 *   same upstream; a base-URL server, plain HTTP (the peer of forward and reverse) and its own HTTPS server
 *   (the peer of MITM: talkback has no CONNECT). talkback answers a tape in one write, so its client reads
 *   each stream in about one read: the ratio is the price of keeping every chunk a read of its own.
 *
 *   node --conditions=tool-replay-source bench/suites/proxy-sse.ts      (BENCH_STREAMS=N, BENCH_ROUNDS=N)
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createMemoryStore, openSession } from 'tool-replay'
import { loadCertificateAuthority, parseReverse, startProxy } from 'tool-replay/proxy'
import { interleave, median, PROFILE, runSuite, type Side } from '../lib/harness.ts'
import { profiled, summarizeProfile } from '../lib/profile.ts'
import { assertCleanReplay, runChild, startTalkback, testPki } from '../lib/servers.ts'
import { CONCURRENCY, EVENTS, exactReads, GAP_MS, recordedChunks, STREAMS, type StreamRead, startSseServer, streamBytes } from '../lib/sse.ts'

interface Read {
  ms: number
  reads: StreamRead[]
}

const paths = Array.from({ length: STREAMS }, (_, i) => `/stream/${i}`)

await runSuite('proxy-sse', `Chunk-exact SSE replay through the proxy: ${STREAMS} streams x ${EVENTS} events`, async (report) => {
  const dir = await mkdtemp(join(tmpdir(), 'tr-bench-proxy-sse-'))
  const pki = await testPki(dir)
  const upstreamCa = await loadCertificateAuthority(join(dir, 'test-ca'))
  const leaf = await upstreamCa.issueLeaf('sse.test')
  const plain = await startSseServer()
  const tls = await startSseServer(leaf)
  const ca = await loadCertificateAuthority(join(dir, 'store'))
  const store = createMemoryStore()
  const upstream = { ca: pki.caPem, resolve: { 'sse.test:80': { host: '127.0.0.1', port: plain.port }, 'sse.test:443': { host: '127.0.0.1', port: tls.port } } }
  report.setup(
    `${STREAMS} SSE streams x ${EVENTS} events (${GAP_MS} ms apart live), ${CONCURRENCY} at a time; client: undici fetch in a child process, reads counted`,
  )

  const read = async (job: { urls: string[]; proxy?: string; tunnel?: boolean; ca?: string }): Promise<Read> => {
    const r = await runChild<Read>('clients/sse-reader.ts', [JSON.stringify(job)])
    r.reads.forEach((s, i) => {
      if (s.bytes !== streamBytes(job.urls[i] as string)) throw new Error(`bench: ${job.urls[i]} read ${s.bytes} bytes`)
    })
    return r
  }
  const plainUrls = paths.map((p) => `http://sse.test${p}`)
  const httpsUrls = paths.map((p) => `https://sse.test${p}`)
  for (const [trace, urls, tunnel] of [
    ['plain', plainUrls, false],
    ['https', httpsUrls, true],
  ] as const) {
    const session = await openSession({ mode: 'record', trace, store })
    const proxy = await startProxy({ session, ca, upstream })
    await read({ urls: [...urls], proxy: proxy.url, tunnel, ca: ca.certPem })
    await proxy.close()
  }
  const recorded = new Map([...(await recordedChunks(store, 'plain')), ...(await recordedChunks(store, 'https'))])

  const tapes = join(dir, 'tapes')
  const host = `http://127.0.0.1:${plain.port}`
  const recorder = await startTalkback({ host, tapes, record: 'NEW' })
  await read({ urls: paths.map((p) => `${recorder.url}${p}`) })
  recorder.close()
  const tbHttp = await startTalkback({ host, tapes })
  const tbHttps = await startTalkback({ host, tapes, https: { keyPath: pki.keyPath, certPath: pki.certPath } })

  const last: Record<string, Read> = {}
  const ours =
    (trace: 'plain' | 'https', job: (proxyUrl: string) => { urls: string[]; proxy?: string; tunnel?: boolean; ca?: string }, reverse?: string) => async () => {
      const session = await openSession({ mode: 'replay', trace, store })
      const proxy = await startProxy({ session, ca, ...(reverse ? { reverse: parseReverse([reverse]) } : {}) })
      const r = await read(job(proxy.url)).catch(async (err) => {
        await proxy.close()
        throw err
      })
      assertCleanReplay(await proxy.close(), `SSE ${trace}`)
      return r
    }
  const timed = (name: string, run: () => Promise<Read>) => async () => {
    const r = await run()
    last[name] = r
    return r.ms
  }
  const oursSides: Record<string, () => Promise<Read>> = {
    'ours plain HTTP': ours('plain', (proxyUrl) => ({ urls: plainUrls, proxy: proxyUrl, tunnel: false })),
    'ours HTTPS MITM': ours('https', (proxyUrl) => ({ urls: httpsUrls, proxy: proxyUrl, tunnel: true, ca: ca.certPem })),
    'ours reverse': ours('plain', (proxyUrl) => ({ urls: paths.map((p) => `${proxyUrl}${p}`) }), 'http://sse.test'),
  }
  const sides: Record<string, Side> = {
    ...Object.fromEntries(Object.entries(oursSides).map(([name, run]) => [name, timed(name, run)])),
    'talkback HTTP': timed('talkback HTTP', () => read({ urls: paths.map((p) => `${tbHttp.url}${p}`) })),
    'talkback HTTPS': timed('talkback HTTPS', () => read({ urls: paths.map((p) => `${tbHttps.url}${p}`), ca: pki.caPem })),
  }
  const ms = await interleave(sides, undefined, 300)
  const m = (name: string) => median(ms[name] as number[])
  const meanReads = (name: string) => (last[name]?.reads ?? []).reduce((n, r) => n + r.reads, 0) / STREAMS
  for (const [id, name, peer, urls, label] of [
    ['sse.proxy.http.vs-talkback', 'ours plain HTTP', 'talkback HTTP', plainUrls, 'proxy chunk-exact SSE replay, plain HTTP forward vs talkback'],
    ['sse.proxy.https.vs-talkback', 'ours HTTPS MITM', 'talkback HTTPS', httpsUrls, 'proxy chunk-exact SSE replay, HTTPS MITM vs talkback HTTPS'],
    ['sse.proxy.reverse.vs-talkback', 'ours reverse', 'talkback HTTP', plainUrls, 'proxy chunk-exact SSE replay, reverse mode vs talkback'],
  ] as const) {
    const exact = exactReads(urls, (last[name] as Read).reads, recorded)
    report.row({
      id,
      metric: `${label} (streams/s)`,
      ours: (STREAMS / m(name)) * 1000,
      unit: 'streams/s',
      peer: { name: `${peer} (${meanReads(peer).toFixed(1)} reads)`, value: (STREAMS / m(peer)) * 1000 },
      ratio: m(peer) / m(name),
      ratioOf: 'peer/ours',
      ratioText: 'x talkback',
      target: { kind: 'min', value: 1.0, text: '>= 1.0x' },
      conditions: [
        {
          text: `every chunk its own read (${exact.exact}/${STREAMS} streams, mean ${exact.meanReads.toFixed(1)} of ${exact.min}-${exact.max})`,
          ok: exact.exact === STREAMS,
        },
      ],
      rounds: { ours: ms[name] as number[], peer: ms[peer] as number[] },
    })
  }
  if (PROFILE) {
    for (const [name, run] of Object.entries(oursSides)) {
      const { file } = await profiled(`proxy SSE ${name}`, run)
      report.profile(summarizeProfile(`proxy SSE ${name} (the proxy process; client in a child)`, file))
    }
  }
  tbHttp.close()
  tbHttps.close()
  plain.close()
  tls.close()
  await store.close()
  await rm(dir, { recursive: true, force: true })
})
