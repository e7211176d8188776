/**
 * Seeded faults from a faults file on live WebSocket sessions (issue 30), with the real `ws` client and server:
 * through the proxy (reverse mode) and in process (install()), a rule of kind ws_close, ws_drop or ws_delay acts on
 * the session as it is relayed. The app gets the close with its code, the missing message, the late one; the trace
 * keeps what the app got and, in its fault record, the session as the upstream had it; and the faulted trace replays
 * strictly to the same app-visible result with the server STOPPED and a counting listener on its port seeing 0
 * connections.
 */
import assert from 'node:assert/strict'
import { createServer, get as httpGet } from 'node:http'
import { describe, test } from 'node:test'
import { WebSocket, WebSocketServer } from 'ws'
import { loadSessionFaults, openSession, type Session } from '../engine/index.ts'
import { install } from '../interceptor/index.ts'
import { loadCertificateAuthority, type ProxyServer, startProxy } from '../proxy/index.ts'
import { createMemoryStore, type TraceStore } from '../store/index.ts'
import type { Exchange } from '../trace/index.ts'
import { tempDir } from './support/proxy-harness.ts'
import { countingListener } from './support/sealed-harness.ts'
import { type CountingWebSocketServer, listenCounting } from './support/websocket-server.ts'

const storeDir = tempDir('tr-ws-faults-')

/**
 * A hello on connection (server message 1), then on `go` four more (ev 1..4: server messages 2 to 5); on `bye`, a
 * close with 4000 "done". The app speaks after the hello (a client that speaks first on `open` is covered by
 * e2e/interceptor-ws.test.ts).
 */
async function startServer(): Promise<CountingWebSocketServer> {
  const server = createServer((_req, res) => res.end('ok'))
  const wss = new WebSocketServer({ server })
  wss.on('connection', (s) => {
    s.send(JSON.stringify({ type: 'hello', n: 0 }))
    s.on('message', (data) => {
      const text = String(data)
      if (text === 'bye') return s.close(4000, 'done')
      for (let n = 1; n <= 4; n++) s.send(JSON.stringify({ type: 'ev', n }))
    })
  })
  return listenCounting(server, wss)
}

/**
 * The app: `go`, then `bye` once ev 4 came (or 1.5 s after the last message); what it got in order, and when.
 * `token`: in process, a plain GET first and the session opened from its response's callback (msw credits an
 * upgrade to the request before it, as in e2e/interceptor-ws.test.ts).
 */
async function converse(url: string, token = false): Promise<{ got: string[]; at: number[] }> {
  const ws = token
    ? await new Promise<WebSocket>((resolve, reject) => {
        httpGet(url.replace(/^ws:/, 'http:').replace('/live', '/token'), (res) => {
          res.resume()
          res.on('end', () => resolve(new WebSocket(url)))
        }).on('error', reject)
      })
    : new WebSocket(url)
  const got: string[] = []
  const at: number[] = []
  const t0 = performance.now()
  let idle: NodeJS.Timeout | undefined
  const bye = () => ws.readyState === WebSocket.OPEN && ws.send('bye')
  ws.on('message', (data) => {
    const m = JSON.parse(String(data)) as { n: number }
    if (m.n === 0) return void ws.send('go')
    got.push(`ev ${m.n}`)
    at.push(performance.now() - t0)
    clearTimeout(idle)
    if (m.n === 4) bye()
    else idle = setTimeout(bye, 1500)
  })
  ws.on('error', (err) => got.push(`error ${err.message}`))
  await Promise.race([
    new Promise<void>((resolve) => ws.on('close', (code, reason) => resolve(void got.push(`close ${code} ${String(reason)}`)))),
    new Promise((r) => setTimeout(r, 8000)),
  ])
  clearTimeout(idle)
  ws.terminate()
  return { got, at }
}

const CASES = [
  {
    fault: 'ws_close',
    options: { afterMessages: 3, code: 1012 },
    expected: ['ev 1', 'ev 2', 'close 1012 Tool Replay fault ws_close (rule "ws")'],
  },
  { fault: 'ws_drop', options: { messages: [3, 4] }, expected: ['ev 1', 'ev 4', 'close 4000 done'] },
  { fault: 'ws_delay', options: { fromMessage: 4, ms: 400 }, expected: ['ev 1', 'ev 2', 'ev 3', 'ev 4', 'close 4000 done'] },
] as const

const rules = (c: (typeof CASES)[number]) => [{ id: 'ws', target: { url: '/live' }, fault: c.fault, options: c.options }]

/** A proxy (reverse mode onto the server) around a session with these faults (strict replay injects none: it counts them). */
async function proxyFor(
  store: TraceStore,
  trace: string,
  port: number,
  mode: 'record' | 'replay',
  faults: unknown[],
): Promise<ProxyServer & { session: Session }> {
  const session = await openSession({ mode, trace, store, faults: await loadSessionFaults({ seed: mode === 'record' ? 30 : 99, rules: faults }) })
  const proxy = await startProxy({
    session,
    ca: await loadCertificateAuthority(storeDir),
    upstream: { resolve: { 'api.test': { host: '127.0.0.1', port } } },
    reverse: [{ name: undefined, origin: `http://api.test:${port}`, basePath: '' }],
  })
  return Object.assign(proxy, { session })
}

/** The trace's session: the fault record, and what the app got next to what the upstream sent. */
function checkRecorded(exchanges: Exchange[], fault: string): void {
  const x = exchanges.find((e) => e.websocket)
  assert.equal(x?.fault?.kind, fault)
  assert.equal(x?.fault?.rule, 'ws')
  assert.equal(x?.fault?.seed, '30')
  assert.equal(x?.fault?.phase, 'mid-body')
  assert.equal(x?.fault?.upstream?.kind === 'response' && x.fault.upstream.response.status, 101)
  const server = (m: { from: string; opcode: string }) => m.from === 'server' && m.opcode === 'text'
  // The upstream really sent the hello and all four; the app's session has what it got.
  assert.equal(x?.fault?.websocket?.messages.filter(server).length, 5)
  assert.ok(x?.fault?.websocket?.messages.every((m) => /^[0-9a-f]{64}$/.test(m.digest)))
  const app = x?.websocket?.messages.filter(server).length
  assert.equal(app, fault === 'ws_delay' ? 5 : 3)
  if (fault === 'ws_close') {
    // The app's answer to the close is kept as it sent it (the upstream got the same bytes).
    const answer = x?.websocket?.messages.at(-1)
    assert.equal(answer?.from === 'client' && answer.opcode, 'close')
    assert.equal(answer?.body.digest, x?.fault?.websocket?.messages.find((m) => m.from === 'client' && m.opcode === 'close')?.digest)
  }
}

describe('faults-file WebSocket faults through the proxy: live, recorded with their fault record, replayed strictly', { timeout: 120_000 }, () => {
  for (const c of CASES) {
    test(`${c.fault}: the app gets the fault live and again in strict replay; 0 connections on replay`, async (t) => {
      const server = await startServer()
      // A failed assertion must not leave the server holding the file open (close runs twice on success: harmless).
      t.after(() => server.close())
      const store = createMemoryStore()
      const trace = `ws-${c.fault}`
      const rec = await proxyFor(store, trace, server.port, 'record', rules(c))
      const live = await converse(`ws://127.0.0.1:${rec.port}/live`)
      const recorded = await rec.close()
      assert.deepEqual(live.got, c.expected)
      assert.deepEqual(
        rec.session.faults?.coverage().map((r) => [r.rule, r.eligible, r.triggered]),
        [['ws', 1, 1]],
      )
      assert.equal(recorded.recorded, 1, JSON.stringify(recorded))
      if (c.fault === 'ws_delay') assert.ok((live.at[2] ?? 0) - (live.at[1] ?? 0) >= 350, `ev 3 came ${(live.at[2] ?? 0) - (live.at[1] ?? 0)} ms after ev 2`)
      checkRecorded((await store.readTrace(trace)).exchanges, c.fault)
      await server.close()
      const counting = await countingListener(server.port)
      try {
        const rep = await proxyFor(store, trace, server.port, 'replay', rules(c))
        const replayed = await converse(`ws://127.0.0.1:${rep.port}/live`)
        const summary = await rep.close()
        assert.deepEqual(replayed.got, c.expected)
        assert.equal(summary.ok, true, JSON.stringify(summary))
        assert.equal(summary.replayed, 1)
        // Strict replay injects nothing new: the rule counts the fault the trace holds, with its recorded seed.
        assert.deepEqual(
          rep.session.faults?.coverage().map((r) => [r.rule, r.eligible, r.triggered]),
          [['ws', 1, 1]],
        )
        assert.equal(rep.session.faults?.seed, '30')
        assert.equal(counting.connections, 0)
      } finally {
        await counting.close()
      }
    })
  }
})

describe('faults-file WebSocket faults in process (install() with `ws`): the same faults, the same replay', { timeout: 120_000 }, () => {
  for (const c of CASES) {
    test(`${c.fault}: live under install({ faults }), then strict replay with the server stopped`, async (t) => {
      const server = await startServer()
      t.after(() => server.close())
      const store = createMemoryStore()
      const trace = `ws-ip-${c.fault}`
      const url = `ws://127.0.0.1:${server.port}/live`
      const tr = await install({ mode: 'record', trace, store, faults: { rules: rules(c) }, faultsSeed: 30 })
      let live: Awaited<ReturnType<typeof converse>>
      try {
        live = await converse(url, true)
      } finally {
        await tr.close()
      }
      assert.deepEqual(live.got, c.expected)
      checkRecorded((await store.readTrace(trace)).exchanges, c.fault)
      await server.close()
      const counting = await countingListener(server.port)
      try {
        const rep = await install({ mode: 'replay', trace, store })
        let replayed: Awaited<ReturnType<typeof converse>>
        try {
          replayed = await converse(url, true)
        } finally {
          await rep.close()
        }
        assert.deepEqual(replayed.got, c.expected)
        assert.equal(rep.summary().ok, true, JSON.stringify(rep.summary()))
        assert.equal(counting.connections, 0)
      } finally {
        await counting.close()
      }
    })
  }
})

test('a ws_* rule on an upgrade the upstream refuses (401): the refusal is recorded as the app got it, and coverage says the fault had no session to act on', async (t) => {
  let upgrades = 0
  const server = createServer((_req, res) => res.end('ok'))
  server.on('upgrade', (_req, socket) => {
    upgrades++
    socket.end('HTTP/1.1 401 Unauthorized\r\ncontent-length: 6\r\nconnection: close\r\n\r\nno key')
  })
  const upstream = await listenCounting(server, new WebSocketServer({ noServer: true }))
  t.after(() => upstream.close())
  const store = createMemoryStore()
  const rec = await proxyFor(store, 'ws-refused', upstream.port, 'record', rules(CASES[0]))
  const status = await new Promise<number>((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${rec.port}/live`)
    ws.on('unexpected-response', (_req, res) => {
      res.resume()
      resolve(res.statusCode ?? 0)
    })
    ws.on('open', () => reject(new Error('the upgrade was refused upstream; the client must not open')))
    ws.on('error', reject)
  })
  await rec.close()
  assert.equal(status, 401)
  assert.equal(upgrades, 1)
  const [rule] = rec.session.faults?.coverage() ?? []
  assert.deepEqual([rule?.eligible, rule?.triggered, rule?.missed['not-applicable']], [1, 0, 1], JSON.stringify(rule))
  assert.match(rule?.notes.join(' ') ?? '', /did not switch protocols/)
  const [x] = (await store.readTrace('ws-refused')).exchanges
  assert.equal(x?.outcome.kind === 'response' && x.outcome.response.status, 401)
  assert.equal(x?.fault, undefined, 'no fault record: nothing was faulted')
})
