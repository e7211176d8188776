import assert from 'node:assert/strict'
import { test } from 'node:test'
import { buildTrace, type ExchangeFixture, itemFromFixture, readExchangeFixture, sseChunks, type TraceItem } from '../../e2e/fixtures/fixture-trace.ts'
import { mulberry32, mutate } from '../../e2e/fixtures/json-mutation.ts'
import { bodyFromBytes } from '../body.ts'
import type { Exchange, Trace } from '../exchange.ts'
import { stringifyJson } from '../json-codec.ts'
import { llmView, readLlmView } from './llm-view.ts'

const fx = (path: string) => readExchangeFixture(path)
const viewOf = (item: TraceItem) => {
  const t = buildTrace('t', [item])
  return llmView(t, t.exchanges[0] as Exchange)
}
const only = (path: string, overrides: Partial<TraceItem> = {}) => viewOf(itemFromFixture(fx(path), overrides))

test('Chat Completions JSON (real gpt-5-nano exchange): model, input, text, finish, usage with reasoning tokens, attempt', () => {
  const v = only('openai/chat-completions-nonstream-gpt5nano.json')
  assert.ok(v)
  assert.equal(v.api, 'openai.chat')
  assert.equal(v.stream, false)
  assert.equal(v.requestModel, 'gpt-5-nano')
  assert.equal(v.model, 'gpt-5-nano-2025-08-07')
  assert.deepEqual(v.input, [{ role: 'user', text: "Count r's in strawberry" }])
  assert.equal(v.outputText, '3\n\nThere are three \'r\' letters in "strawberry" (positions 3, 8, and 9).')
  assert.equal(v.finish, 'stop')
  assert.deepEqual(v.usage, { input: 11, output: 228, total: 239, reasoning: 192, cachedInput: 0 })
  assert.equal(v.attempt, 0)
})

test('Chat Completions stream (real): parallel tool calls reassembled by index, argument fragments split mid-token joined', () => {
  const v = only('openai/chat-completions-stream-parallel-tool-calls.json')
  assert.ok(v)
  assert.equal(v.stream, true)
  assert.equal(v.events, 16)
  assert.deepEqual(v.tools, ['get_current_weather'])
  assert.deepEqual(
    v.toolCalls.map((c) => [c.index, c.id, c.name, c.arguments, c.argumentsValid]),
    [
      [0, 'call_cCPjAyfwTzboEKjVlqFrArNF', 'get_current_weather', { location: 'San Francisco' }, true],
      [1, 'call_Zi4He1Ns0mozwT6f85nW1BOW', 'get_current_weather', { location: 'Boston' }, true],
    ],
  )
  assert.equal(v.outputText, '')
  assert.equal(v.finish, 'tool_calls')
  assert.equal(v.incomplete, undefined)
  // No x-stainless-retry-count in this (Python 1.31) recording: no attempt is claimed.
  assert.equal(v.attempt, undefined)
})

test('Chat Completions stream with include_usage (real): text joined, usage from the choices:[] chunk, finish length', () => {
  const f = fx('openai/chat-completions-stream-include-usage.json')
  const v = viewOf(itemFromFixture(f))
  assert.ok(v)
  const expected = f.response.body
    .split('\n\n')
    .filter((e) => e.startsWith('data: {'))
    .map((e) => JSON.parse(e.slice(6)).choices[0]?.delta?.content ?? '')
    .join('')
  assert.equal(v.outputText, expected)
  assert.ok(v.outputText.startsWith('Structuring a database schema'))
  assert.equal(v.finish, 'length')
  assert.deepEqual(v.usage, { input: 1420, output: 100, total: 1520, reasoning: 0, cachedInput: 1280 })
  assert.equal(v.input[0]?.role, 'system')
})

test('Responses stream (real): 86 events, text from deltas equals the done text, status and usage from response.completed', () => {
  const f = fx('openai/responses-stream-text.json')
  const v = viewOf(itemFromFixture(f))
  assert.ok(v)
  assert.equal(v.api, 'openai.responses')
  assert.equal(v.events, 86)
  const done = f.response.body.split('\n\n').find((e) => e.startsWith('event: response.output_text.done')) as string
  assert.equal(v.outputText, JSON.parse(done.slice(done.indexOf('data: ') + 6)).text)
  assert.equal(v.finish, 'completed')
  assert.deepEqual(v.usage, { input: 18, output: 79, total: 97, reasoning: 0, cachedInput: 0 })
  assert.deepEqual(v.input, [{ role: 'user', text: 'Tell me a three sentence bedtime story about a unicorn.' }])
})

test('Responses stream cut before response.completed: reassembled from the deltas, marked incomplete', () => {
  const f = fx('openai/responses-stream-text.json')
  const chunks = sseChunks(f.response.body)
  const v = viewOf(itemFromFixture(f, { chunks: chunks.slice(0, 12) }))
  assert.ok(v)
  assert.equal(v.incomplete, true)
  assert.equal(v.outputText, 'Once upon a time, in a enchanted')
  assert.equal(v.finish, 'in_progress')
})

test('Responses JSON (real) and a reasoning summary + function call stream (constructed)', () => {
  const j = only('openai/responses-nonstream-text.json')
  assert.equal(j?.outputText, 'The capital of France is Paris.')
  assert.equal(j?.finish, 'completed')
  const v = only('openai/responses-stream-reasoning-function-call.json')
  assert.ok(v)
  assert.deepEqual(v.reasoning, ['**Checking the weather**\n\nThe user asks about Oslo today; I should call get_weather with the city.'])
  assert.deepEqual(
    v.toolCalls.map((c) => [c.index, c.id, c.name, c.argumentsText]),
    [[1, 'call_Q2mYv8sKp4TnW7xRz1LbHd3F', 'get_weather', '{"city":"Oslo"}']],
  )
  assert.equal(v.usage?.reasoning, 64)
})

test('Anthropic Messages stream (constructed from the SDK types): thinking, text, tool_use input from input_json_delta, usage merged', () => {
  const v = only('anthropic/messages-stream-thinking-tool-use.json')
  assert.ok(v)
  assert.equal(v.api, 'anthropic.messages')
  assert.deepEqual(v.reasoning, ["The user wants Oslo's weather. I will call get_weather."])
  assert.equal(v.outputText, "I'll check the weather in Oslo for you.")
  assert.deepEqual(
    v.toolCalls.map((c) => [c.index, c.name, c.arguments, c.argumentsText]),
    [[2, 'get_weather', { city: 'Oslo' }, '{"city": "Oslo"}']],
  )
  assert.equal(v.finish, 'tool_use')
  // input_tokens from message_start, output_tokens from message_delta (cumulative).
  assert.deepEqual(v.usage, { input: 412, output: 87, total: 499, cachedInput: 0 })
  assert.equal(v.incomplete, undefined)
})

test('Anthropic Messages JSON: the tool_result the request sends back is a named tool result', () => {
  const v = only('anthropic/messages-json-tool-result.json')
  assert.ok(v)
  assert.deepEqual(v.toolResults, [{ callId: 'toolu_01Hq7VbN2xKc9PzR4sTm6JdE', name: 'get_weather', output: '{"city":"Oslo","rain":true,"temp_c":8}' }])
  assert.deepEqual(
    v.input.map((m) => m.role),
    ['user', 'assistant', 'tool'],
  )
  assert.equal(v.outputText, 'Yes: rain is expected in Oslo today (8 °C). Take an umbrella.')
})

test('OpenAI-compatible servers at any host: detected by path and body shape, not by host', () => {
  const f = fx('openai/chat-completions-stream-parallel-tool-calls.json')
  assert.equal(viewOf(itemFromFixture(f, { url: 'http://127.0.0.1:11434/v1/chat/completions' }))?.toolCalls.length, 2, 'Ollama-style local server')
  assert.equal(viewOf(itemFromFixture(f, { url: 'https://gw.example/openai/deployments/x/chat/completions?api-version=2024-10-21' }))?.api, 'openai.chat')
  // A gateway path that says nothing: the response shape (chat.completion.chunk) decides.
  assert.equal(viewOf(itemFromFixture(f, { url: 'https://gw.example/llm/invoke' }))?.api, 'openai.chat')
  // Not model calls: a GET, a non-JSON body, a "/messages" API that is not Anthropic's.
  assert.equal(viewOf(itemFromFixture(f, { method: 'GET' })), undefined)
  assert.equal(viewOf({ method: 'POST', url: 'https://chat.example/v1/chat/completions', requestBody: 'hello', body: '{}' }), undefined)
  assert.equal(viewOf({ method: 'POST', url: 'https://app.example/api/messages', requestBody: '{"messages":[{"text":"hi"}]}', body: '{"ok":true}' }), undefined)
})

test('errors: an API error body, a recorded network error mid-stream (partial text kept), a stream cut without [DONE]', () => {
  const e = only('openai/chat-completions-error-400-invalid-image-url.json')
  assert.equal(e?.status, 400)
  assert.match(e?.error ?? '', /^invalid_image_url: Error while downloading/)
  const f = fx('openai/chat-completions-stream-include-usage.json')
  const chunks = sseChunks(f.response.body).slice(0, 5)
  const cut = viewOf(itemFromFixture(f, { chunks }))
  assert.equal(cut?.incomplete, true)
  assert.equal(cut?.outputText, 'Structuring a database')
  const t = buildTrace('t', [itemFromFixture(f, { chunks })])
  const x = t.exchanges[0] as Exchange
  if (x.outcome.kind !== 'response') throw new Error('unreachable')
  x.outcome = { kind: 'error', error: { code: 'ECONNRESET', message: 'read ECONNRESET', phase: 'response-body', partial: x.outcome.response } }
  const v = llmView(t, x)
  assert.equal(v?.error, 'ECONNRESET during response-body')
  assert.equal(v?.incomplete, true)
  assert.equal(v?.outputText, 'Structuring a database')
})

test('the SDK retry attempt comes from x-stainless-retry-count', () => {
  const f = fx('openai/responses-nonstream-text.json')
  const v = viewOf(itemFromFixture(f, { requestHeaders: [['x-stainless-retry-count', '2']] }))
  assert.equal(v?.attempt, 2)
})

// --- fuzz: damaged and unexpected shapes never make the readers throw ---------------------------------

function mutatedItem(f: ExchangeFixture, rnd: () => number): TraceItem {
  const item = itemFromFixture(f)
  const r = rnd()
  if (r < 0.2) item.requestBody = stringifyJson(mutate(JSON.parse(f.request.body), rnd))
  else if (r < 0.3) item.chunks = [f.response.body.slice(0, Math.floor(rnd() * f.response.body.length))]
  else if (r < 0.4) item.chunks = (item.chunks ?? []).sort(() => rnd() - 0.5)
  else {
    const chunks = item.chunks ?? []
    const i = Math.floor(rnd() * chunks.length)
    const c = chunks[i] as string
    const at = c.indexOf('{')
    if (at >= 0) {
      const end = c.lastIndexOf('}') + 1
      try {
        chunks[i] = `${c.slice(0, at)}${stringifyJson(mutate(JSON.parse(c.slice(at, end)), rnd))}${c.slice(end)}`
      } catch {
        chunks[i] = c.slice(0, Math.floor(rnd() * c.length))
      }
    }
  }
  return item
}

test('fuzz: 1200 mutated real and constructed exchanges; the readers never throw (no safety net)', () => {
  const files = [
    'openai/chat-completions-nonstream-gpt5nano.json',
    'openai/chat-completions-stream-parallel-tool-calls.json',
    'openai/responses-stream-text.json',
    'openai/responses-stream-reasoning-function-call.json',
    'anthropic/messages-stream-thinking-tool-use.json',
    'anthropic/messages-json-tool-result.json',
  ].map(fx)
  const rnd = mulberry32(11)
  let views = 0
  for (let i = 0; i < 1200; i++) {
    const f = files[i % files.length] as ExchangeFixture
    const t: Trace = buildTrace('fuzz', [mutatedItem(f, rnd)])
    const x = t.exchanges[0] as Exchange
    const v = readLlmView(t, x)
    if (v) views++
  }
  // Most mutations leave a readable model call: the fuzz exercises the readers, not only the detector.
  assert.ok(views > 800, `only ${views} of 1200 mutated exchanges were read as model calls`)
})

test('a body the trace lacks or that is binary: no view, no throw', () => {
  const t = buildTrace('t', [itemFromFixture(fx('openai/responses-nonstream-text.json'))])
  const x = t.exchanges[0] as Exchange
  const bin = bodyFromBytes(new Uint8Array([0xff, 0xfe, 0x00, 0x81]))
  const damaged: Exchange = { ...x, request: { ...x.request, body: bin.ref } }
  assert.equal(readLlmView(t, damaged), undefined)
})
