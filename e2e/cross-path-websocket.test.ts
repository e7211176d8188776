/**
 * One WebSocket conversation on every capture path: the `ws` client in a process that called install() (node:http
 * upgrade), through the proxy (CONNECT + TLS), and in a sealed run (no proxy variables read) — text answered by
 * content, binary, a fragmented message, ping/pong, the server's close code and reason; the client dropping the
 * connection mid-session; the server dropping it mid-frame. On every path:
 * - the app sees the same thing live;
 * - the recordings are equal: `tr-proxy diff` finds no difference between any two paths' traces, and each ends
 *   the same way (a close handshake, or the same failure);
 * - strict replay with the server STOPPED (a counting listener on its port sees 0 connections) gives the app
 *   what it saw live.
 * The sealed path needs root, unshare and nft; where it cannot seal, that path is skipped, saying why.
 */
import assert from 'node:assert/strict'
import { createServer as createHttpsServer } from 'node:https'
import { connect, type LookupFunction, type Socket } from 'node:net'
import { before, describe, test } from 'node:test'
import { connect as tlsConnect } from 'node:tls'
import { fileURLToPath } from 'node:url'
import { runCli } from '../cli/index.ts'
import { install } from '../interceptor/index.ts'
import type { ProxyServer } from '../proxy/index.ts'
import { openStore } from '../store/index.ts'
import { startTestProxy } from './support/proxy-harness.ts'
import { cannotSeal, cli, countingListener, sealedWork } from './support/sealed-harness.ts'
import { converse, type Scenario, serveConversation } from './support/websocket-conversation.ts'
import { type CountingWebSocketServer, listenCounting } from './support/websocket-server.ts'

const SCENARIOS: Scenario[] = ['full', 'abort', 'cut']
type PathName = 'interceptor' | 'proxy' | 'sealed'
const CONVERSATION = fileURLToPath(new URL('./support/websocket-conversation.ts', import.meta.url))

let work: Awaited<ReturnType<typeof sealedWork>>
let noSeal: string | undefined

before(async () => {
  noSeal = await cannotSeal()
  work = await sealedWork('tr-cross-ws-')
})

async function startServer(): Promise<CountingWebSocketServer> {
  const server = createHttpsServer(work.pki.certs['api.test'] as { cert: string; key: string })
  return listenCounting(server, serveConversation(server))
}

/** A CONNECT tunnel through the proxy to `authority`. */
async function tunnel(proxy: ProxyServer, authority: string): Promise<Socket> {
  const s = connect(proxy.port, '127.0.0.1')
  await new Promise((r) => s.once('connect', r))
  s.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`)
  const answer = await new Promise<Buffer>((r) => s.once('data', r))
  assert.match(answer.toString('latin1'), /^HTTP\/1\.1 200 /)
  return s
}

/** Runs one scenario on `path` in `mode`, recording or replaying trace `${path}-${scenario}`; what the app saw. */
async function runOn(path: PathName, mode: 'record' | 'replay', scenario: Scenario, port: number): Promise<string[]> {
  const url = `wss://api.test:${port}/rt?model=m`
  const trace = `${path}-${scenario}`
  if (path === 'sealed') {
    const upstream = mode === 'record' ? ['--resolve', `api.test=127.0.0.1:${port}`, '--upstream-ca', work.pki.caPath] : ['--strict']
    const run = await cli([mode, '--store', work.store, '-t', trace, '--sealed', ...upstream, '--', process.execPath, CONVERSATION, url, scenario])
    assert.ok(run.code === 0 || scenario !== 'full', `${mode} ${trace}: ${run.stderr}`)
    return run.stdout
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as string)
  }
  const store = await openStore(work.store)
  try {
    if (path === 'interceptor') {
      const tr = await install({ mode, trace, store })
      try {
        // api.test is 127.0.0.1 here (the other paths map it with --resolve).
        const lookup = ((_host: string, opts: { all?: boolean }, cb: (e: null, a: unknown, f?: number) => void) =>
          opts.all ? cb(null, [{ address: '127.0.0.1', family: 4 }]) : cb(null, '127.0.0.1', 4)) as unknown as LookupFunction
        return await converse(url, scenario, { lookup, ca: work.pki.caPem })
      } finally {
        const summary = await tr.close()
        if (mode === 'replay') assert.equal(summary.ok, true, `${trace}: ${JSON.stringify(summary.misses)}`)
      }
    }
    const proxy = await startTestProxy({
      store,
      storeDir: work.store,
      mode,
      trace,
      upstreamCaPem: work.pki.caPem,
      resolve: { 'api.test': { host: '127.0.0.1', port } },
    })
    try {
      const raw = await tunnel(proxy, `api.test:${port}`)
      const ca = proxy.ca.certPem
      return await converse(url, scenario, { createConnection: () => tlsConnect({ socket: raw, servername: 'api.test', ca, ALPNProtocols: ['http/1.1'] }) })
    } finally {
      const summary = await proxy.close()
      if (mode === 'replay') assert.equal(summary.ok, true, `${trace}: ${JSON.stringify(summary.misses)}`)
    }
  } finally {
    await store.close()
  }
}

/** How a recorded session went: its messages (side and opcode) and how it ended. */
async function outline(trace: string): Promise<string[]> {
  const store = await openStore(work.store)
  try {
    const x = (await store.readTrace(trace)).exchanges
    assert.equal(x.length, 1, `${trace} holds one exchange`)
    const ws = x[0]?.websocket
    return [
      ...(ws?.messages ?? []).map((m) => `${m.from} ${m.opcode}${m.close ? ` ${m.close.code} ${m.close.reason}` : ''}`),
      `end ${ws?.end ? ws.end.code : 'handshake'}`,
    ]
  } finally {
    await store.close()
  }
}

const EXPECTED_LIVE: Record<Scenario, string[]> = {
  full: ['text hello', 'text answer 2', 'pong p', `binary ${'*'}`, 'close 4002 done'],
  abort: ['text hello', 'text answer 2', 'close 1006 '],
  cut: ['text hello', 'text answer 2', 'close 1006 '],
}

/** A line as EXPECTED_LIVE states it (the binary payload's bytes are not spelled out). */
function shape(lines: string[]): string[] {
  return lines.map((l) => (l.startsWith('binary ') ? 'binary *' : l))
}

describe('one WebSocket conversation through the interceptor, the proxy and a sealed run', { timeout: 300_000 }, () => {
  test('equal traces, the same app outcomes live and in strict replay with the server stopped', async (t) => {
    const paths: PathName[] = noSeal ? ['interceptor', 'proxy'] : ['interceptor', 'proxy', 'sealed']
    t.diagnostic(noSeal ? `sealed path skipped: ${noSeal}` : `paths: ${paths.join(', ')}`)
    let server: CountingWebSocketServer | undefined = await startServer()
    const port = server.port
    const live = new Map<string, string[]>()
    let counting: Awaited<ReturnType<typeof countingListener>> | undefined
    try {
      for (const path of paths) for (const s of SCENARIOS) live.set(`${path}-${s}`, await runOn(path, 'record', s, port))
      for (const s of SCENARIOS) {
        for (const path of paths) assert.deepEqual(shape(live.get(`${path}-${s}`) ?? []), EXPECTED_LIVE[s], `${path} ${s} live`)
        const binary = paths.map((p) => live.get(`${p}-${s}`)?.find((l) => l.startsWith('binary')))
        assert.equal(new Set(binary).size, 1, 'the same bytes on every path')
      }
      const outlines = new Map<string, string[]>()
      for (const [trace] of live) outlines.set(trace, await outline(trace))
      assert.deepEqual(outlines.get('proxy-full'), [
        'server text',
        'client text',
        'server text',
        'client ping',
        'server pong',
        'client binary',
        'server binary',
        'client text',
        'server close 4002 done',
        'client close 4002 done',
        'end handshake',
      ])
      assert.deepEqual(outlines.get('proxy-abort'), ['server text', 'client text', 'server text', 'end ECONNRESET'])
      assert.deepEqual(outlines.get('proxy-cut'), ['server text', 'client text', 'server text', 'client text', 'end ECONNRESET'])
      for (const s of SCENARIOS) {
        for (const path of paths) assert.deepEqual(outlines.get(`${path}-${s}`), outlines.get(`proxy-${s}`), `${path} ${s} recorded as the proxy did`)
        for (const path of paths.filter((p) => p !== 'proxy')) {
          const out: string[] = []
          const code = await runCli(['diff', `proxy-${s}`, `${path}-${s}`, '--store', work.store, '--exit-code'], {
            out: (x) => out.push(x),
            err: (x) => out.push(x),
          })
          assert.equal(code, 0, `tr-proxy diff proxy-${s} ${path}-${s}:\n${out.join('\n')}`)
        }
      }
      await server.close()
      server = undefined
      counting = await countingListener(port)
      for (const path of paths)
        for (const s of SCENARIOS) assert.deepEqual(await runOn(path, 'replay', s, port), live.get(`${path}-${s}`), `${path} ${s} replayed as it went live`)
      assert.equal(counting.connections, 0)
    } finally {
      await server?.close()
      await counting?.close()
    }
  })
})
