/**
 * The real `openai` SDK through the interceptor: record against a fake server serving real recorded
 * OpenAI exchanges, stop the server, replay, and get the same results and stream events.
 */
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import OpenAI from 'openai'
import { install } from 'tool-replay/interceptor'
import { createMemoryStore, type TraceStore } from 'tool-replay/store'
import { type FakeOpenAiServer, loadFixture, sseEvents, startFakeOpenAi } from './fixtures/openai/fake-openai-server.ts'

const API_KEY = 'sk-test-planted-openai-key-4b8d2f'
const nonStream = loadFixture('chat-completions-nonstream-gpt5nano.json')
const toolStream = loadFixture('chat-completions-stream-parallel-tool-calls.json')
const responsesStream = loadFixture('responses-stream-text.json')

/** The number of SSE events the SDK should yield: every data event except the [DONE] sentinel. */
const expectedEvents = (body: string) => sseEvents(body).filter((e) => e.includes('data: ') && !e.includes('data: [DONE]')).length

let server: FakeOpenAiServer
let store: TraceStore
before(async () => {
  server = await startFakeOpenAi([
    { match: (r) => r.path === '/v1/chat/completions' && r.json?.stream !== true, fixture: nonStream },
    { match: (r) => r.path === '/v1/chat/completions' && r.json?.stream === true, fixture: toolStream },
    { match: (r) => r.path === '/v1/responses', fixture: responsesStream },
  ])
  store = createMemoryStore()
})
after(async () => {
  await server.close()
  await store.close()
})

/** What the app does with the SDK; everything it observes comes back for comparison. */
async function app(client: OpenAI) {
  const completion = await client.chat.completions.create({
    model: 'gpt-5-nano',
    messages: [{ role: 'user', content: "Count r's in strawberry" }],
    reasoning_effort: 'low',
  })
  const toolChunks = []
  const stream = await client.chat.completions.create({
    model: 'gpt-3.5-turbo',
    stream: true,
    messages: [{ role: 'user', content: "What's the weather like in San Francisco and Boston?" }],
    tools: [
      {
        type: 'function',
        function: {
          name: 'get_current_weather',
          description: 'Get the current weather',
          parameters: { type: 'object', properties: { location: { type: 'string' } }, required: ['location'] },
        },
      },
    ],
  })
  for await (const chunk of stream) toolChunks.push(chunk)
  const responseEvents = []
  const events = await client.responses.create({ model: 'gpt-4.1-nano', input: 'Tell me a three sentence bedtime story about a unicorn.', stream: true })
  for await (const event of events) responseEvents.push(event)
  // The tool-call arguments as an app would assemble them from the deltas.
  const args: Record<number, string> = {}
  for (const c of toolChunks) for (const t of c.choices[0]?.delta.tool_calls ?? []) args[t.index] = (args[t.index] ?? '') + (t.function?.arguments ?? '')
  return { completion, toolChunks, toolArgs: args, responseEvents }
}

const client = (stainless: Record<string, string>) => new OpenAI({ baseURL: server.baseURL, apiKey: API_KEY, maxRetries: 0, defaultHeaders: stainless })

test('openai SDK: record chat, streamed tool calls and a streamed Responses call; replay offline with identical results', async () => {
  const rec = await install({ mode: 'record', trace: 'openai', store })
  const live = await app(client({ 'X-Stainless-Run': 'recording', 'X-Stainless-OS': 'RecordOS' }))
  await rec.close()
  assert.equal(server.requests.length, 3)
  assert.equal(server.requests[0]?.headers.authorization, `Bearer ${API_KEY}`)

  // Sanity against the fixtures: the live run saw what was recorded from the real API.
  assert.deepEqual(live.completion, JSON.parse(nonStream.response.body))
  assert.equal(live.toolChunks.length, expectedEvents(toolStream.response.body))
  assert.equal(live.responseEvents.length, expectedEvents(responsesStream.response.body))
  assert.deepEqual(Object.keys(live.toolArgs), ['0', '1'])
  assert.deepEqual(
    Object.values(live.toolArgs).map((a) => JSON.parse(a)),
    [{ location: 'San Francisco' }, { location: 'Boston' }],
  )

  // The recording holds the SSE bodies in their event chunks, and no API key.
  const trace = await store.readTrace('openai')
  assert.equal(trace.exchanges.length, 3)
  const toolExchange = trace.exchanges[1]
  assert.ok(toolExchange)
  // The SDK aborts its request once it has read `data: [DONE]`, usually before the server's final
  // zero-length chunk. The interceptor keeps reading for the recording, so every streamed exchange is
  // stored as the complete response it was, not as an abort.
  for (const x of trace.exchanges)
    assert.equal(x.outcome.kind, 'response', `exchange #${x.seq} recorded as ${JSON.stringify(x.outcome.kind === 'error' ? x.outcome.error : '')}`)
  const outcome = toolExchange.outcome
  const body = outcome.kind === 'response' ? outcome.response.body : undefined
  assert.equal(body?.chunks.length, sseEvents(toolStream.response.body).length, 'one recorded chunk per SSE event')
  const recordedStainless = toolExchange.request.headers.filter(([k]) => k.toLowerCase().startsWith('x-stainless-'))
  assert.ok(recordedStainless.some(([k, v]) => k.toLowerCase() === 'x-stainless-run' && v === 'recording'))
  assert.ok(!JSON.stringify(trace.exchanges).includes(API_KEY), 'the API key is redacted')

  const connectionsBefore = server.connections
  await server.close()
  const rep = await install({ mode: 'replay', trace: 'openai', store })
  // Different X-Stainless-* values (and a different runtime) must not break matching.
  const replayed = await app(client({ 'X-Stainless-Run': 'replaying', 'X-Stainless-OS': 'ReplayOS', 'X-Stainless-Package-Version': '0.0.0-replay' }))
  rep.assertDone()
  const summary = await rep.close()
  assert.equal(summary.replayed, 3)
  assert.equal(server.connections, connectionsBefore)

  assert.deepEqual(replayed.completion, live.completion)
  assert.equal(replayed.toolChunks.length, live.toolChunks.length)
  assert.deepEqual(replayed.toolChunks, live.toolChunks)
  assert.deepEqual(replayed.toolArgs, live.toolArgs)
  assert.equal(replayed.responseEvents.length, live.responseEvents.length)
  assert.deepEqual(replayed.responseEvents, live.responseEvents)
})
