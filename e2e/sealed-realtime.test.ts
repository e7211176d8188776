/**
 * The openai SDK's own Realtime client (`OpenAIRealtimeWS`, on the `ws` package; it ignores HTTPS_PROXY) against a
 * local Realtime-shaped server: session.created/updated, text deltas, a function call, the app's tool result as
 * conversation.item.create, and the final response. Recorded with `tr-proxy record --sealed`, then replayed with
 * `tr-proxy replay --strict --sealed` with the server STOPPED and a counting listener on its port: the app prints
 * the same thing, the run exits 0, and no connection reaches the listener. The API key is stored redacted.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { once } from 'node:events'
import { readFile } from 'node:fs/promises'
import { createServer as createHttpsServer } from 'node:https'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { before, describe, test } from 'node:test'
import { type WebSocket, WebSocketServer } from 'ws'
import { cannotSeal, cli, countingListener, sealedWork } from './support/sealed-harness.ts'

let work: Awaited<ReturnType<typeof sealedWork>>
let skip: string | undefined

before(async () => {
  skip = await cannotSeal()
  work = await sealedWork('tr-sealed-realtime-')
})

const API_KEY = 'sk-proj-realtimeTESTkey0123456789abcdef'

/** Sends a server event with fresh volatile fields (event_id), as the real API does. */
function emit(socket: WebSocket, event: Record<string, unknown>): void {
  socket.send(JSON.stringify({ event_id: `event_${randomUUID()}`, ...event }))
}

/** Streams a response's text as deltas, then response.done. */
function respondWithText(socket: WebSocket, text: string): void {
  const id = `resp_${randomUUID()}`
  emit(socket, { type: 'response.created', response: { id, status: 'in_progress' } })
  for (const part of text.match(/.{1,6}/g) ?? []) emit(socket, { type: 'response.output_text.delta', response_id: id, delta: part })
  emit(socket, { type: 'response.output_text.done', response_id: id, text })
  emit(socket, { type: 'response.done', response: { id, status: 'completed', output: [{ type: 'message', content: [{ type: 'output_text', text }] }] } })
}

/** A Realtime-shaped server on HTTPS for api.test, counting its connections. */
async function startRealtimeServer(): Promise<{ port: number; readonly connections: number; close(): Promise<void> }> {
  const server = createHttpsServer(work.pki.certs['api.test'] as { cert: string; key: string })
  let connections = 0
  server.on('secureConnection', () => connections++)
  const wss = new WebSocketServer({ server })
  wss.on('connection', (socket) => {
    emit(socket, { type: 'session.created', session: { id: `sess_${randomUUID()}`, model: 'gpt-realtime' } })
    let responses = 0
    socket.on('message', (data) => {
      const event = JSON.parse(String(data)) as { type: string; session?: unknown; item?: { type: string; output?: string } }
      if (event.type === 'session.update') emit(socket, { type: 'session.updated', session: event.session })
      else if (event.type === 'conversation.item.create')
        emit(socket, { type: 'conversation.item.created', item: { id: `item_${randomUUID()}`, ...event.item } })
      else if (event.type === 'response.create' && responses++ === 0) {
        const id = `resp_${randomUUID()}`
        emit(socket, { type: 'response.created', response: { id, status: 'in_progress' } })
        emit(socket, { type: 'response.output_text.delta', response_id: id, delta: 'Let me check ' })
        emit(socket, { type: 'response.output_text.delta', response_id: id, delta: 'the weather.' })
        emit(socket, { type: 'response.function_call_arguments.delta', response_id: id, call_id: 'call_weather_1', delta: '{"city":' })
        emit(socket, { type: 'response.function_call_arguments.delta', response_id: id, call_id: 'call_weather_1', delta: '"Paris"}' })
        emit(socket, {
          type: 'response.function_call_arguments.done',
          response_id: id,
          call_id: 'call_weather_1',
          name: 'get_weather',
          arguments: '{"city":"Paris"}',
        })
        emit(socket, {
          type: 'response.done',
          response: { id, status: 'completed', output: [{ type: 'function_call', call_id: 'call_weather_1', name: 'get_weather' }] },
        })
      } else if (event.type === 'response.create') respondWithText(socket, 'It is 21°C and sunny in Paris.')
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
      for (const c of wss.clients) c.terminate()
      wss.close()
      server.closeAllConnections()
      await new Promise<void>((r) => server.close(() => r()))
    },
  }
}

// The app: the SDK's Realtime client, a text turn, a tool call answered with the tool's result, the final answer.
const APP = `
import OpenAI from 'openai'
import { OpenAIRealtimeWS } from 'openai/realtime/ws'
const client = new OpenAI({ apiKey: process.env.OPENAI_API_KEY, baseURL: 'https://api.test/v1' })
const rt = new OpenAIRealtimeWS({ model: 'gpt-realtime' }, client)
const out = []
const timer = setTimeout(() => { console.error('timed out: ' + out.join('|')); process.exit(4) }, 15000)
rt.on('error', (err) => { console.error('realtime error: ' + err.message); process.exit(3) })
rt.on('session.created', () => rt.send({ type: 'session.update', session: { type: 'realtime', instructions: 'Be brief.', tools: [{ type: 'function', name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } }] } }))
rt.on('session.updated', () => {
  rt.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Weather in Paris?' }] } })
  rt.send({ type: 'response.create' })
})
rt.on('response.output_text.delta', (e) => out.push('delta:' + e.delta))
rt.on('response.function_call_arguments.done', (e) => {
  out.push('call:' + e.name + ' ' + e.arguments)
  const { city } = JSON.parse(e.arguments)
  rt.send({ type: 'conversation.item.create', item: { type: 'function_call_output', call_id: e.call_id, output: JSON.stringify({ city, celsius: 21, sky: 'sunny' }) } })
  rt.send({ type: 'response.create' })
})
let done = 0
rt.on('response.done', (e) => {
  out.push('done:' + e.response.status)
  if (++done === 2) { clearTimeout(timer); process.stdout.write(out.join('\\n') + '\\n'); rt.close() }
})
`

const EXPECTED = [
  'delta:Let me check ',
  'delta:the weather.',
  'call:get_weather {"city":"Paris"}',
  'done:completed',
  'delta:It is ',
  'delta:21°C a',
  'delta:nd sun',
  'delta:ny in ',
  'delta:Paris.',
  'done:completed',
].join('\n')

describe('sealed runs: the openai SDK Realtime client (OpenAIRealtimeWS) recorded and replayed', { timeout: 300_000 }, () => {
  test('record then strict replay with the server stopped: same output, exit 0, 0 connections, the key redacted', async (t) => {
    if (skip) return t.skip(skip)
    let up: Awaited<ReturnType<typeof startRealtimeServer>> | undefined = await startRealtimeServer()
    const port = up.port
    let counting: Awaited<ReturnType<typeof countingListener>> | undefined
    const env = { OPENAI_API_KEY: API_KEY }
    try {
      const command = [process.execPath, '--input-type=module', '-e', APP]
      const rec = await cli(
        [
          'record',
          '--store',
          work.store,
          '-t',
          'realtime',
          '--sealed',
          '--resolve',
          `api.test=127.0.0.1:${port}`,
          '--upstream-ca',
          work.pki.caPath,
          '--',
          ...command,
        ],
        env,
      )
      assert.equal(rec.code, 0, rec.stderr)
      assert.equal(rec.stdout, `${EXPECTED}\n`)
      assert.match(rec.stderr, /1 recorded/)
      assert.equal(up.connections, 1)
      await up.close()
      up = undefined
      counting = await countingListener(port)
      const rep = await cli(['replay', '--store', work.store, '-t', 'realtime', '--strict', '--sealed', '--', ...command], env)
      assert.equal(rep.code, 0, rep.stderr)
      assert.equal(rep.stdout, rec.stdout)
      assert.match(rep.stderr, /1 replayed/)
      assert.equal(counting.connections, 0)
      // The key went out as Authorization while recording; the exported trace holds it redacted, and every
      // message of the conversation in order.
      const file = join(work.work, 'realtime.trace.json')
      const exported = await cli(['export', 'realtime', '--store', work.store, '-o', file])
      assert.equal(exported.code, 0, exported.stderr)
      const text = await readFile(file, 'utf8')
      assert.ok(!text.includes(API_KEY), 'the trace holds the API key')
      assert.match(text, /"authorization",\s*"\[REDACTED\]"/i)
      const doc = JSON.parse(text) as {
        exchanges: Array<{ websocket?: { messages: Array<{ from: string; opcode: string; body: { digest: string; text?: string } }> } }>
      }
      // A repeated message (the second response.create) is a `ref` to the first one's bytes.
      const texts = new Map<string, string>()
      const types = (doc.exchanges[0]?.websocket?.messages ?? []).map((m) => {
        if (m.body.text !== undefined) texts.set(m.body.digest, m.body.text)
        return m.opcode === 'text' ? `${m.from} ${(JSON.parse(texts.get(m.body.digest) ?? '{}') as { type?: string }).type}` : `${m.from} ${m.opcode}`
      })
      const server = (type: string, n = 1) => Array<string>(n).fill(`server ${type}`)
      // The app sends item.create and response.create together, so where item.created falls between them varies.
      assert.deepEqual(types.slice(0, 3), ['server session.created', 'client session.update', 'server session.updated'])
      assert.deepEqual(types.slice(-2), ['client close', 'server close'])
      assert.deepEqual(
        [...types].sort(),
        [
          ...server('session.created'),
          'client session.update',
          ...server('session.updated'),
          'client conversation.item.create',
          ...server('conversation.item.created'),
          'client response.create',
          ...server('response.created'),
          ...server('response.output_text.delta', 2),
          ...server('response.function_call_arguments.delta', 2),
          ...server('response.function_call_arguments.done'),
          ...server('response.done'),
          'client conversation.item.create',
          'client response.create',
          ...server('conversation.item.created'),
          ...server('response.created'),
          ...server('response.output_text.delta', 5),
          ...server('response.output_text.done'),
          ...server('response.done'),
          'client close',
          'server close',
        ].sort(),
      )
    } finally {
      await up?.close()
      await counting?.close()
    }
  })
})
