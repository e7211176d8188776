import assert from 'node:assert/strict'
import { test } from 'node:test'
import { realtimeTrace, type SessionEvent, weatherConversation } from '../../e2e/fixtures/realtime-session.ts'
import type { Exchange } from '../exchange.ts'
import { llmView, readLlmView } from './llm-view.ts'
import { base64Bytes } from './openai-realtime.ts'

const viewOf = (events: SessionEvent[], url?: string) => {
  const t = realtimeTrace('rt', [events], url)
  return readLlmView(t, t.exchanges[0] as Exchange)
}

test('GA session: model, instructions, tools; each response with its input items, text, function call, finish and usage', () => {
  const v = viewOf(weatherConversation())
  assert.ok(v)
  assert.equal(v.api, 'openai.realtime')
  assert.equal(v.requestModel, 'gpt-realtime')
  assert.equal(v.model, 'gpt-realtime-2025-08-28')
  assert.deepEqual(v.tools, ['get_weather'])
  assert.deepEqual(
    v.input.map((m) => [m.role, m.text]),
    [
      ['system', 'Be brief.'],
      ['user', 'Weather in Paris?'],
      ['tool', '{"city":"Paris","celsius":21,"sky":"sunny"}'],
    ],
  )
  const [r0, r1, extra] = v.responses ?? []
  assert.equal(extra, undefined)
  assert.ok(r0 && r1)
  assert.deepEqual(
    r0.input.map((m) => [m.role, m.text]),
    [['user', 'Weather in Paris?']],
  )
  assert.equal(r0.outputText, 'Let me check the weather.')
  assert.deepEqual(
    r0.toolCalls.map((c) => [c.index, c.id, c.name, c.arguments]),
    [[1, 'call_weather_1', 'get_weather', { city: 'Paris' }]],
  )
  assert.equal(r0.finish, 'completed')
  assert.deepEqual(r0.usage, { input: 120, output: 30, total: 150, cachedInput: 0 })
  assert.equal(r0.incomplete, undefined)
  // The second response answers the tool result: named from the call of the first.
  assert.deepEqual(r1.toolResults, [{ callId: 'call_weather_1', name: 'get_weather', output: '{"city":"Paris","celsius":21,"sky":"sunny"}' }])
  assert.equal(r1.outputText, 'It is 21°C and sunny in Paris.')
  assert.deepEqual(r1.toolCalls, [])
  // The session sums its responses.
  assert.equal(v.outputText, 'Let me check the weather.\nIt is 21°C and sunny in Paris.')
  assert.deepEqual(v.usage, { input: 290, output: 42, total: 332, cachedInput: 0 })
  assert.equal(v.finish, 'completed')
  assert.equal(v.status, 101)
  assert.equal(v.events, 19)
})

test('the shapes of e2e/sealed-realtime.test.ts: deltas without indexes, a function call whose arguments only the events carry', () => {
  const s = (e: Record<string, unknown>): SessionEvent => ['server', { event_id: 'e', ...e }]
  const v = viewOf(
    [
      s({ type: 'session.created', session: { id: 'sess_1', model: 'gpt-realtime' } }),
      ['client', { type: 'session.update', session: { type: 'realtime', instructions: 'Be brief.', tools: [{ type: 'function', name: 'get_weather' }] } }],
      ['client', { type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Weather in Paris?' }] } }],
      ['client', { type: 'response.create' }],
      s({
        type: 'conversation.item.created',
        item: { id: 'item_1', type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Weather in Paris?' }] },
      }),
      s({ type: 'response.created', response: { id: 'resp_a', status: 'in_progress' } }),
      s({ type: 'response.output_text.delta', response_id: 'resp_a', delta: 'Let me check ' }),
      s({ type: 'response.output_text.delta', response_id: 'resp_a', delta: 'the weather.' }),
      s({ type: 'response.function_call_arguments.delta', response_id: 'resp_a', call_id: 'call_weather_1', delta: '{"city":' }),
      s({ type: 'response.function_call_arguments.delta', response_id: 'resp_a', call_id: 'call_weather_1', delta: '"Paris"}' }),
      s({
        type: 'response.function_call_arguments.done',
        response_id: 'resp_a',
        call_id: 'call_weather_1',
        name: 'get_weather',
        arguments: '{"city":"Paris"}',
      }),
      s({
        type: 'response.done',
        response: { id: 'resp_a', status: 'completed', output: [{ type: 'function_call', call_id: 'call_weather_1', name: 'get_weather' }] },
      }),
    ],
    'https://api.test/v1/realtime?model=gpt-realtime',
  )
  assert.ok(v)
  // The server's echo of the client's item is not a second input item.
  assert.deepEqual(
    v.input.map((m) => m.role),
    ['system', 'user'],
  )
  const r = v.responses?.[0]
  assert.equal(r?.outputText, 'Let me check the weather.')
  assert.deepEqual(
    r?.toolCalls.map((c) => [c.index, c.name, c.argumentsText]),
    [[0, 'get_weather', '{"city":"Paris"}']],
  )
})

test('beta names and audio: input audio committed by voice detection and transcribed, output audio counted in bytes, transcript as text', () => {
  const audioIn = Buffer.alloc(4800, 7).toString('base64')
  const audioOut = Buffer.alloc(3000, 9).toString('base64')
  const s = (e: Record<string, unknown>): SessionEvent => ['server', { event_id: 'e', ...e }]
  const v = viewOf(
    [
      s({ type: 'session.created', session: { id: 'sess_1', model: 'gpt-4o-realtime-preview', tools: [] } }),
      ['client', { type: 'input_audio_buffer.append', audio: audioIn }],
      ['client', { type: 'input_audio_buffer.append', audio: audioIn }],
      s({ type: 'input_audio_buffer.speech_started', audio_start_ms: 0, item_id: 'item_u' }),
      s({ type: 'input_audio_buffer.committed', item_id: 'item_u', previous_item_id: null }),
      s({ type: 'conversation.item.created', item: { id: 'item_u', type: 'message', role: 'user', content: [{ type: 'input_audio', transcript: null }] } }),
      s({ type: 'response.created', response: { id: 'resp_1', status: 'in_progress', output: [] } }),
      s({ type: 'conversation.item.input_audio_transcription.completed', item_id: 'item_u', content_index: 0, transcript: 'Hello there' }),
      s({ type: 'response.audio.delta', response_id: 'resp_1', item_id: 'item_a', output_index: 0, content_index: 0, delta: audioOut }),
      s({ type: 'response.audio_transcript.delta', response_id: 'resp_1', item_id: 'item_a', output_index: 0, content_index: 0, delta: 'Hi, how ' }),
      s({ type: 'response.audio.delta', response_id: 'resp_1', item_id: 'item_a', output_index: 0, content_index: 0, delta: audioOut }),
      s({ type: 'response.audio_transcript.delta', response_id: 'resp_1', item_id: 'item_a', output_index: 0, content_index: 0, delta: 'can I help' }),
      s({
        type: 'response.audio_transcript.done',
        response_id: 'resp_1',
        item_id: 'item_a',
        output_index: 0,
        content_index: 0,
        transcript: 'Hi, how can I help?',
      }),
      s({
        type: 'response.done',
        response: {
          id: 'resp_1',
          status: 'incomplete',
          status_details: { type: 'incomplete', reason: 'max_output_tokens' },
          output: [{ id: 'item_a', type: 'message', role: 'assistant', content: [{ type: 'audio', transcript: 'Hi, how can I help?' }] }],
          usage: { input_tokens: 80, output_tokens: 20, total_tokens: 100 },
        },
      }),
    ],
    'https://api.openai.com/v1/realtime?model=gpt-4o-realtime-preview',
  )
  assert.ok(v)
  assert.deepEqual(
    v.input.map((m) => [m.role, m.text]),
    [['user', '[audio 9600 bytes] Hello there']],
  )
  const r = v.responses?.[0]
  assert.equal(r?.outputText, 'Hi, how can I help?')
  assert.equal(r?.audioBytes, 6000)
  assert.equal(r?.finish, 'incomplete')
  assert.equal(r?.finishDetail, 'max_output_tokens')
  assert.equal(v.audioBytes, 6000)
  // Audio is counted, never held: no base64 of it anywhere in the view.
  const json = JSON.stringify(v)
  assert.ok(!json.includes(audioOut.slice(0, 40)) && !json.includes(audioIn.slice(0, 40)))
})

test('a session cut mid-response: that response is incomplete and the session says how it ended', () => {
  const events = weatherConversation().slice(0, 10)
  const t = realtimeTrace('rt', [events])
  const x = t.exchanges[0] as Exchange
  x.websocket = { messages: x.websocket?.messages ?? [], end: { code: 'ECONNRESET', message: 'socket hang up', atMs: 50 } }
  const v = llmView(t, x)
  assert.ok(v)
  assert.equal(v.responses?.length, 1)
  assert.equal(v.responses?.[0]?.incomplete, true)
  assert.equal(v.responses?.[0]?.outputText, 'Let me check the weather.')
  assert.equal(v.incomplete, true)
  assert.equal(v.error, 'ECONNRESET: socket hang up')
})

test('a WebSocket session that is not Realtime is not a model turn; a Realtime path with no messages is one with no responses', () => {
  assert.equal(
    viewOf(
      [
        ['server', { type: 'hello' }],
        ['client', { jsonrpc: '2.0', method: 'x' }],
      ],
      'https://chat.test/socket',
    ),
    undefined,
  )
  // At a /realtime path too, a session that speaks none of the API's events is read as WebSocket (e2e/proxy-websocket's server).
  const other: SessionEvent[] = [
    ['server', { type: 'hello' }],
    ['client', { type: 'ask', n: 1 }],
    ['server', { type: 'answer.delta', n: 1 }],
  ]
  assert.equal(viewOf(other, 'https://api.test/realtime?model=m'), undefined)
  const empty = viewOf([], 'https://api.openai.com/v1/realtime?model=gpt-realtime')
  assert.equal(empty?.api, 'openai.realtime')
  assert.deepEqual(empty?.responses, [])
  // Detected by its first server event when the path says nothing (a gateway's own path).
  assert.equal(viewOf([['server', { type: 'session.created', session: {} }]], 'https://gw.test/ws')?.api, 'openai.realtime')
})

test('damaged events never throw: wrong types at every field read', () => {
  const junk: unknown[] = [null, 1, 'x', [], {}, { a: 1 }, true]
  const types = [
    'session.update',
    'session.created',
    'conversation.item.create',
    'conversation.item.created',
    'input_audio_buffer.append',
    'input_audio_buffer.committed',
    'response.created',
    'response.output_text.delta',
    'response.output_text.done',
    'response.audio.delta',
    'response.output_item.added',
    'response.function_call_arguments.delta',
    'response.function_call_arguments.done',
    'response.done',
    'error',
  ]
  const fields = [
    'session',
    'item',
    'audio',
    'item_id',
    'response',
    'response_id',
    'delta',
    'text',
    'output_index',
    'content_index',
    'call_id',
    'name',
    'arguments',
    'error',
  ]
  for (const [n, value] of junk.entries()) {
    const events: SessionEvent[] = []
    for (const type of types) {
      const e: Record<string, unknown> = { type }
      for (const f of fields) e[f] = value
      events.push([n % 2 === 0 ? 'server' : 'client', e], ['server', e], ['client', e])
    }
    assert.doesNotThrow(() => viewOf(events))
  }
})

test('base64Bytes: the decoded size without decoding', () => {
  for (const n of [0, 1, 2, 3, 4, 5, 4800]) assert.equal(base64Bytes(Buffer.alloc(n).toString('base64')), n)
})
