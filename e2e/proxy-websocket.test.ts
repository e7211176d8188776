/**
 * WebSocket sessions through the proxy with the real `ws` client and server: recorded while relayed (CONNECT +
 * TLS and reverse mode; plain forward proxying goes through the same upgrade handler, see proxy-strict.test.ts), then replayed strictly with the server STOPPED and a counting listener
 * on its port seeing 0 connections. Text conversations answer by content (volatile `event_id` ignored), binary
 * and fragmented messages are byte-exact, the server's close code and reason replay, and a client message the
 * recording cannot answer closes the session with 1008 naming TR_REPLAY_MISS and fails the run's ledger.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { once } from 'node:events'
import { createServer as createHttpServer, type Server } from 'node:http'
import { createServer as createHttpsServer } from 'node:https'
import { connect, type Socket } from 'node:net'
import { before, describe, test } from 'node:test'
import { connect as tlsConnect } from 'node:tls'
import { WebSocket, WebSocketServer } from 'ws'
import type { ProxyServer } from '../proxy/index.ts'
import { createMemoryStore, type TraceStore } from '../store/index.ts'
import { startTestProxy, tempDir } from './support/proxy-harness.ts'
import { createTestPki } from './support/proxy-upstream.ts'
import { countingListener } from './support/sealed-harness.ts'
import { type CountingWebSocketServer, listenCounting } from './support/websocket-server.ts'

const storeDir = tempDir('tr-proxy-ws-')
let pki: Awaited<ReturnType<typeof createTestPki>>

before(async () => {
  pki = await createTestPki(['api.test'])
})

/** The bytes the server sends in two frames for any binary message: every byte value, so nothing is text-safe. */
const BINARY = Buffer.from(Array.from({ length: 256 }, (_, i) => i))

/**
 * A Realtime-shaped server: an unprompted hello, two answers per `ask` (by its n), a binary echo sent as two
 * fragments, and a close with 4000 "done" on `bye`.
 */
async function startWsServer(tls: boolean): Promise<CountingWebSocketServer> {
  const cert = pki.certs['api.test'] as { cert: string; key: string }
  const server: Server = tls ? createHttpsServer(cert) : createHttpServer()
  const wss = new WebSocketServer({ server })
  wss.on('connection', (socket) => {
    socket.send(JSON.stringify({ type: 'hello', event_id: randomUUID() }))
    socket.on('message', (data, isBinary) => {
      if (isBinary) {
        socket.send(BINARY.subarray(0, 100), { binary: true, fin: false })
        socket.send(Buffer.concat([BINARY.subarray(100), data as Buffer]), { binary: true, fin: true })
        return
      }
      const text = String(data)
      if (text === 'bye') return socket.close(4000, 'done')
      const m = JSON.parse(text) as { n: number }
      socket.send(JSON.stringify({ type: 'answer.delta', n: m.n, event_id: randomUUID() }))
      socket.send(JSON.stringify({ type: 'answer.done', n: m.n * 2, event_id: randomUUID() }))
    })
  })
  return listenCounting(server, wss)
}

/** A CONNECT tunnel through the proxy to host:port. */
async function tunnel(proxy: ProxyServer, authority: string): Promise<Socket> {
  const s = connect(proxy.port, '127.0.0.1')
  await once(s, 'connect')
  s.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`)
  const [answer] = (await once(s, 'data')) as [Buffer]
  assert.match(answer.toString('latin1'), /^HTTP\/1\.1 200 /)
  return s
}

type How = { kind: 'connect' | 'reverse'; proxy: ProxyServer }

/** Opens a `ws` client the way `how` says, through the proxy. */
async function open(how: How, path: string): Promise<WebSocket> {
  if (how.kind === 'connect') {
    const raw = await tunnel(how.proxy, 'api.test:443')
    const ca = how.proxy.ca.certPem
    return new WebSocket(`wss://api.test${path}`, {
      createConnection: () => tlsConnect({ socket: raw, servername: 'api.test', ca, ALPNProtocols: ['http/1.1'] }),
    })
  }
  return new WebSocket(`ws://127.0.0.1:${how.proxy.port}${path}`)
}

/** One conversation: ask, a fragmented binary message, bye; everything received, in order, and the close. */
async function converse(how: How, asks: number[] = [1, 2]): Promise<string[]> {
  const ws = await open(how, '/realtime?model=m')
  const got: string[] = []
  ws.on('message', (data, isBinary) => {
    if (isBinary) got.push(`binary ${(data as Buffer).toString('hex')}`)
    else {
      const m = JSON.parse(String(data)) as { type: string; n?: number }
      got.push(`text ${m.type} ${m.n ?? ''}`)
    }
  })
  const closed = new Promise<void>((resolve) =>
    ws.on('close', (code, reason) => {
      got.push(`close ${code} ${String(reason)}`)
      resolve()
    }),
  )
  ws.on('error', (err) => got.push(`error ${err.message}`))
  await once(ws, 'open')
  // Each step waits for its answer, so the recorded order is the conversation's (and replay's) order.
  await waitFor(() => got.length >= 1)
  for (const n of asks) {
    const before = got.length
    ws.send(JSON.stringify({ type: 'ask', n, event_id: randomUUID() }))
    await waitFor(() => got.length >= before + 2 || got.some((g) => g.startsWith('close')))
  }
  ws.send(Buffer.from([0xff, 0x00]), { binary: true, fin: false })
  ws.send(Buffer.from([0x80]), { binary: true, fin: true })
  await waitFor(() => got.some((g) => g.startsWith('binary')) || got.some((g) => g.startsWith('close')))
  ws.send('bye')
  await Promise.race([closed, new Promise((r) => setTimeout(r, 5000))])
  return got
}

async function waitFor(done: () => boolean, ms = 5000): Promise<void> {
  const until = Date.now() + ms
  while (!done() && Date.now() < until) await new Promise((r) => setTimeout(r, 10))
}

const EXPECTED = [
  'text hello ',
  'text answer.delta 1',
  'text answer.done 2',
  'text answer.delta 2',
  'text answer.done 4',
  `binary ${Buffer.concat([BINARY, Buffer.from([0xff, 0x00, 0x80])]).toString('hex')}`,
  'close 4000 done',
]

function proxyOptions(store: TraceStore, trace: string, port: number, how: How['kind']) {
  return {
    store,
    storeDir,
    trace,
    upstreamCaPem: pki.caPem,
    resolve: { 'api.test': { host: '127.0.0.1', port } },
    ...(how === 'reverse' ? { reverse: [{ name: undefined, origin: `http://api.test:${port}`, basePath: '' }] } : {}),
  }
}

describe('WebSocket through the proxy: recorded, then replayed strictly with the server stopped', { timeout: 120_000 }, () => {
  for (const kind of ['connect', 'reverse'] as const) {
    test(`${kind}: the same conversation replays byte for byte; 0 connections reach the stopped server`, async () => {
      const server = await startWsServer(kind === 'connect')
      const store = createMemoryStore()
      const rec = await startTestProxy({ ...proxyOptions(store, `ws-${kind}`, server.port, kind), mode: 'record' })
      const live = await converse({ kind, proxy: rec })
      const recorded = await rec.close()
      assert.deepEqual(live, EXPECTED)
      assert.equal(recorded.recorded, 1)
      const trace = await store.readTrace(`ws-${kind}`)
      const x = trace.exchanges[0]
      assert.equal(trace.exchanges.length, 1)
      assert.equal(x?.outcome.kind === 'response' && x.outcome.response.status, 101)
      const messages = x?.websocket?.messages ?? []
      assert.deepEqual(
        messages.map((m) => `${m.from} ${m.opcode}`),
        [
          'server text',
          'client text',
          'server text',
          'server text',
          'client text',
          'server text',
          'server text',
          'client binary',
          'server binary',
          'client text',
          'server close',
          'client close',
        ],
      )
      // Fragmentation kept: the client's binary message and the server's each arrived as two frames.
      assert.deepEqual(
        messages.filter((m) => m.opcode === 'binary').map((m) => m.body.chunks.map((c) => c.size)),
        [
          [2, 1],
          [100, 159],
        ],
      )
      await server.close()
      const counting = await countingListener(server.port)
      try {
        const rep = await startTestProxy({ ...proxyOptions(store, `ws-${kind}`, server.port, kind), mode: 'replay' })
        const replayed = await converse({ kind, proxy: rep })
        const summary = await rep.close()
        assert.deepEqual(replayed, EXPECTED)
        assert.equal(summary.ok, true, JSON.stringify(summary))
        assert.equal(summary.replayed, 1)
        assert.equal(counting.connections, 0)
      } finally {
        await counting.close()
      }
    })
  }

  test('a client message nothing recorded answers closes the session with 1008 naming TR_REPLAY_MISS, in the ledger', async () => {
    const server = await startWsServer(true)
    const store = createMemoryStore()
    const rec = await startTestProxy({ ...proxyOptions(store, 'ws-miss', server.port, 'connect'), mode: 'record' })
    await converse({ kind: 'connect', proxy: rec })
    await rec.close()
    await server.close()
    const counting = await countingListener(server.port)
    try {
      const rep = await startTestProxy({ ...proxyOptions(store, 'ws-miss', server.port, 'connect'), mode: 'replay' })
      const got = await converse({ kind: 'connect', proxy: rep }, [1, 99])
      const summary = await rep.close()
      assert.deepEqual(got.slice(0, 3), ['text hello ', 'text answer.delta 1', 'text answer.done 2'])
      assert.match(got.at(-1) ?? '', /^close 1008 TR_REPLAY_MISS: message #2 matches nothing recorded$/)
      assert.equal(summary.ok, false)
      assert.equal(summary.misses.length, 1)
      assert.match(
        summary.misses[0]?.message ?? '',
        /Failed to replay WebSocket message #2 from the client on "GET https:\/\/api\.test\/realtime\?model=m": no recorded client message of trace "ws-miss" matches a text message of type "ask"/,
      )
      assert.equal(counting.connections, 0)
    } finally {
      await counting.close()
    }
  })
})
