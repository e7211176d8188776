/**
 * Fork by meaning on Anthropic Messages, proven with the real `@anthropic-ai/sdk`: a streamed turn
 * (thinking, text, tool_use with input_json_delta fragments) and a JSON turn that sends the tool result
 * back, recorded through the interceptor from a local fake server, forked with `llm.*` patches, replayed
 * offline; the SDK parses the re-encoded stream (raw events and MessageStream's accumulated message).
 * @note The Anthropic fixtures are constructed from the SDK's types, not recorded (see fixtures/anthropic/README.md).
 */
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import Anthropic from '@anthropic-ai/sdk'
import { install } from 'tool-replay/interceptor'
import { createMemoryStore, type TraceStore, traceDigest } from 'tool-replay/store'
import { forkTrace, type Trace } from 'tool-replay/trace'
import { type FakeOpenAiServer, loadFixture, startFakeOpenAi } from './fixtures/openai/fake-openai-server.ts'

const streamed = loadFixture('../anthropic/messages-stream-thinking-tool-use.json')
const followUp = loadFixture('../anthropic/messages-json-tool-result.json')

let server: FakeOpenAiServer
let store: TraceStore
before(async () => {
  server = await startFakeOpenAi([
    { match: (r) => r.path === '/v1/messages' && r.json?.stream === true, fixture: streamed },
    { match: (r) => r.path === '/v1/messages', fixture: followUp },
  ])
  store = createMemoryStore()
})
after(async () => {
  await server.close()
  await store.close()
})

const tools = [
  { name: 'get_weather', description: 'Current weather for a city', input_schema: { type: 'object' as const, properties: { city: { type: 'string' } } } },
]
const question = { model: 'claude-sonnet-4-6', max_tokens: 2048, tools, messages: [{ role: 'user' as const, content: 'Do I need an umbrella in Oslo today?' }] }

async function app(client: Anthropic) {
  // #0 raw events, as an app that reads the stream itself.
  let text = ''
  let json = ''
  let stop: string | null | undefined
  const types: string[] = []
  for await (const e of await client.messages.create({ ...question, stream: true })) {
    types.push(e.type)
    if (e.type === 'content_block_delta' && e.delta.type === 'text_delta') text += e.delta.text
    if (e.type === 'content_block_delta' && e.delta.type === 'input_json_delta') json += e.delta.partial_json
    if (e.type === 'message_delta') stop = e.delta.stop_reason
  }
  // #1 the same request through MessageStream, which accumulates and parses the tool input.
  const final = await client.messages.stream(question).finalMessage()
  // #2 the follow-up with the tool result, as JSON.
  const answer = await client.messages.create({
    ...question,
    messages: [
      ...question.messages,
      { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_01Hq7VbN2xKc9PzR4sTm6JdE', name: 'get_weather', input: { city: 'Oslo' } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_01Hq7VbN2xKc9PzR4sTm6JdE', content: '{"rain":true}' }] },
    ],
  })
  return { text, json, stop, types, final, answer }
}

const client = () => new Anthropic({ baseURL: server.baseURL.replace(/\/v1$/, ''), apiKey: 'sk-ant-test-not-a-key', maxRetries: 0 })
const chunkCounts = (t: Trace) => t.exchanges.map((x) => (x.outcome.kind === 'response' ? x.outcome.response.body.chunks.length : -1))

test('@anthropic-ai/sdk replays a fork made by meaning: text, tool_use input and stop_reason re-encoded in the stream', async () => {
  const rec = await install({ mode: 'record', trace: 'claude', store })
  const live = await app(client())
  await rec.close()
  assert.equal(live.text, "I'll check the weather in Oslo for you.")
  assert.deepEqual(JSON.parse(live.json), { city: 'Oslo' })

  const source = await store.readTrace('claude')
  const branch = forkTrace(source, {
    name: 'claude-fork',
    sourceDigest: traceDigest(source),
    patches: [
      '#0 llm.output_text="Let me look that up."',
      '#0 llm.tool_call[0].arguments={"city":"Bergen","units":"metric"}',
      '#1 llm.tool_call[0].name=get_forecast',
      '#1 llm.tool_call[0].arguments={"city":"Bergen"}',
      '#1 llm.finish=end_turn',
      '#2 llm.output_text="No umbrella needed."',
    ],
  })
  await store.putTrace(branch)
  assert.deepEqual(chunkCounts(branch), chunkCounts(source))

  const connections = server.connections
  await server.close()
  const rep = await install({ mode: 'replay', trace: 'claude-fork', store })
  const seen = await app(client())
  rep.assertDone()
  await rep.close()
  assert.equal(server.connections, connections)

  assert.deepEqual(seen.types, live.types, 'the same events in the same order (ping included)')
  assert.equal(seen.text, 'Let me look that up.')
  assert.deepEqual(JSON.parse(seen.json), { city: 'Bergen', units: 'metric' })
  assert.equal(seen.stop, 'tool_use')
  const blocks = seen.final.content.map((b) => (b.type === 'tool_use' ? ['tool_use', b.name, b.input] : b.type === 'text' ? ['text', b.text] : [b.type]))
  assert.deepEqual(blocks, [['thinking'], ['text', "I'll check the weather in Oslo for you."], ['tool_use', 'get_forecast', { city: 'Bergen' }]])
  assert.equal(seen.final.stop_reason, 'end_turn')
  assert.deepEqual(seen.final.usage, live.final.usage, 'usage kept')
  assert.deepEqual(
    seen.answer.content.map((b) => (b.type === 'text' ? b.text : b.type)),
    ['No umbrella needed.'],
  )
})
