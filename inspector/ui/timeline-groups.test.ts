import assert from 'node:assert/strict'
import { test } from 'node:test'
import { groupRows } from './timeline-groups.ts'

const model = (seq: number, calls: number, extra = {}) => ({
  seq,
  method: 'POST',
  url: 'https://m.test/v1/chat/completions',
  llm: { toolCalls: Array(calls).fill({}) },
  ...extra,
})
const http = (seq: number, url: string, extra = {}) => ({ seq, method: 'GET', url, status: 200, ...extra })

test('an exchange nests under the model turn the server says it answers, and nothing nests by order alone', () => {
  const rows = [model(0, 1), http(1, 'https://t.test/a'), http(2, 'https://metrics.test/b'), model(3, 0), http(4, 'https://t.test/c')]
  assert.deepEqual(
    groupRows(rows).map((x) => x.parent),
    [undefined, undefined, undefined, undefined, undefined],
  )
  const g = groupRows(rows, new Map([[1, { parent: 0, call: 'lookup' }]]))
  assert.deepEqual(
    g.map((x) => [x.parent, x.call]),
    [
      [undefined, undefined],
      [0, 'lookup'],
      [undefined, undefined],
      [undefined, undefined],
      [undefined, undefined],
    ],
  )
})

test('a repeat after a failure, or an SDK retry, counts attempts; a gap resets the context', () => {
  const g = groupRows([
    http(0, 'https://t.test/a', { status: 503 }),
    http(1, 'https://t.test/a', { error: { code: 'ECONNRESET' }, status: undefined }),
    http(2, 'https://t.test/a'),
    http(3, 'https://t.test/a'),
    model(4, 0, { attempt: 0, status: 429 }),
    model(5, 0, { attempt: 1 }),
    undefined,
    http(7, 'https://t.test/a'),
  ])
  assert.deepEqual(
    g.map((x) => x.attempt),
    [1, 2, 3, 1, 1, 2, 1, 1],
  )
})
