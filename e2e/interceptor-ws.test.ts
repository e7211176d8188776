/**
 * The `ws` package (a node:http upgrade) in a process that called install(): its session is recorded in record
 * mode, passes through in passthrough, and replays strictly with the server STOPPED and a counting listener on
 * its port seeing 0 connections — text, binary, a fragmented message, ping/pong and the server's close code and
 * reason, byte for byte. A client message nothing recorded answers closes the session with 1008 naming
 * TR_REPLAY_MISS and fails the run's ledger; a trace without the session refuses the upgrade.
 * (Before, `ws` passed through unrecorded while recording and was refused in strict replay.)
 */
import assert from 'node:assert/strict'
import { createServer, get as httpGet } from 'node:http'
import { test } from 'node:test'
import { WebSocket, WebSocketServer } from 'ws'
import { install } from '../interceptor/index.ts'
import { createMemoryStore, type TraceStore } from '../store/index.ts'
import { countingListener } from './support/sealed-harness.ts'
import { type CountingWebSocketServer, listenCounting } from './support/websocket-server.ts'

const BINARY = Buffer.from(Array.from({ length: 256 }, (_, i) => i))

/**
 * Greets at once (so the greeting may share a read with the 101), answers a ping with its own pong, echoes text,
 * answers binary with two fragments, and closes with 4001 "done" on `bye`. It offers permessage-deflate: the
 * recording must stay plain. Plain HTTP GETs are answered too (the app fetches a token first).
 */
async function startServer(): Promise<CountingWebSocketServer> {
  const server = createServer((_req, res) => res.end('room-1'))
  const wss = new WebSocketServer({ server, perMessageDeflate: true })
  wss.on('connection', (s) => {
    s.send(JSON.stringify({ type: 'hello' }))
    s.on('message', (data, isBinary) => {
      if (isBinary) {
        s.send(BINARY.subarray(0, 100), { binary: true, fin: false })
        s.send(Buffer.concat([BINARY.subarray(100), data as Buffer]), { binary: true, fin: true })
        return
      }
      const text = String(data)
      if (text === 'bye') s.close(4001, 'done')
      else s.send(`echo ${text}`)
    })
  })
  return listenCounting(server, wss)
}

/** The app: a token over http.get, then (from that response's callback) the session. Everything it saw, in order. */
async function converse(port: number, text = 'hi'): Promise<string[]> {
  // Made inside the token response's callback: msw credits the upgrade to that earlier request.
  const ws = await new Promise<WebSocket>((resolve, reject) => {
    httpGet(`http://127.0.0.1:${port}/token`, (res) => {
      let body = ''
      res.on('data', (c: Buffer) => (body += c))
      res.on('end', () => resolve(new WebSocket(`ws://127.0.0.1:${port}/live?room=${body}`)))
    }).on('error', reject)
  })
  const got: string[] = []
  const step = (line: string) => {
    got.push(line)
    if (line.startsWith('text {')) ws.ping(Buffer.from('p1'))
    else if (line === 'pong p1') ws.send(text)
    else if (line.startsWith('text echo')) {
      ws.send(Buffer.from([0xff, 0x00]), { binary: true, fin: false })
      ws.send(Buffer.from([0x80]), { binary: true, fin: true })
    } else if (line.startsWith('binary')) ws.send('bye')
  }
  ws.on('message', (data, isBinary) => step(isBinary ? `binary ${(data as Buffer).toString('hex')}` : `text ${String(data)}`))
  ws.on('pong', (data) => step(`pong ${String(data)}`))
  ws.on('error', (err) => got.push(`error ${err.message}`))
  await Promise.race([
    new Promise<void>((resolve) => ws.on('close', (code, reason) => resolve(void got.push(`close ${code} ${String(reason)}`)))),
    new Promise((r) => setTimeout(r, 5000)),
  ])
  return got
}

const EXPECTED = [
  'text {"type":"hello"}',
  'pong p1',
  'text echo hi',
  `binary ${Buffer.concat([BINARY, Buffer.from([0xff, 0x00, 0x80])]).toString('hex')}`,
  'close 4001 done',
]

async function run(store: TraceStore, mode: 'record' | 'replay' | 'passthrough', trace: string, port: number, text?: string) {
  const tr = await install({ mode, trace, store })
  let got: string[]
  try {
    got = await converse(port, text)
  } finally {
    await tr.close()
  }
  return { got, summary: tr.summary() }
}

test('`ws` under install(): recorded, passed through, then replayed strictly with the server stopped', { timeout: 60_000 }, async () => {
  const server = await startServer()
  const store = createMemoryStore()
  let counting: Awaited<ReturnType<typeof countingListener>> | undefined
  try {
    const rec = await run(store, 'record', 'ws-node-http', server.port)
    assert.deepEqual(rec.got, EXPECTED)
    const trace = await store.readTrace('ws-node-http')
    assert.deepEqual(
      trace.exchanges.map((x) => `${x.request.method} ${x.request.url.replace(/:\d+/, ':PORT')} ${x.outcome.kind === 'response' && x.outcome.response.status}`),
      ['GET http://127.0.0.1:PORT/token 200', 'GET http://127.0.0.1:PORT/live?room=room-1 101'],
    )
    const messages = trace.exchanges[1]?.websocket?.messages ?? []
    assert.deepEqual(
      messages.map((m) => `${m.from} ${m.opcode}`),
      [
        'server text',
        'client ping',
        'server pong',
        'client text',
        'server text',
        'client binary',
        'server binary',
        'client text',
        'server close',
        'client close',
      ],
    )
    // Fragmentation kept both ways; the close's code and reason read; no extension negotiated (plain payloads).
    assert.deepEqual(
      messages.filter((m) => m.opcode === 'binary').map((m) => m.body.chunks.map((c) => c.size)),
      [
        [2, 1],
        [100, 159],
      ],
    )
    assert.deepEqual(messages.find((m) => m.from === 'server' && m.opcode === 'close')?.close, { code: 4001, reason: 'done' })
    const head = trace.exchanges[1]?.outcome.kind === 'response' ? trace.exchanges[1].outcome.response.headers : []
    assert.equal(
      head.find(([k]) => /^sec-websocket-extensions$/i.test(k)),
      undefined,
    )

    const pass = await run(store, 'passthrough', 'unused', server.port)
    assert.deepEqual(pass.got, EXPECTED)
    assert.equal(server.connections, 4, 'record and passthrough each reached the server twice (the token, the session)')
    await server.close()
    counting = await countingListener(server.port)

    const rep = await run(store, 'replay', 'ws-node-http', server.port)
    assert.deepEqual(rep.got, EXPECTED)
    assert.equal(rep.summary.ok, true, JSON.stringify(rep.summary.misses))
    assert.equal(rep.summary.replayed, 2)

    const miss = await run(store, 'replay', 'ws-node-http', server.port, 'something else')
    assert.deepEqual(miss.got, ['text {"type":"hello"}', 'pong p1', 'close 1008 TR_REPLAY_MISS: message #1 matches nothing recorded'])
    assert.equal(miss.summary.ok, false)
    assert.match(
      miss.summary.misses[0]?.message ?? '',
      /Failed to replay WebSocket message #1 from the client on "GET http:\/\/127\.0\.0\.1:\d+\/live\?room=room-1"/,
    )
    assert.equal(counting.connections, 0)
  } finally {
    await server.close().catch(() => {})
    await counting?.close()
  }
})

test('`ws` under install(): an upgrade the trace lacks is refused in strict replay and fails the ledger', { timeout: 30_000 }, async () => {
  const store = createMemoryStore()
  const empty = await install({ mode: 'record', trace: 'no-ws', store })
  await empty.close()
  const tr = await install({ mode: 'replay', trace: 'no-ws', store })
  const got: string[] = []
  try {
    const ws = new WebSocket('ws://127.0.0.1:9/nothing')
    await new Promise<void>((resolve) => ws.on('error', (err) => resolve(void got.push(`error ${err.message}`))))
  } finally {
    await tr.close()
  }
  assert.deepEqual(got, ['error Unexpected server response: 403'])
  assert.equal(tr.summary().ok, false)
  assert.equal(tr.summary().misses[0]?.code, 'TR_REPLAY_MISS')
  assert.match(tr.summary().misses[0]?.message ?? '', /GET http:\/\/127\.0\.0\.1:9\/nothing/)
})

test('`ws` under install(): an upgrade the server refuses (401) is recorded as the answer the app got and replayed as it', { timeout: 30_000 }, async () => {
  const server = createServer()
  const wss = new WebSocketServer({ server, verifyClient: () => false })
  const up = await listenCounting(server, wss)
  const store = createMemoryStore()
  const attempt = async (mode: 'record' | 'replay') => {
    const tr = await install({ mode, trace: 'ws-denied', store })
    const ws = new WebSocket(`ws://127.0.0.1:${up.port}/denied`)
    const got = await new Promise<string>((resolve) => ws.on('error', (err) => resolve(err.message)))
    return { got, summary: await tr.close() }
  }
  let counting: Awaited<ReturnType<typeof countingListener>> | undefined
  try {
    const rec = await attempt('record')
    assert.equal(rec.got, 'Unexpected server response: 401')
    const [x] = (await store.readTrace('ws-denied')).exchanges
    // `ws` gives up at the head, so Node's client never reads the body: the head is kept, the rest as a failure.
    assert.equal(x?.outcome.kind === 'error' && `${x.outcome.error.phase} ${x.outcome.error.partial?.status}`, 'response-body 401')
    assert.equal(x?.websocket, undefined)
    await up.close()
    counting = await countingListener(up.port)
    const rep = await attempt('replay')
    assert.equal(rep.got, 'Unexpected server response: 401')
    assert.equal(rep.summary.ok, true, JSON.stringify(rep.summary.misses))
    assert.equal(counting.connections, 0)
  } finally {
    await up.close().catch(() => {})
    await counting?.close()
  }
})

test('`ws` under install(): a client that speaks first, on open, before any server message, replays strictly', { timeout: 30_000 }, async () => {
  // As the Realtime SDKs do (session.update on open). The server says nothing until asked.
  const server = createServer()
  const wss = new WebSocketServer({ server })
  wss.on('connection', (s) => s.on('message', (data) => (String(data) === 'bye' ? s.close(4000, 'later') : s.send(`echo ${String(data)}`))))
  const up = await listenCounting(server, wss)
  const store = createMemoryStore()
  const speakFirst = async (mode: 'record' | 'replay') => {
    const tr = await install({ mode, trace: 'ws-first', store })
    const ws = new WebSocket(`ws://127.0.0.1:${up.port}/first`)
    const got: string[] = []
    ws.on('open', () => ws.send('session.update'))
    ws.on('message', (data) => {
      got.push(String(data))
      ws.send('bye')
    })
    await Promise.race([
      new Promise<void>((resolve) => ws.on('close', (code, reason) => resolve(void got.push(`close ${code} ${String(reason)}`)))),
      new Promise((r) => setTimeout(r, 5000)),
    ])
    return { got, summary: await tr.close() }
  }
  let counting: Awaited<ReturnType<typeof countingListener>> | undefined
  try {
    const rec = await speakFirst('record')
    assert.deepEqual(rec.got, ['echo session.update', 'close 4000 later'])
    await up.close()
    counting = await countingListener(up.port)
    const rep = await speakFirst('replay')
    assert.deepEqual(rep.got, rec.got)
    assert.equal(rep.summary.ok, true, JSON.stringify(rep.summary))
    assert.equal(counting.connections, 0)
  } finally {
    await up.close().catch(() => {})
    await counting?.close()
  }
})

test('`ws` under install(): a session open when the run ended replays open until the run ends (no drop the app never saw)', { timeout: 30_000 }, async () => {
  const server = createServer()
  const wss = new WebSocketServer({ server })
  wss.on('connection', (s) => s.on('message', (data) => s.send(`echo ${String(data)}`)))
  const up = await listenCounting(server, wss)
  const store = createMemoryStore()
  const keepOpen = async (mode: 'record' | 'replay') => {
    const tr = await install({ mode, trace: 'ws-open', store })
    const ws = new WebSocket(`ws://127.0.0.1:${up.port}/open`)
    const got: string[] = []
    ws.on('open', () => ws.send('hi'))
    ws.on('message', (data) => got.push(String(data)))
    ws.on('close', (code) => got.push(`close ${code}`))
    // The app holds the session while the run goes on; the run ends before it closes.
    await new Promise((r) => setTimeout(r, 500))
    const before = [...got]
    const summary = await tr.close()
    ws.terminate()
    return { got: before, summary }
  }
  let counting: Awaited<ReturnType<typeof countingListener>> | undefined
  try {
    const rec = await keepOpen('record')
    assert.deepEqual(rec.got, ['echo hi'])
    assert.equal((await store.readTrace('ws-open')).exchanges[0]?.websocket?.end?.code, 'TR_SESSION_CLOSED')
    await up.close()
    counting = await countingListener(up.port)
    const rep = await keepOpen('replay')
    assert.deepEqual(rep.got, ['echo hi'], 'the replayed session stays open as the recorded one did (was: close 1006 at once)')
    assert.equal(rep.summary.ok, true, JSON.stringify(rep.summary))
    assert.equal(counting.connections, 0)
  } finally {
    await up.close().catch(() => {})
    await counting?.close()
  }
})
