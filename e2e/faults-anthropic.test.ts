/**
 * The real Anthropic SDK against provider-shaped faults, through both capture paths: a 429 becomes
 * RateLimitError with `type: rate_limit_error` and the request id, a 529 becomes OverloadedError, and a
 * retry waits the retry-after-ms the fault asked for.
 * @note The upstream is a local stand-in that answers every Messages call with one fixed message.
 */
import assert from 'node:assert/strict'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, describe, test } from 'node:test'
import Anthropic from '@anthropic-ai/sdk'
import { checkContracts, parseFaults } from 'tool-replay/faults'
import { CAPTURE_PATHS, type CapturePath, faultedRun } from './support/fault-paths.ts'

const MESSAGE = {
  id: 'msg_01',
  type: 'message',
  role: 'assistant',
  model: 'claude-test',
  content: [{ type: 'text', text: 'Hello.' }],
  stop_reason: 'end_turn',
  stop_sequence: null,
  usage: { input_tokens: 3, output_tokens: 2 },
}

let server: http.Server
let baseURL: string
before(async () => {
  server = http.createServer((req, res) => {
    req.resume()
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json', 'request-id': 'req_upstream' })
      res.end(JSON.stringify(MESSAGE))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})
after(() => new Promise<void>((resolve) => server.close(() => resolve())))

async function clientWith(path: CapturePath, rule: Record<string, unknown>, maxRetries: number) {
  const run = await faultedRun(path, 'anthropic', { seed: 8, rules: [rule] })
  const client = new Anthropic({ apiKey: 'sk-ant-test', baseURL, maxRetries, fetch: run.fetch })
  return { client, run }
}

const ask = (client: Anthropic) => client.messages.create({ model: 'claude-test', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] })

for (const path of CAPTURE_PATHS) {
  describe(`the Anthropic SDK under faults, through the ${path}`, () => {
    test('429 is RateLimitError with the provider fields; 529 is OverloadedError', async () => {
      const limited = await clientWith(
        path,
        { id: 'rl', target: { url: '/v1/messages' }, fault: 'rate_limit', options: { retryAfterMs: 3000, provider: 'anthropic' } },
        0,
      )
      try {
        await assert.rejects(ask(limited.client), (err: unknown) => {
          assert.ok(err instanceof Anthropic.RateLimitError, String(err))
          assert.equal(err.status, 429)
          assert.equal(err.type, 'rate_limit_error')
          assert.match(String(err.requestID), /^req_trfault_[0-9a-f]+$/)
          assert.equal(err.headers?.get('retry-after'), '3')
          return true
        })
      } finally {
        await limited.run.close()
      }
      const overloaded = await clientWith(
        path,
        { id: 'busy', target: { url: '/v1/messages' }, fault: 'server_error', options: { status: 529, provider: 'anthropic' } },
        0,
      )
      try {
        await assert.rejects(
          ask(overloaded.client),
          (err: unknown) => err instanceof Anthropic.OverloadedError && err.status === 529 && err.type === 'overloaded_error',
        )
      } finally {
        await overloaded.run.close()
      }
    })

    test('the SDK retries after retry-after-ms and gets the message; the trace honours Retry-After', async () => {
      const { client, run } = await clientWith(
        path,
        { id: 'rl', target: { url: '/v1/messages' }, fault: 'rate_limit', first: 1, options: { retryAfterMs: 150, provider: 'anthropic' } },
        2,
      )
      const message = await ask(client)
      const trace = await run.close()
      assert.equal(message.id, 'msg_01')
      assert.deepEqual(
        trace.exchanges.map((x) => x.outcome.kind === 'response' && x.outcome.response.status),
        [429, 200],
      )
      assert.equal(checkContracts(trace, parseFaults('rules: []\ncontracts: [honours-retry-after]\n')).ok, true)
    })
  })
}
