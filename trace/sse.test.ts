import assert from 'node:assert/strict'
import { test } from 'node:test'
import { isEventStream, parseSse, sseEventsAsJson } from './sse.ts'

test('parseSse follows the WHATWG rules: comments, CRLF, multi-line data, default type', () => {
  const text =
    ': keep-alive\r\nevent: delta\r\ndata: {"a":1}\r\n\r\ndata: line 1\ndata:line 2\n\nid: 7\nretry: 100\ndata: x\n\nevent: empty\n\ndata: unterminated'
  assert.deepEqual(parseSse(text), [{ event: 'delta', data: '{"a":1}' }, { data: 'line 1\nline 2' }, { data: 'x', id: '7', retry: 100 }])
})

test('chunk boundaries do not matter: same events from differently split bytes', () => {
  const a = 'data: {"choices":[{"delta":{"content":"Hi"}}]}\n\ndata: [DONE]\n\n'
  assert.deepEqual(parseSse(a), parseSse(a.replace(/\n\n/g, '\r\n\r\n')))
  assert.deepEqual(sseEventsAsJson(parseSse(a)), [{ data: { choices: [{ delta: { content: 'Hi' } }] } }, { data: '[DONE]' }])
})

test('isEventStream', () => {
  assert.equal(isEventStream('text/event-stream; charset=utf-8'), true)
  assert.equal(isEventStream('application/json'), false)
  assert.equal(isEventStream(undefined), false)
})
