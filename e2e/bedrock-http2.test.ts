/**
 * Bedrock's default transport is HTTP/2: `@aws-sdk/client-bedrock-runtime` sends through its
 * NodeHttp2Handler unless told otherwise. ConverseStream with that default handler, unchanged, against a
 * local HTTP/2 server speaking the AWS event stream (one frame per DATA frame, 15 ms apart): recorded, then
 * strictly replayed with the server stopped, in-process (install()) and through the proxy (the SDK ignores
 * HTTPS_PROXY, so it is pointed at the proxy as its endpoint: reverse mode with --h2c). The app reads the
 * same deltas, stop reason and usage; the trace reads as a Bedrock model turn.
 */
import assert from 'node:assert/strict'
import { once } from 'node:events'
import http2, { type ServerHttp2Stream } from 'node:http2'
import type { AddressInfo, Socket } from 'node:net'
import { test } from 'node:test'
import { BedrockRuntimeClient, ConverseStreamCommand } from '@aws-sdk/client-bedrock-runtime'
import { install } from 'tool-replay/interceptor'
import { createMemoryStore, type TraceStore } from 'tool-replay/store'
import { openSession } from '../engine/index.ts'
import { loadCertificateAuthority, parseReverse, startProxy } from '../proxy/index.ts'
import { encodeEventStreamFrame, encodeEventStreamHeaders, turnOf } from '../trace/index.ts'
import { tempDir } from './support/proxy-harness.ts'

const EVENTS: Array<[string, unknown]> = [
  ['messageStart', { role: 'assistant' }],
  ['contentBlockDelta', { contentBlockIndex: 0, delta: { text: 'Replayed ' } }],
  ['contentBlockDelta', { contentBlockIndex: 0, delta: { text: 'over HTTP/2.' } }],
  ['contentBlockStop', { contentBlockIndex: 0 }],
  ['messageStop', { stopReason: 'end_turn' }],
  ['metadata', { usage: { inputTokens: 12, outputTokens: 5, totalTokens: 17 }, metrics: { latencyMs: 42 } }],
]

function frame(type: string, payload: unknown): Uint8Array {
  const headers = encodeEventStreamHeaders([
    [':event-type', type],
    [':content-type', 'application/json'],
    [':message-type', 'event'],
  ])
  return encodeEventStreamFrame(headers, Buffer.from(JSON.stringify(payload)))
}

/** A cleartext HTTP/2 Bedrock Runtime: ConverseStream answers EVENTS, one DATA frame each. */
async function startBedrockH2() {
  const server = http2.createServer()
  let connections = 0
  const sockets = new Set<Socket>()
  server.on('connection', (s: Socket) => {
    connections++
    sockets.add(s)
    s.on('close', () => sockets.delete(s))
  })
  server.on('stream', (stream: ServerHttp2Stream, headers) => {
    stream.on('error', () => {})
    stream.resume()
    stream.on('end', async () => {
      if (!/^\/model\/[^/]+\/converse-stream$/.test(String(headers[':path']))) {
        stream.respond({ ':status': 404 })
        stream.end()
        return
      }
      stream.respond({ ':status': 200, 'content-type': 'application/vnd.amazon.eventstream', 'x-amzn-requestid': 'req-1' })
      for (const [type, payload] of EVENTS) {
        await new Promise<void>((resolve) => stream.write(frame(type, payload), () => resolve()))
        await new Promise((r) => setTimeout(r, 15))
      }
      stream.end()
    })
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  return {
    port: (server.address() as AddressInfo).port,
    get connections() {
      return connections
    },
    close: async () => {
      for (const s of sockets) s.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

/** One ConverseStream call with the SDK's default (HTTP/2) handler; what the app read. */
async function converse(endpoint: string) {
  const client = new BedrockRuntimeClient({
    region: 'us-east-1',
    endpoint,
    credentials: { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY' },
    maxAttempts: 1,
  })
  try {
    const out = await client.send(
      new ConverseStreamCommand({ modelId: 'anthropic.claude-3-haiku', messages: [{ role: 'user', content: [{ text: 'Say hello over HTTP/2' }] }] }),
    )
    const read: { deltas: string[]; stopReason?: string; usage?: unknown; events: string[] } = { deltas: [], events: [] }
    for await (const event of out.stream ?? []) {
      read.events.push(Object.keys(event)[0] as string)
      if (event.contentBlockDelta?.delta?.text) read.deltas.push(event.contentBlockDelta.delta.text)
      if (event.messageStop) read.stopReason = event.messageStop.stopReason
      if (event.metadata) read.usage = event.metadata.usage
    }
    return read
  } finally {
    client.destroy()
  }
}

const EXPECTED = {
  deltas: ['Replayed ', 'over HTTP/2.'],
  stopReason: 'end_turn',
  usage: { inputTokens: 12, outputTokens: 5, totalTokens: 17 },
  events: ['messageStart', 'contentBlockDelta', 'contentBlockDelta', 'contentBlockStop', 'messageStop', 'metadata'],
}

async function assertBedrockTrace(store: TraceStore, trace: string) {
  const t = await store.readTrace(trace)
  assert.equal(t.exchanges.length, 1)
  const x = t.exchanges[0]
  assert.ok(x && x.outcome.kind === 'response')
  if (x?.outcome.kind !== 'response') return
  assert.equal(x.outcome.response.body.chunks.length, EVENTS.length, 'each event frame recorded as its own chunk')
  const turn = turnOf(t, x)
  assert.equal(turn.llm?.api, 'aws.bedrock.converse', 'read as a Bedrock model turn')
  assert.equal(turn.llm?.stream, true)
  assert.equal(turn.llm?.outputText, 'Replayed over HTTP/2.')
}

test('Bedrock ConverseStream with the default HTTP/2 handler, in-process: recorded, then replayed with the server stopped', async () => {
  const server = await startBedrockH2()
  const endpoint = `http://127.0.0.1:${server.port}`
  const store = createMemoryStore()
  const rec = await install({ mode: 'record', trace: 'bedrock-h2', store })
  const live = await converse(endpoint).finally(() => rec.close())
  assert.deepEqual(live, EXPECTED)
  await assertBedrockTrace(store, 'bedrock-h2')
  const seen = server.connections
  await server.close()

  const rep = await install({ mode: 'replay', trace: 'bedrock-h2', store })
  const replayed = await converse(endpoint).finally(() => rep.close())
  assert.deepEqual(replayed, live)
  assert.equal(rep.summary().ok, true, JSON.stringify(rep.summary().misses))
  assert.equal(server.connections, seen, 'nothing reached the stopped server')
})

test('Bedrock ConverseStream with the default HTTP/2 handler, through the proxy (reverse mode, --h2c): recorded, then replayed with the server stopped', async () => {
  const server = await startBedrockH2()
  const port = server.port
  const store = createMemoryStore()
  const ca = await loadCertificateAuthority(tempDir('tr-bedrock-h2-'))
  const proxyFor = async (mode: 'record' | 'replay') =>
    startProxy({
      session: await openSession({ mode, trace: 'bedrock-h2-proxy', store, labels: { recordedWith: 'proxy' } }),
      ca,
      reverse: parseReverse([`http://127.0.0.1:${port}`]),
      h2c: true,
    })
  const rec = await proxyFor('record')
  const live = await converse(rec.url).finally(() => rec.close())
  assert.deepEqual(live, EXPECTED)
  await assertBedrockTrace(store, 'bedrock-h2-proxy')
  const seen = server.connections
  await server.close()

  const rep = await proxyFor('replay')
  const replayed = await converse(rep.url)
  const summary = await rep.close()
  assert.deepEqual(replayed, live)
  assert.equal(summary.ok, true, JSON.stringify(summary.misses))
  assert.equal(rep.stats.forwarded, 0)
  assert.equal(server.connections, seen, 'nothing reached the stopped server')
})
