/**
 * The real openai SDK against injected faults: provider-shaped 429 and 5xx bodies become the SDK's own error
 * classes, its retry logic waits the retry-after-ms the fault asked for (checked by honours-retry-after on
 * the recorded trace), and a cut stream ends as a success, which is why stream_cut exists.
 * @note Faults are carried out by the lab's executor (LabFaultDispatcher, on the wall clock) until the
 * interceptor and the proxy carry them out themselves.
 */
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import OpenAI from 'openai'
import { checkContracts, FaultPlanner, parseFaults } from 'tool-replay/engine'
import { LabFaultDispatcher, RealClock } from 'tool-replay/lab'
import { fetch } from 'undici'
import { type FakeOpenAiServer, loadFixture, sseEvents, startFakeOpenAi } from './fixtures/openai/fake-openai-server.ts'

const nonStream = loadFixture('chat-completions-nonstream-gpt5nano.json')
const toolStream = loadFixture('chat-completions-stream-parallel-tool-calls.json')
const streamedChunks = sseEvents(toolStream.response.body).filter((e) => e.includes('data: ') && !e.includes('[DONE]')).length

let server: FakeOpenAiServer
before(async () => {
  server = await startFakeOpenAi([
    { match: (r) => r.path === '/v1/chat/completions' && r.json?.stream !== true, fixture: nonStream },
    { match: (r) => r.path === '/v1/chat/completions' && r.json?.stream === true, fixture: toolStream },
  ])
})
after(() => server.close())

/** An SDK client whose requests go through a fresh fault executor with these rules. */
function clientWith(rules: string, maxRetries: number) {
  const dispatcher = new LabFaultDispatcher({
    planner: new FaultPlanner(parseFaults(`seed: 3\nrules:\n${rules}`), { seed: '3' }),
    clock: new RealClock(),
    trace: 'sdk',
  })
  const client = new OpenAI({
    apiKey: 'sk-test',
    baseURL: server.baseURL,
    maxRetries,
    fetch: ((url: string, init: RequestInit) => fetch(url, { ...(init as object), dispatcher })) as unknown as typeof globalThis.fetch,
  })
  return { client, dispatcher }
}

const ask = (client: OpenAI) => client.chat.completions.create({ model: 'gpt-5-nano', messages: [{ role: 'user', content: 'hi' }] })
const stream = (client: OpenAI) => client.chat.completions.create({ model: 'gpt-3.5-turbo', stream: true, messages: [{ role: 'user', content: 'weather?' }] })

describe('the openai SDK under faults', () => {
  test('rate_limit: the SDK retries after retry-after-ms, and honours-retry-after holds on the recorded trace', async () => {
    const { client, dispatcher } = clientWith(
      '  - { id: rl, target: { url: /v1/chat/completions }, fault: rate_limit, first: 1, options: { retryAfterMs: 120, provider: openai } }\n',
      2,
    )
    try {
      const completion = await ask(client)
      assert.equal(completion.object, 'chat.completion')
      const trace = dispatcher.trace
      assert.deepEqual(
        trace.exchanges.map((x) => [x.outcome.kind === 'response' && x.outcome.response.status, x.fault?.rule]),
        [
          [429, 'rl'],
          [200, undefined],
        ],
      )
      const report = checkContracts(trace, parseFaults('rules: []\ncontracts: [honours-retry-after]\n'))
      assert.equal(report.ok, true, report.results[0]?.summary)
      assert.equal(report.results[0]?.summary, '1 response(s) asked the app to wait; every retry waited')
    } finally {
      await dispatcher.close()
    }
  })

  test('rate_limit and server_error bodies become the SDK error classes with the provider fields', async () => {
    const limited = clientWith(
      '  - { id: rl, target: { url: /v1/chat/completions }, fault: rate_limit, options: { retryAfterMs: 1500, provider: openai } }\n',
      0,
    )
    try {
      await assert.rejects(ask(limited.client), (err: unknown) => {
        assert.ok(err instanceof OpenAI.RateLimitError, String(err))
        assert.equal(err.status, 429)
        assert.equal(err.code, 'rate_limit_exceeded')
        assert.equal(err.type, 'requests')
        assert.equal(err.headers?.get('retry-after-ms'), '1500')
        assert.equal(err.headers?.get('retry-after'), '2')
        return true
      })
    } finally {
      await limited.dispatcher.close()
    }
    const broken = clientWith('  - { id: boom, target: { url: /v1/chat/completions }, fault: server_error, options: { status: 503, provider: openai } }\n', 0)
    try {
      await assert.rejects(ask(broken.client), (err: unknown) => err instanceof OpenAI.InternalServerError && err.status === 503 && err.type === 'server_error')
    } finally {
      await broken.dispatcher.close()
    }
  })

  test('stream_cut: the SDK ends the stream early as a success; stream_error makes it throw after N chunks', async () => {
    const full = clientWith('  - { id: never, target: { url: /nothing }, fault: stream_cut, optional: true, options: { afterEvents: 1 } }\n', 0)
    let all = 0
    for await (const _ of await stream(full.client)) all++
    await full.dispatcher.close()
    assert.equal(all, streamedChunks)
    const cut = clientWith('  - { id: cut, target: { url: /v1/chat/completions }, fault: stream_cut, options: { afterEvents: 2 } }\n', 0)
    let got = 0
    for await (const _ of await stream(cut.client)) got++
    await cut.dispatcher.close()
    assert.equal(got, 2, 'two events, then a clean end the SDK does not complain about')
    assert.ok(got < all)
    const broken = clientWith('  - { id: reset, target: { url: /v1/chat/completions }, fault: stream_error, options: { afterEvents: 2 } }\n', 0)
    let before = 0
    await assert.rejects(async () => {
      for await (const _ of await stream(broken.client)) before++
    })
    await broken.dispatcher.close()
    assert.equal(before, 2)
  })
})
