/**
 * The OpenAI Realtime conversation of the e2e tests: a local Realtime-shaped server (session.created/updated, text
 * deltas, a function call, the tool result as conversation.item.create, the final response) and the app that talks to
 * it with the openai SDK's own `OpenAIRealtimeWS` (on the `ws` package; it ignores HTTPS_PROXY, so runs are sealed).
 */
import { randomUUID } from 'node:crypto'
import { createServer as createHttpsServer } from 'node:https'
import { type WebSocket, WebSocketServer } from 'ws'
import { type CountingWebSocketServer, listenCounting } from './websocket-server.ts'

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

/**
 * A Realtime-shaped server on HTTPS for api.test (`cert`), counting its connections: a text delta turn with a
 * function call, then, once the tool result is in, `answer` as the final response.
 */
export async function startRealtimeServer(cert: { cert: string; key: string }, answer = 'It is 21°C and sunny in Paris.'): Promise<CountingWebSocketServer> {
  const server = createHttpsServer(cert)
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
      } else if (event.type === 'response.create') respondWithText(socket, answer)
    })
  })
  return listenCounting(server, wss)
}

/** The app: the SDK's Realtime client, a text turn, a tool call answered with the tool's result, the final answer. */
export const REALTIME_APP = `
import OpenAI from 'openai'
import { OpenAIRealtimeWS } from 'openai/realtime/ws'
const client = new OpenAI({ apiKey: process.env.OPENAI_API_KEY, baseURL: 'https://api.test/v1' })
const rt = new OpenAIRealtimeWS({ model: 'gpt-realtime' }, client)
const out = []
const timer = setTimeout(() => { console.error('timed out: ' + out.join('|')); process.exit(4) }, 15000)
rt.on('error', (err) => { console.error('realtime error: ' + err.message); process.exit(3) })
rt.on('session.created', () => rt.send({ type: 'session.update', session: { type: 'realtime', instructions: 'Be brief.', tools: [{ type: 'function', name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } }] } }))
let askedAt = 0
rt.on('session.updated', () => {
  askedAt = performance.now()
  rt.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Weather in Paris?' }] } })
  rt.send({ type: 'response.create' })
})
rt.on('response.output_text.delta', (e) => {
  // The wait the app saw for its first answer (stderr): what a delay fault changes, measured where the app reads.
  if (!out.some((line) => line.startsWith('delta:'))) console.error('first delta after ' + Math.round(performance.now() - askedAt) + ' ms')
  out.push('delta:' + e.delta)
})
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

/** What REALTIME_APP prints against the server's default answer. */
export const REALTIME_EXPECTED = [
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
