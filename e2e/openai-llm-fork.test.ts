/**
 * Fork by meaning, proven with the real `openai` SDK: record real OpenAI exchanges (served by a local fake
 * server) through the interceptor, fork the trace with `llm.*` patches, stop the server, replay the fork
 * and check that the SDK parses every re-encoded stream without error (raw iteration and the SDK's
 * accumulating helpers, which validate indexes, item ids and snapshots) and sees the patched values.
 */
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import OpenAI from 'openai'
import { install } from 'tool-replay/interceptor'
import { createMemoryStore, type TraceStore, traceDigest } from 'tool-replay/store'
import { forkTrace, llmView, type Trace } from 'tool-replay/trace'
import { type FakeOpenAiServer, loadFixture, startFakeOpenAi } from './fixtures/openai/fake-openai-server.ts'

const toolStream = loadFixture('chat-completions-stream-parallel-tool-calls.json')
const textStream = loadFixture('chat-completions-stream-include-usage.json')
const nonStream = loadFixture('chat-completions-nonstream-gpt5nano.json')
const responsesText = loadFixture('responses-stream-text.json')
const responsesCall = loadFixture('responses-stream-reasoning-function-call.json')

let server: FakeOpenAiServer
let store: TraceStore
before(async () => {
  const model = (r: { json: Record<string, unknown> | undefined }) => r.json?.model
  server = await startFakeOpenAi([
    { match: (r) => r.path === '/v1/chat/completions' && model(r) === 'gpt-3.5-turbo', fixture: toolStream },
    { match: (r) => r.path === '/v1/chat/completions' && model(r) === 'gpt-4o', fixture: textStream },
    { match: (r) => r.path === '/v1/chat/completions' && model(r) === 'gpt-5-nano', fixture: nonStream },
    { match: (r) => r.path === '/v1/responses' && model(r) === 'gpt-4.1-nano', fixture: responsesText },
    { match: (r) => r.path === '/v1/responses' && model(r) === 'gpt-5-mini', fixture: responsesCall },
  ])
  store = createMemoryStore()
})
after(async () => {
  await server.close()
  await store.close()
})

const weatherTool = {
  type: 'function' as const,
  function: {
    name: 'get_current_weather',
    description: 'Get the current weather',
    parameters: { type: 'object', properties: { location: { type: 'string' } } },
  },
}
const toolParams = { model: 'gpt-3.5-turbo', messages: [{ role: 'user' as const, content: 'Weather in San Francisco and Boston?' }], tools: [weatherTool] }
const textParams = { model: 'gpt-4o', messages: [{ role: 'user' as const, content: 'How should I structure my database schema?' }] }
const callParams = {
  model: 'gpt-5-mini',
  input: 'Do I need an umbrella in Oslo today?',
  tools: [
    {
      type: 'function' as const,
      name: 'get_weather',
      strict: true,
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false },
    },
  ],
}

/** What the app observes, through both ways the SDK offers to read a stream. */
async function app(client: OpenAI) {
  // #0 chat stream, raw chunks: the tool calls as an app assembles them by index.
  const calls: Record<number, { name: string; args: string }> = {}
  for await (const chunk of await client.chat.completions.create({ ...toolParams, stream: true })) {
    for (const t of chunk.choices[0]?.delta.tool_calls ?? []) {
      const c = (calls[t.index] ??= { name: '', args: '' })
      if (t.function?.name) c.name = t.function.name
      c.args += t.function?.arguments ?? ''
    }
  }
  // #1 the same request through the SDK's accumulating helper.
  const toolFinal = await client.chat.completions.stream(toolParams).finalChatCompletion()
  // #2 chat text stream, raw chunks; #3 the same through the helper.
  let text = ''
  let textFinish: string | null | undefined
  let textChunks = 0
  for await (const chunk of await client.chat.completions.create({ ...textParams, stream: true })) {
    textChunks++
    text += chunk.choices[0]?.delta.content ?? ''
    textFinish = chunk.choices[0]?.finish_reason ?? textFinish
  }
  const textFinal = await client.chat.completions.stream(textParams).finalChatCompletion()
  // #4 Responses text stream, raw events; #5 through ResponseStream (validates item ids and snapshots).
  const events: string[] = []
  let responsesDeltas = ''
  let completedText: string | undefined
  for await (const e of await client.responses.create({ model: 'gpt-4.1-nano', input: 'A bedtime story about a unicorn.', stream: true })) {
    events.push(e.type)
    if (e.type === 'response.output_text.delta') responsesDeltas += e.delta
    if (e.type === 'response.completed') {
      const item = e.response.output[0]
      const part = item?.type === 'message' ? item.content[0] : undefined
      completedText = part?.type === 'output_text' ? part.text : undefined
    }
  }
  const responsesFinal = await client.responses.stream({ model: 'gpt-4.1-nano', input: 'A bedtime story about a unicorn.' }).finalResponse()
  // #6 Responses reasoning + function call stream, raw events; #7 through ResponseStream.
  let callArgs = ''
  let callDone: { name?: string; arguments?: string } = {}
  for await (const e of await client.responses.create({ ...callParams, stream: true })) {
    if (e.type === 'response.function_call_arguments.delta') callArgs += e.delta
    if (e.type === 'response.output_item.done' && e.item.type === 'function_call') callDone = { name: e.item.name, arguments: e.item.arguments }
  }
  const callFinal = await client.responses.stream(callParams).finalResponse()
  // #8 a JSON chat completion.
  const json = await client.chat.completions.create({ model: 'gpt-5-nano', messages: [{ role: 'user', content: "Count r's in strawberry" }] })
  return {
    calls,
    toolFinal,
    text,
    textFinish,
    textChunks,
    textFinal,
    events,
    responsesDeltas,
    completedText,
    responsesFinal,
    callArgs,
    callDone,
    callFinal,
    json,
  }
}

const client = () => new OpenAI({ baseURL: server.baseURL, apiKey: 'sk-test-not-a-key', maxRetries: 0 })

const PATCHES = [
  '#0 llm.tool_call[1].arguments={"location":"Bergen, Norway"}',
  '#0 llm.tool_call[0].name=get_forecast',
  '#1 llm.tool_call[1].arguments={"location":"Bergen, Norway"}',
  '#1 llm.tool_call[0].name=get_forecast',
  '#2 llm.output_text="manual_review"',
  '#3 llm.output_text="Use a normalized schema: one table per entity, foreign keys for relations."',
  '#3 llm.finish=stop',
  '#4 llm.output_text="manual_review"',
  '#5 llm.output_text="The end."',
  '#5 llm.finish=length',
  '#6 llm.tool_call[0].arguments={"city":"Tromsø"}',
  '#7 llm.tool_call[0].arguments={"city":"Tromsø"}',
  '#7 llm.tool_call[0].name=lookup_weather',
  '#8 llm.output_text="approve"',
]

const chunkCounts = (t: Trace) => t.exchanges.map((x) => (x.outcome.kind === 'response' ? x.outcome.response.body.chunks.length : -1))

test('openai SDK replays a fork made by meaning: streamed tool calls, text and finish re-encoded, parsed without error', async () => {
  const rec = await install({ mode: 'record', trace: 'llm', store })
  const live = await app(client())
  await rec.close()
  // The recording is what the real API said.
  assert.deepEqual(live.calls, {
    0: { name: 'get_current_weather', args: '{"location": "San Francisco"}' },
    1: { name: 'get_current_weather', args: '{"location": "Boston"}' },
  })
  assert.equal(live.textFinish, 'length')
  assert.equal(live.callDone.arguments, '{"city":"Oslo"}')

  const source = await store.readTrace('llm')
  assert.equal(source.exchanges.length, 9)
  // Every call the real SDK made reads as a model turn, with the SDK's retry attempt (x-stainless-retry-count).
  const views = source.exchanges.map((x) => llmView(source, x))
  assert.deepEqual(
    views.map((v) => [v?.api, v?.stream, v?.attempt]),
    [...Array(4).fill(['openai.chat', true, 0]), ...Array(4).fill(['openai.responses', true, 0]), ['openai.chat', false, 0]],
  )
  const branch = forkTrace(source, { name: 'llm-fork', sourceDigest: traceDigest(source), patches: PATCHES })
  await store.putTrace(branch)
  // Same number of chunks per response as recorded: the streams keep their rhythm.
  assert.deepEqual(chunkCounts(branch), chunkCounts(source))
  assert.ok((chunkCounts(source)[2] as number) > 50, 'the text stream has many chunks')
  // The source is untouched.
  assert.equal(llmView(source, source.exchanges[8] as Trace['exchanges'][number])?.outputText, live.json.choices[0]?.message.content)

  const connections = server.connections
  await server.close()
  const rep = await install({ mode: 'replay', trace: 'llm-fork', store })
  const seen = await app(client())
  rep.assertDone()
  await rep.close()
  assert.equal(server.connections, connections, 'replay opened no connection')

  // Chat tool calls: raw chunks and the helper agree on the patched name and arguments.
  assert.deepEqual(seen.calls, {
    0: { name: 'get_forecast', args: '{"location": "San Francisco"}' },
    1: { name: 'get_current_weather', args: '{"location":"Bergen, Norway"}' },
  })
  const toolCalls = seen.toolFinal.choices[0]?.message.tool_calls ?? []
  assert.deepEqual(
    toolCalls.map((c) => (c.type === 'function' ? [c.id, c.function.name, JSON.parse(c.function.arguments)] : [])),
    [
      ['call_cCPjAyfwTzboEKjVlqFrArNF', 'get_forecast', { location: 'San Francisco' }],
      ['call_Zi4He1Ns0mozwT6f85nW1BOW', 'get_current_weather', { location: 'Bergen, Norway' }],
    ],
  )
  assert.equal(seen.toolFinal.choices[0]?.finish_reason, 'tool_calls')
  // Chat text: every chunk still arrives (usage chunk included), the text is the patched one.
  assert.equal(seen.text, 'manual_review')
  assert.equal(seen.textChunks, live.textChunks)
  assert.equal(seen.textFinish, 'length')
  assert.equal(seen.textFinal.choices[0]?.message.content, 'Use a normalized schema: one table per entity, foreign keys for relations.')
  assert.equal(seen.textFinal.choices[0]?.finish_reason, 'stop')
  assert.deepEqual(seen.textFinal.usage, live.textFinal.usage, 'usage kept')
  // Responses text: same events in the same order, deltas and the completed snapshot agree.
  assert.deepEqual(seen.events, live.events)
  assert.equal(seen.responsesDeltas, 'manual_review')
  assert.equal(seen.completedText, 'manual_review')
  assert.equal(seen.responsesFinal.output_text, 'The end.')
  assert.equal(seen.responsesFinal.status, 'incomplete')
  assert.equal(seen.responsesFinal.incomplete_details?.reason, 'max_output_tokens')
  // Responses function call after a reasoning summary.
  assert.equal(seen.callArgs, '{"city":"Tromsø"}')
  assert.deepEqual(seen.callDone, { name: 'get_weather', arguments: '{"city":"Tromsø"}' })
  const call = seen.callFinal.output.find((o) => o.type === 'function_call')
  assert.equal(call?.type === 'function_call' ? `${call.name} ${call.arguments}` : '', 'lookup_weather {"city":"Tromsø"}')
  assert.equal(seen.callFinal.output[0]?.type, 'reasoning')
  // JSON chat completion: only the content changed.
  assert.equal(seen.json.choices[0]?.message.content, 'approve')
  assert.deepEqual({ ...seen.json, choices: [] }, { ...live.json, choices: [] })
})
