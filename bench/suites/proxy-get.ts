/**
 * Proxy replay throughput: GET of a 1 KB body with 50 keep-alive connections, plain HTTP and HTTPS through
 * CONNECT, against a bare server (the limit) and the proxies a user would pick instead, interleaved in rounds.
 * Every server runs in this process; the load runs in one child process for the whole suite (bench/clients/load.ts
 * --serve, so the generator is warm from run to run, as an independent harness is), the same client for every
 * side of a wire: raw keep-alive sockets for plain HTTP (bench/clients/raw-http.ts; the bare server also under
 * autocannon, an independent harness, for comparison), undici keep-alive loops for HTTPS (autocannon cannot
 * CONNECT). Each side gets the same warm-up, then the same number of requests; req/s is that number over the
 * time the client took. Each run also takes both processes' CPU: the load-generator rows say whether the
 * generator or the server set a row's pace, and the CPU-per-request rows compare the servers' own cost, which
 * the generator's pace does not change.
 *
 * How each side is set up, and why that is fair:
 * - ours, forward (HTTP_PROXY clients: absolute-form request line) and reverse mode (`--reverse`, a base URL:
 *   origin-form), strict replay of a trace holding exactly one recording per request (replay never repeats a
 *   recording); a fresh proxy and session each round, whose summary must come out clean (every recording
 *   used once, no miss, no overrun): the strict accounting is checked under load, not switched off.
 * - bare: node:http(s) answering the same bytes and headers from memory, nothing else: the limit.
 * - talkback: its replay mode (`record: DISABLED`, `fallbackMode: NOT_FOUND`), one tape recorded by talkback
 *   itself from the bare server, `allowHeaders: []` so it matches on method, URL and body like ours. talkback
 *   is a base-URL server only (no CONNECT), so it takes origin-form requests; over HTTPS it is its own TLS
 *   server (`https.enabled`), which is compared for information only (no MITM to pay for).
 * - mockttp: an intercepting proxy (`getLocal` with a generated CA), `recordTraffic: false`, one preloaded
 *   `forGet(url).thenReply(...)` rule per wire: the proxy-form requests ours gets, CONNECT + TLS for HTTPS.
 * talkback and mockttp answer a tape or rule any number of times; ours checks each recording is used once.
 * Also the new-host MITM handshake (CONNECT + TLS to a host never seen, so a leaf is made) against the same
 * host again (leaf cached), target <= 10 ms.
 *
 *   node --conditions=tool-replay-source bench/suites/proxy-get.ts        (BENCH_QUICK=1, BENCH_ROUNDS=N)
 */
import { once } from 'node:events'
import { mkdtemp, rm } from 'node:fs/promises'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { connect as tlsConnect } from 'node:tls'
import { createMemoryStore, openSession } from 'tool-replay'
import { type CertificateAuthority, loadCertificateAuthority, parseReverse, startProxy } from 'tool-replay/proxy'
import { request } from 'undici'
import { fmt, interleave, median, PROFILE, pick, runSuite, type Side } from '../lib/harness.ts'
import { profiled, summarizeProfile } from '../lib/profile.ts'
import { assertCleanReplay, repeatedGetTrace, serveChild, startBare, startMockttp, startTalkback, testPki } from '../lib/servers.ts'

const CONNECTIONS = 50
const AMOUNT = Number(process.env.BENCH_AMOUNT ?? pick(5000, 30000))
const WARM = pick(1000, 3000)
const BODY = Buffer.alloc(1024, 'x')
const HEADERS: Array<[string, string]> = [
  ['content-type', 'application/octet-stream'],
  ['content-length', String(BODY.byteLength)],
]

interface Load {
  total: number
  ms: number
  rps: number
  errors: number
  /** The load generator's CPU over the run (user and system). */
  cpuMs: number
}

/**
 * Where a side's time went, per measured run: the load generator's cores (its CPU over its wall time: 1 is a
 * core of its own), this process's cores (every server and proxy runs here) and its CPU per answered request.
 * A side whose generator used a whole core while the server used less was measured at the generator's pace.
 */
interface Cpu {
  client: number
  server: number
  usPerRequest: number
}
const cpuBySide: Record<string, Cpu[]> = {}

const NEW_HOSTS = 30
/**
 * No full GC forced before each side: with one, each run compiled its code again, and the bare server took 47-83
 * us of CPU per request here against 19-32 in a process of its own; that cost fell hardest on the lightest side
 * and flattered ours (forward 0.52x and 1.04x bare per request in two quick runs with it; 0.60x and 0.54x in two
 * without, bare at 30-34 us; 2026-12-08). What a side leaves behind (ours: the round's store and session) is
 * collected during a later run instead.
 */
const NO_FORCED_GC = false

/** The load generator, one process for the suite (Job is defined below; the answer is a Load). */
const loadClient = serveChild<object, Load>('clients/load.ts')

/** ms from sending CONNECT to a finished TLS handshake with the proxy's leaf for `host`. */
async function handshakeMs(port: number, host: string, caPem: string): Promise<number> {
  const t0 = performance.now()
  const socket = connect(port, '127.0.0.1')
  await once(socket, 'connect')
  socket.write(`CONNECT ${host}:443 HTTP/1.1\r\nHost: ${host}:443\r\n\r\n`)
  await once(socket, 'data')
  const tls = tlsConnect({ socket, servername: host, ca: caPem })
  await once(tls, 'secureConnect')
  const ms = performance.now() - t0
  tls.destroy()
  return ms
}

/** The MITM cost of a host never seen (a leaf made) against the same host again (leaf cached), medians. */
async function handshakes(ca: CertificateAuthority): Promise<{ newHost: number; cached: number }> {
  const store = createMemoryStore()
  await store.putTrace(repeatedGetTrace('hosts', 'https://bench.test/kb', 1, BODY, HEADERS))
  const proxy = await startProxy({ session: await openSession({ mode: 'replay', trace: 'hosts', store }), ca })
  await handshakeMs(proxy.port, 'warmup.bench.test', ca.certPem)
  const fresh: number[] = []
  const cached: number[] = []
  for (let i = 0; i < NEW_HOSTS; i++) {
    fresh.push(await handshakeMs(proxy.port, `h${i}.bench.test`, ca.certPem))
    cached.push(await handshakeMs(proxy.port, `h${i}.bench.test`, ca.certPem))
  }
  await proxy.close()
  return { newHost: median(fresh), cached: median(cached) }
}

function bareHandler(_req: IncomingMessage, res: ServerResponse): void {
  res.writeHead(200, HEADERS)
  res.end(BODY)
}

type Job =
  | { kind: 'raw' | 'autocannon'; url: string; path: string; host?: string; bodyBytes?: number }
  | { kind: 'undici'; url: string; ca?: string; proxy?: string }
/** A plain-HTTP GET of the body as the raw generator sends it. */
const raw = (url: string, path: string, host?: string): Job => ({ kind: 'raw', url, path, bodyBytes: BODY.byteLength, ...(host ? { host } : {}) })

/**
 * Who set a rate row's pace, from the two processes' cores: the generator when it used a core and the server
 * did not (then how far the server would go on a core of its own, from its CPU per request), the server when
 * it used a core, else neither (each waited on the other: wake-ups and the loopback, the machine's pace).
 */
function paceOf(client: number, server: number, oneCore: number, rps: number): string {
  const used = `the generator used ${fmt(client)} cores, the server ${fmt(server)}`
  if (client >= 0.9 && server < 0.9) {
    return `client-bound: ${used}; at its CPU per request the server answers about ${fmt(oneCore)} req/s on a core of its own, ${fmt(oneCore / rps)}x the ${fmt(rps)} req/s measured`
  }
  if (server >= 0.9) return `server-bound: ${used}`
  return `neither process used a whole core (${used}): each waited on the other, so the rate is the machine's round trip, not a limit of either`
}

/** Errors a peer's side had, by side (a few failed requests under load are noted, not fatal, for peers). */
const peerErrors: Record<string, number> = {}

/**
 * Warm-up, then the measured run of `side`. Ours must answer every request with 200 (its replay is strict: a
 * lost request is a failure); a peer may lose up to 1% under load, which is noted on its rows.
 */
async function load(job: Job, side: string, peer = false): Promise<number> {
  let rps = Number.NaN
  for (const amount of [WARM, AMOUNT]) {
    const cpu0 = process.cpuUsage()
    const r = await loadClient.run({ ...job, amount, connections: CONNECTIONS })
    const { user, system } = process.cpuUsage(cpu0)
    // Over the client's time from its first request to its last answer (autocannon's run itself lasts to its
    // next one-second tick, while nothing is sent).
    if (amount === AMOUNT) {
      ;(cpuBySide[side] ??= []).push({ client: r.cpuMs / r.ms, server: (user + system) / 1000 / r.ms, usPerRequest: (user + system) / r.total })
    }
    const lost = amount - r.total
    if (peer && lost <= amount / 100) {
      if (lost > 0 || r.errors > 0) peerErrors[side] = (peerErrors[side] ?? 0) + Math.max(lost, r.errors)
    } else if (r.errors > 0 || lost !== 0) {
      throw new Error(`bench: ${JSON.stringify({ ...job, ca: undefined })} answered ${r.total}/${amount} with ${r.errors} errors`)
    }
    rps = r.rps
  }
  return rps
}

await runSuite('proxy-get', 'Proxy replay: GET 1 KB x 50 connections, plain HTTP and HTTPS through CONNECT', async (report) => {
  const dir = await mkdtemp(join(tmpdir(), 'tr-bench-proxy-'))
  const pki = await testPki(dir)
  const ca = await loadCertificateAuthority(join(dir, 'store'))
  report.setup(`${CONNECTIONS} keep-alive connections, ${WARM} warm-up + ${AMOUNT} measured requests per side and round; load from a child process`)

  const bareHttp = await startBare(bareHandler)
  const bareHttps = await startBare(bareHandler, pki)
  const tapes = join(dir, 'tapes')
  const recorder = await startTalkback({ host: `http://127.0.0.1:${bareHttp.port}`, tapes, record: 'NEW' })
  await (await request(`${recorder.url}/kb`)).body.arrayBuffer()
  recorder.close()
  const tbHttp = await startTalkback({ host: `http://127.0.0.1:${bareHttp.port}`, tapes })
  const tbHttps = await startTalkback({ host: `http://127.0.0.1:${bareHttp.port}`, tapes, https: { keyPath: pki.keyPath, certPath: pki.certPath } })
  const mock = await startMockttp()
  await mock.server.forGet('http://bench.test/kb').thenReply(200, BODY, Object.fromEntries(HEADERS))
  await mock.server.forGet('https://bench.test/kb').thenReply(200, BODY, Object.fromEntries(HEADERS))
  // mockttp's own url is https://localhost:PORT once HTTPS is on; clients reach it as a plain proxy, like ours.
  const mockUrl = `http://127.0.0.1:${mock.server.port}`

  let traceNo = 0
  /** Our proxy for one round: a fresh strict session over exactly WARM + AMOUNT recordings of `url`. */
  const ours = (side: string, url: string, drive: (proxyUrl: string, caPem: string) => Job, reverse?: string) => async () => {
    const store = createMemoryStore()
    const trace = `bench-${++traceNo}`
    await store.putTrace(repeatedGetTrace(trace, url, WARM + AMOUNT, BODY, HEADERS))
    const session = await openSession({ mode: 'replay', trace, store })
    const proxy = await startProxy({ session, ca, ...(reverse ? { reverse: parseReverse([reverse]) } : {}) })
    const rps = await load(drive(proxy.url, proxy.ca.certPem), side).catch(async (err) => {
      await proxy.close()
      throw err
    })
    assertCleanReplay(await proxy.close(), trace)
    await store.close()
    return rps
  }
  const oursSides: Record<string, Side> = {
    'ours forward': ours('ours forward', 'http://bench.test/kb', (proxyUrl) => raw(proxyUrl, 'http://bench.test/kb', 'bench.test')),
    'ours reverse': ours('ours reverse', 'http://bench.test/kb', (proxyUrl) => raw(proxyUrl, '/kb'), 'http://bench.test'),
    'ours HTTPS MITM': ours('ours HTTPS MITM', 'https://bench.test/kb', (proxyUrl, caPem) => ({
      kind: 'undici',
      url: 'https://bench.test/kb',
      proxy: proxyUrl,
      ca: caPem,
    })),
  }

  process.stderr.write('  plain HTTP (raw keep-alive sockets; the bare server also under autocannon):\n')
  const http = await interleave(
    {
      'ours forward': oursSides['ours forward'] as Side,
      'ours reverse': oursSides['ours reverse'] as Side,
      bare: () => load(raw(`http://127.0.0.1:${bareHttp.port}`, '/kb'), 'bare', true),
      'bare (autocannon)': () => load({ kind: 'autocannon', url: `http://127.0.0.1:${bareHttp.port}`, path: '/kb' }, 'bare (autocannon)', true),
      talkback: () => load(raw(tbHttp.url, '/kb'), 'talkback', true),
      mockttp: () => load(raw(mockUrl, 'http://bench.test/kb', 'bench.test'), 'mockttp', true),
    },
    undefined,
    500,
    NO_FORCED_GC,
  )
  process.stderr.write('  HTTPS (undici loops; CONNECT through the proxies):\n')
  const https = await interleave(
    {
      'ours HTTPS MITM': oursSides['ours HTTPS MITM'] as Side,
      'bare HTTPS': () => load({ kind: 'undici', url: `https://127.0.0.1:${bareHttps.port}/kb`, ca: pki.caPem }, 'bare HTTPS', true),
      'mockttp MITM': () => load({ kind: 'undici', url: 'https://bench.test/kb', proxy: mockUrl, ca: mock.caPem }, 'mockttp MITM', true),
      'talkback HTTPS server': () => load({ kind: 'undici', url: `${tbHttps.url}/kb`, ca: pki.caPem }, 'talkback HTTPS server', true),
    },
    undefined,
    500,
    NO_FORCED_GC,
  )
  const all = { ...http, ...https }
  const m = (name: string) => median(all[name] as number[])
  const row = (id: string, ours: string, peer: string, label: string, target?: { kind: 'min'; value: number; text: string }) =>
    report.row({
      id,
      metric: label,
      ours: m(ours),
      unit: 'req/s',
      peer: { name: peer, value: m(peer) },
      ratio: m(ours) / m(peer),
      ratioOf: 'ours/peer',
      ratioText: `x ${peer}`,
      ...(target ? { target } : {}),
      rounds: { ours: all[ours] as number[], peer: all[peer] as number[] },
      ...(peerErrors[peer] ? { note: `${peer} failed ${peerErrors[peer]} request(s) over the run (under 1% a side; rate counts answered ones)` } : {}),
    })
  // A bare node:http server answers tens of thousands of these a second on an idle 2-core machine; far below
  // that, the load generator (starved of CPU) limits every side alike and the ratios shrink toward 1.
  if (m('bare') < 10_000) {
    report.setup(`WARNING: the bare server measured ${m('bare').toFixed(0)} req/s: the machine is saturated and the client, not the servers, limits these rows`)
  }
  const ofBare = { kind: 'min' as const, value: 0.8, text: '>= 0.80x' }
  const ofTalkback = { kind: 'min' as const, value: 1.3, text: '>= 1.3x' }
  row('proxy.http.forward.vs-bare', 'ours forward', 'bare', 'proxy replay, plain HTTP forward (absolute-form) vs bare server', ofBare)
  row('proxy.http.forward.vs-talkback', 'ours forward', 'talkback', 'proxy replay, plain HTTP forward vs talkback', ofTalkback)
  row('proxy.http.forward.vs-mockttp', 'ours forward', 'mockttp', 'proxy replay, plain HTTP forward vs mockttp proxy')
  row('proxy.http.reverse.vs-bare', 'ours reverse', 'bare', 'proxy replay, reverse mode (base URL) vs bare server', ofBare)
  row('proxy.http.reverse.vs-talkback', 'ours reverse', 'talkback', 'proxy replay, reverse mode vs talkback', ofTalkback)
  row('proxy.https.mitm.vs-bare', 'ours HTTPS MITM', 'bare HTTPS', 'proxy replay, HTTPS via CONNECT + MITM vs bare HTTPS server', {
    kind: 'min',
    value: 0.6,
    text: '>= 0.60x',
  })
  row('proxy.https.mitm.vs-mockttp', 'ours HTTPS MITM', 'mockttp MITM', 'proxy replay, HTTPS MITM vs mockttp MITM')
  row('proxy.https.mitm.vs-talkback', 'ours HTTPS MITM', 'talkback HTTPS server', 'proxy replay, HTTPS MITM vs talkback as HTTPS server (no MITM)')

  // What the load generator allowed: a rate row measures the server only if the generator had CPU to spare. The
  // servers' CPU per request does not depend on the generator's pace (all of them run in this process).
  const cpu = (side: string) => (cpuBySide[side] ?? []).slice(-(all[side] as number[]).length)
  const cpuMedian = (side: string, k: keyof Cpu) => median(cpu(side).map((c) => c[k]))
  const generatorRow = (id: string, side: string, wire: string) => {
    const [client, server] = [cpuMedian(side, 'client'), cpuMedian(side, 'server')]
    const oneCore = 1e6 / cpuMedian(side, 'usPerRequest')
    report.row({
      id,
      metric: `the load generator's CPU during the ${side} runs, ${wire} (cores; 1 is one core)`,
      ours: client,
      unit: 'cores',
      peer: { name: `${side}'s process`, value: server },
      note: paceOf(client, server, oneCore, m(side)),
    })
  }
  generatorRow('proxy.http.bare.load-generator', 'bare', 'plain HTTP')
  generatorRow('proxy.http.bare-autocannon.load-generator', 'bare (autocannon)', 'plain HTTP')
  generatorRow('proxy.http.forward.load-generator', 'ours forward', 'plain HTTP')
  generatorRow('proxy.http.talkback.load-generator', 'talkback', 'plain HTTP')
  generatorRow('proxy.https.bare.load-generator', 'bare HTTPS', 'HTTPS')
  generatorRow('proxy.https.mitm.load-generator', 'ours HTTPS MITM', 'HTTPS')
  const cpuRow = (id: string, ours: string, peer: string, label: string) =>
    report.row({
      id,
      metric: `${label}: CPU per request in the serving process (the generator's pace aside)`,
      ours: cpuMedian(ours, 'usPerRequest'),
      unit: 'us',
      peer: { name: peer, value: cpuMedian(peer, 'usPerRequest') },
      ratio: cpuMedian(peer, 'usPerRequest') / cpuMedian(ours, 'usPerRequest'),
      ratioOf: 'peer/ours',
      ratioText: `x ${peer} (its CPU per request over ours)`,
      rounds: { ours: cpu(ours).map((c) => c.usPerRequest), peer: cpu(peer).map((c) => c.usPerRequest) },
    })
  cpuRow('proxy.http.forward.cpu-vs-bare', 'ours forward', 'bare', 'proxy replay, plain HTTP forward vs bare server')
  cpuRow('proxy.http.forward.cpu-vs-talkback', 'ours forward', 'talkback', 'proxy replay, plain HTTP forward vs talkback')
  cpuRow('proxy.http.reverse.cpu-vs-bare', 'ours reverse', 'bare', 'proxy replay, reverse mode vs bare server')
  cpuRow('proxy.https.mitm.cpu-vs-bare', 'ours HTTPS MITM', 'bare HTTPS', 'proxy replay, HTTPS MITM vs bare HTTPS server')

  const hs = await handshakes(ca)
  report.row({
    id: 'proxy.https.new-host-handshake',
    metric: `new-host MITM handshake: CONNECT + TLS (median of ${NEW_HOSTS}), vs the same host again`,
    ours: hs.newHost,
    unit: 'ms',
    peer: { name: 'cached leaf', value: hs.cached },
    ratio: hs.newHost / hs.cached,
    ratioText: 'x cached',
    target: { kind: 'max', value: 10, text: '<= 10 ms', on: 'ours' },
  })

  if (PROFILE) {
    for (const [name, side] of Object.entries(oursSides)) {
      const { file } = await profiled(`proxy ${name}`, side)
      report.profile(summarizeProfile(`proxy ${name} (the proxy process; load in a child)`, file))
    }
  }
  tbHttp.close()
  tbHttps.close()
  await mock.server.stop()
  bareHttp.close()
  bareHttps.close()
  await loadClient.close()
  await rm(dir, { recursive: true, force: true })
})
