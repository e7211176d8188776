import assert from 'node:assert/strict'
import { test } from 'node:test'
import { LINE_EDGE_BYTES } from '../trace/index.ts'
import { longLineId } from './framing.ts'

/** A dropped line as the reader reports it: its ends. */
const long = (text: string) => ({ bytes: text.length, head: text.slice(0, LINE_EDGE_BYTES), tail: text.slice(-LINE_EDGE_BYTES) })
const filler = 'x'.repeat(5000)

test('the id of a dropped line, read from its ends: an answer or a request, in the SDK order or id first', () => {
  assert.equal(longLineId(long(`{"result":{"content":[{"type":"text","text":"${filler}"}]},"jsonrpc":"2.0","id":7}`), 'answer'), 7)
  assert.equal(longLineId(long(`{"jsonrpc":"2.0","id":"a-1","result":{"text":"${filler}"}}`), 'answer'), 'a-1')
  const request = `{"method":"tools/call","params":{"name":"save","arguments":{"text":"${filler}"}},"jsonrpc":"2.0","id":3}`
  assert.equal(longLineId(long(request), 'request'), 3)
  assert.equal(longLineId(long(request), 'answer'), undefined, 'a request is not an answer (its id is in the other direction)')
  assert.equal(longLineId(long(`{"result":{"text":"${filler}"},"jsonrpc":"2.0","id":7}`), 'request'), undefined)
})

test('an id nested in the result, or none at either end, is not taken', () => {
  assert.equal(longLineId(long(`{"result":{"items":[{"id":9,"t":"${filler}"}],"last":{"id":4}}}`), 'answer'), undefined)
  assert.equal(longLineId(long(`{"jsonrpc":"2.0","result":{"t":"${filler}"}}`), 'answer'), undefined)
})
