import assert from 'node:assert/strict'
import { test } from 'node:test'
import { type NestingInput, nestToolCalls } from './tool-nesting.ts'

const http = (seq: number, requestText: string, responseText = ''): NestingInput => ({ seq, requestText, responseText })
const model = (seq: number, calls: Array<{ name: string; arguments: unknown }>, results: Array<{ name?: string; output: string }> = []): NestingInput => ({
  seq,
  model: { calls, results },
  requestText: 'POST https://api.openai.test/v1/chat/completions',
  responseText: '',
})

test('an exchange sits under the model turn whose tool call it answers, and only then', () => {
  const rows = [
    model(0, [{ name: 'check_refund', arguments: { order_id: 'A-1042' } }]),
    http(1, 'POST https://metrics.test/beacon {"event":"model_called"}'),
    http(2, 'GET https://refunds.test/v1/orders/A-1042/refund-check', '{"refundable_cents":8999}'),
    http(3, 'GET https://auth.test/token', '{"token":"abc"}'),
    model(4, [{ name: 'decide_refund', arguments: { amount_usd: 89.99 } }], [{ name: 'check_refund', output: '{"refundable_cents":8999}' }]),
    { seq: 5, mcpTool: 'decide_refund', requestText: 'POST mcp+stdio://payments/tools/call/decide_refund', responseText: '' },
    http(6, 'GET https://cdn.test/logo.png'),
  ]
  assert.deepEqual(
    [...nestToolCalls(rows)],
    [
      [2, { parent: 0, call: 'check_refund' }],
      [5, { parent: 4, call: 'decide_refund' }],
    ],
  )
})

test('an answer the next turn sends back as the result nests even when it carries no argument', () => {
  const rows = [
    model(0, [{ name: 'weather', arguments: { city: 'Oslo' } }]),
    http(1, 'GET https://weather.test/forecast?lat=59.9&lon=10.7', '{"rain":true,"mm":4}'),
    model(2, [], [{ name: 'weather', output: 'The forecast: {"rain":true,"mm":4}' }]),
  ]
  assert.deepEqual([...nestToolCalls(rows)], [[1, { parent: 0, call: 'weather' }]])
})

test('a model turn without tool calls nests nothing; short values do not count as carried', () => {
  const rows = [model(0, []), http(1, 'GET https://api.test/a'), model(2, [{ name: 'f', arguments: { n: 1, s: 'ok' } }]), http(3, 'GET https://api.test/1/ok')]
  assert.equal(nestToolCalls(rows).size, 0)
})
