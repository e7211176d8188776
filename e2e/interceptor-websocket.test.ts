/**
 * Node's global WebSocket (undici's, bundled with Node) in a process that called install(): it connects and
 * records in record mode, works in passthrough, and replays strictly with the server STOPPED and a counting
 * listener on its port seeing 0 connections; a client message nothing recorded answers closes with 1008 naming
 * TR_REPLAY_MISS and fails the run's ledger. (Before, it could not connect at all under install(): Node's undici
 * hands dispatchers the legacy handler API, which undici 8's Agent refuses.)
 */
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { test } from 'node:test'
import { WebSocketServer } from 'ws'
import { install } from '../interceptor/index.ts'
import { createMemoryStore } from '../store/index.ts'
import { countingListener } from './support/sealed-harness.ts'

/** A server that greets, echoes text, and answers binary with the bytes reversed. */
async function startServer(): Promise<{ port: number; close(): Promise<void> }> {
  const server = createServer()
  const wss = new WebSocketServer({ server })
  wss.on('connection', (s) => {
    s.send(JSON.stringify({ type: 'hello' }))
    s.on('message', (data, isBinary) => s.send(isBinary ? Buffer.from(data as Buffer).reverse() : `echo ${String(data)}`, { binary: isBinary }))
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  return {
    port: (server.address() as AddressInfo).port,
    close: async () => {
      for (const c of wss.clients) c.terminate()
      wss.close()
      server.closeAllConnections()
      await new Promise<void>((r) => server.close(() => r()))
    },
  }
}

/** Greeted, sends `text` and two bytes, then closes: what the app saw, in order. */
async function converse(port: number, text: string): Promise<string[]> {
  const ws = new WebSocket(`ws://127.0.0.1:${port}/live`)
  ws.binaryType = 'arraybuffer'
  const got: string[] = []
  const closed = new Promise<void>((resolve) => {
    ws.onclose = (e) => {
      got.push(`close ${e.code} ${e.reason}`)
      resolve()
    }
  })
  ws.onerror = (e) => got.push(`error ${(e as ErrorEvent).message}`)
  ws.onmessage = (e) => {
    if (typeof e.data === 'string') {
      got.push(`text ${e.data}`)
      if (e.data.startsWith('{')) ws.send(text)
      else ws.send(new Uint8Array([1, 2]))
    } else {
      got.push(`binary ${Buffer.from(e.data as ArrayBuffer).toString('hex')}`)
      ws.close(1000, 'bye')
    }
  }
  await Promise.race([closed, new Promise((r) => setTimeout(r, 5000))])
  return got
}

const EXPECTED = ['text {"type":"hello"}', 'text echo hi', 'binary 0201', 'close 1000 bye']

test("Node's global WebSocket under install(): record, passthrough, then strict replay with the server stopped", { timeout: 60_000 }, async () => {
  const server = await startServer()
  const store = createMemoryStore()
  const rec = await install({ mode: 'record', trace: 'global-ws', store })
  let got: string[]
  try {
    got = await converse(server.port, 'hi')
  } finally {
    await rec.close()
  }
  assert.deepEqual(got, EXPECTED)
  const [x] = (await store.readTrace('global-ws')).exchanges
  assert.deepEqual(
    x?.websocket?.messages.map((m) => `${m.from} ${m.opcode}`),
    ['server text', 'client text', 'server text', 'client binary', 'server binary', 'client close', 'server close'],
  )
  const pass = await install({ mode: 'passthrough', trace: 'unused', store })
  try {
    assert.deepEqual(await converse(server.port, 'hi'), EXPECTED)
  } finally {
    await pass.close()
  }
  await server.close()
  const counting = await countingListener(server.port)
  try {
    const rep = await install({ mode: 'replay', trace: 'global-ws', store })
    got = await converse(server.port, 'hi')
    const summary = await rep.close()
    assert.deepEqual(got, EXPECTED)
    assert.equal(summary.ok, true, JSON.stringify(summary.misses))
    const miss = await install({ mode: 'replay', trace: 'global-ws', store })
    got = await converse(server.port, 'something else')
    const missed = await miss.close()
    assert.deepEqual(got, ['text {"type":"hello"}', 'close 1008 TR_REPLAY_MISS: message #1 matches nothing recorded'])
    assert.equal(missed.ok, false)
    assert.match(missed.misses[0]?.message ?? '', /Failed to replay WebSocket message #1 from the client on "GET http:\/\/127\.0\.0\.1:\d+\/live"/)
    assert.equal(counting.connections, 0)
  } finally {
    await counting.close()
  }
})
