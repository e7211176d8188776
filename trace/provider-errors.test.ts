import assert from 'node:assert/strict'
import { test } from 'node:test'
import { headerValue } from './header-pairs.ts'
import { parseJson } from './json-codec.ts'
import { providerErrorResponse, providerFor } from './provider-errors.ts'

test('OpenAI and Anthropic error bodies have the shapes their SDKs read; retry-after is whole seconds rounded up', () => {
  const openai = providerErrorResponse('openai', 429, { retryAfterMs: 1500, requestId: 'req_1', rule: 'rl' })
  assert.deepEqual(parseJson(new TextDecoder().decode(openai.body)), {
    error: { message: 'Rate limit reached for requests. Please try again later.', type: 'requests', param: null, code: 'rate_limit_exceeded' },
  })
  assert.equal(headerValue(openai.headers, 'retry-after'), '2')
  assert.equal(headerValue(openai.headers, 'retry-after-ms'), '1500')
  assert.equal(headerValue(openai.headers, 'x-request-id'), 'req_1')
  assert.equal(headerValue(openai.headers, 'content-length'), String(openai.body.byteLength))
  const anthropic = providerErrorResponse('anthropic', 529, { requestId: 'req_2', rule: 'o' })
  assert.deepEqual(parseJson(new TextDecoder().decode(anthropic.body)), {
    type: 'error',
    error: { type: 'overloaded_error', message: 'Overloaded' },
    request_id: 'req_2',
  })
  assert.equal(headerValue(anthropic.headers, 'request-id'), 'req_2')
  assert.equal(headerValue(anthropic.headers, 'retry-after'), undefined)
  assert.equal(anthropic.status, 529)
})

test('the provider follows the host', () => {
  assert.equal(providerFor('https://api.openai.com/v1/chat/completions'), 'openai')
  assert.equal(providerFor('https://x.openai.azure.com/openai/deployments'), 'openai')
  assert.equal(providerFor('https://api.anthropic.com/v1/messages'), 'anthropic')
  assert.equal(providerFor('http://127.0.0.1:9/x'), 'generic')
})
