/**
 * The real openai SDK under injected faults, through both capture paths (the interceptor in-process, and
 * the proxy reached through undici's ProxyAgent): provider-shaped 429 and 5xx bodies become the SDK's own
 * error classes, its retry logic waits the retry-after-ms the fault asked for (checked by
 * honours-retry-after on the recorded trace), a cut stream ends as a success (which is why stream_cut
 * exists) and a stream error throws after N chunks.
 */
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import OpenAI from 'openai'
import { checkContracts, parseFaults } from 'tool-replay/faults'
import { type FakeOpenAiServer, loadFixture, sseEvents, startFakeOpenAi } from './fixtures/openai/fake-openai-server.ts'
import { CAPTURE_PATHS, faultedRun } from './support/fault-paths.ts'

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

const ask = (client: OpenAI) => client.chat.completions.create({ model: 'gpt-5-nano', messages: [{ role: 'user', content: 'hi' }] })
const stream = (client: OpenAI) => client.chat.completions.create({ model: 'gpt-3.5-turbo', stream: true, messages: [{ role: 'user', content: 'weather?' }] })

for (const path of CAPTURE_PATHS) {
  describe(`the openai SDK under faults, through the ${path}`, () => {
    /** An SDK client whose requests go through a faulted run with these rules. */
    async function clientWith(rules: unknown[], maxRetries: number) {
      const run = await faultedRun(path, 'sdk', { seed: 3, rules })
      return { client: new OpenAI({ apiKey: 'sk-test', baseURL: server.baseURL, maxRetries, fetch: run.fetch }), run }
    }

    test('rate_limit: the SDK retries after retry-after-ms, and honours-retry-after holds on the recorded trace', async () => {
      const before = server.requests.length
      const { client, run } = await clientWith(
        [{ id: 'rl', target: { url: '/v1/chat/completions' }, fault: 'rate_limit', first: 1, options: { retryAfterMs: 120 } }],
        2,
      )
      const completion = await ask(client)
      const trace = await run.close()
      assert.equal(completion.object, 'chat.completion')
      assert.equal(server.requests.length, before + 1, 'the 429 never reached the provider')
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
    })

    test('rate_limit and server_error bodies become the SDK error classes with the provider fields', async () => {
      const limited = await clientWith(
        [{ id: 'rl', target: { url: '/v1/chat/completions' }, fault: 'rate_limit', options: { retryAfterMs: 1500, provider: 'openai' } }],
        0,
      )
      await assert.rejects(ask(limited.client), (err: unknown) => {
        assert.ok(err instanceof OpenAI.RateLimitError, String(err))
        assert.equal(err.status, 429)
        assert.equal(err.code, 'rate_limit_exceeded')
        assert.equal(err.type, 'requests')
        assert.equal(err.headers?.get('retry-after-ms'), '1500')
        assert.equal(err.headers?.get('retry-after'), '2')
        return true
      })
      await limited.run.close()
      const broken = await clientWith(
        [{ id: 'boom', target: { url: '/v1/chat/completions' }, fault: 'server_error', options: { status: 503, provider: 'openai' } }],
        0,
      )
      await assert.rejects(ask(broken.client), (err: unknown) => err instanceof OpenAI.InternalServerError && err.status === 503 && err.type === 'server_error')
      await broken.run.close()
    })

    test('stream_cut: the SDK ends the stream early as a success; stream_error makes it throw after N chunks', async () => {
      const full = await clientWith([{ id: 'never', target: { url: '/nothing' }, fault: 'stream_cut', optional: true, options: { afterEvents: 1 } }], 0)
      let all = 0
      for await (const _ of await stream(full.client)) all++
      await full.run.close()
      assert.equal(all, streamedChunks)
      const cut = await clientWith([{ id: 'cut', target: { url: '/v1/chat/completions' }, fault: 'stream_cut', options: { afterEvents: 2 } }], 0)
      let got = 0
      for await (const _ of await stream(cut.client)) got++
      const cutTrace = await cut.run.close()
      assert.equal(got, 2, 'two events, then a clean end the SDK does not complain about')
      assert.ok(got < all)
      assert.equal(cutTrace.exchanges[0]?.fault?.kind, 'stream_cut')
      const broken = await clientWith([{ id: 'reset', target: { url: '/v1/chat/completions' }, fault: 'stream_error', options: { afterEvents: 2 } }], 0)
      let before = 0
      await assert.rejects(async () => {
        for await (const _ of await stream(broken.client)) before++
      })
      await broken.run.close()
      assert.equal(before, 2)
    })
  })
}
