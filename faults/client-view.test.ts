import assert from 'node:assert/strict'
import { test } from 'node:test'
import { gzipSync } from 'node:zlib'
import { headerValue } from '../trace/index.ts'
import { applyAfterResponse, type BufferedResponse } from './client-view.ts'

const enc = new TextEncoder()
const dec = new TextDecoder()
const json = (text: string, headers: Array<[string, string]> = []): BufferedResponse => ({
  status: 201,
  statusText: 'Created',
  headers: [['content-type', 'application/json'], ['content-length', String(enc.encode(text).byteLength)], ...headers],
  body: enc.encode(text),
  trailers: [],
})
const sse = (text: string): BufferedResponse => ({
  status: 200,
  statusText: 'OK',
  headers: [['content-type', 'text/event-stream']],
  body: enc.encode(text),
  trailers: [],
})

test('response_lost: the app gets the failure, whatever the upstream said', () => {
  const r = applyAfterResponse({ do: 'forward-then-fail', error: { code: 'ECONNRESET', message: 'lost', phase: 'response-headers' } }, json('{"id":"s-1"}'))
  assert.equal(r.applied, true)
  assert.deepEqual(r.view, { kind: 'error', error: { code: 'ECONNRESET', message: 'lost', phase: 'response-headers' } })
})

test('schema_drift decodes a gzip body, drifts it, and says the new length without the coding', () => {
  const upstream = json('', [])
  upstream.body = new Uint8Array(gzipSync('{"shipment":{"id":"s-1"}}'))
  upstream.headers = [
    ['content-type', 'application/json'],
    ['content-encoding', 'gzip'],
    ['content-length', String(upstream.body.byteLength)],
  ]
  const r = applyAfterResponse({ do: 'forward-then-drift', changes: [{ op: 'rename', path: '$.shipment.id', to: 'shipment_id' }] }, upstream)
  assert.equal(r.applied, true)
  assert.equal(r.view.kind, 'response')
  if (r.view.kind !== 'response') return
  assert.deepEqual(JSON.parse(dec.decode(r.view.response.body)), { shipment: { shipment_id: 's-1' } })
  assert.equal(headerValue(r.view.response.headers, 'content-encoding'), undefined)
  assert.equal(headerValue(r.view.response.headers, 'content-length'), String(r.view.response.body.byteLength))
  const notJson = applyAfterResponse({ do: 'forward-then-drift', changes: [{ op: 'remove', path: '$.a' }] }, json('<html>'))
  assert.equal(notJson.applied, false)
  // A chunked upstream answer: the drifted body is whole, with one framing (a store refuses both).
  const chunked = applyAfterResponse(
    { do: 'forward-then-drift', changes: [{ op: 'remove', path: '$.a' }] },
    {
      ...json('{"a":1,"b":2}', []),
      headers: [
        ['content-type', 'application/json'],
        ['transfer-encoding', 'chunked'],
      ],
    },
  )
  assert.equal(chunked.view.kind === 'response' && headerValue(chunked.view.response.headers, 'transfer-encoding'), undefined)
  assert.equal(chunked.view.kind === 'response' && headerValue(chunked.view.response.headers, 'content-length'), '7')
})

test('stream_cut ends an event stream cleanly without a content-length; stream_error resets after N events; neither applies past the end', () => {
  const stream = 'data: 1\n\ndata: 2\n\ndata: 3\n\n'
  const cut = applyAfterResponse({ do: 'forward-then-cut', after: { events: 2 } }, sse(stream))
  assert.equal(cut.applied, true)
  assert.equal(cut.view.kind === 'response' && dec.decode(cut.view.response.body), 'data: 1\n\ndata: 2\n\n')
  const err = applyAfterResponse(
    { do: 'forward-then-cut', after: { events: 1 }, error: { code: 'ECONNRESET', message: 'x', phase: 'response-body' } },
    sse(stream),
  )
  assert.equal(err.view.kind, 'error')
  assert.equal(err.view.kind === 'error' && err.view.partial && dec.decode(err.view.partial.body), 'data: 1\n\n')
  assert.equal(applyAfterResponse({ do: 'forward-then-cut', after: { events: 3 } }, sse(stream)).applied, false)
  assert.equal(
    applyAfterResponse({ do: 'forward-then-cut', after: { events: 3 }, error: { code: 'ECONNRESET', message: 'x', phase: 'response-body' } }, sse(stream))
      .applied,
    true,
  )
  const notStream = applyAfterResponse({ do: 'forward-then-cut', after: { events: 1 } }, json('{"a":1}'))
  assert.equal(notStream.applied, false)
  assert.match(notStream.note, /not an event stream/)
  assert.equal(applyAfterResponse({ do: 'forward-then-cut', after: { bytes: 3 } }, json('{"a":1}')).applied, true)
})

test('before-forward actions are refused: they must be carried out before the request is sent', () => {
  assert.throws(() => applyAfterResponse({ do: 'delay', delayMs: 5 }, json('{}')), /before the request is sent/)
})
