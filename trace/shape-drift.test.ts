import assert from 'node:assert/strict'
import { test } from 'node:test'
import { gzipSync } from 'node:zlib'
import { buildTrace, chatTurn, itemFromFixture, readExchangeFixture, type TraceItem } from '../e2e/fixtures/fixture-trace.ts'
import { bodyFromBytes } from './body.ts'
import type { Exchange, Trace } from './exchange.ts'
import { compareShapes, jsonShape, MAX_SHAPE_NODES } from './json-shape.ts'
import { compareExchangeShapes, formatShapeDrift, type ShapeSide } from './shape-drift.ts'

const side = (item: TraceItem): ShapeSide => {
  const t = buildTrace('t', [item])
  return { trace: t, exchange: t.exchanges[0] as Exchange }
}
const json = (body: unknown, extra: Partial<TraceItem> = {}): TraceItem => ({ url: 'https://api.test/items/1', body: JSON.stringify(body), ...extra })
const lines = (a: TraceItem, b: TraceItem) => compareExchangeShapes(side(a), side(b)).changes.map(formatShapeDrift)

test('JSON shape: a renamed field is one removed and one added, a retyped field names both types, values do not count', () => {
  const recorded = json({ id: 1, name: 'Ada', price: 10, tags: ['a'], nested: { ok: true } })
  const live = json({ id: 2, title: 'Bob', price: '10.00', tags: ['x', 'y', 'z'], nested: { ok: false } })
  assert.deepEqual(lines(recorded, live), ['removed $.name (string)', 'type changed $.price: number → string', 'added $.title (string)'])
  assert.deepEqual(lines(recorded, json({ id: 99, name: 'Zed', price: 12.5, tags: [], nested: { ok: false } })), [])
})

test('JSON shape: paths inside arrays use [*]; null matches any type; an empty list says nothing about its elements', () => {
  const recorded = json({
    items: [
      { id: 1, price: 3 },
      { id: 2, price: 4, discount: null },
    ],
    next: null,
  })
  assert.deepEqual(lines(recorded, json({ items: [{ id: 3, price: '3' }], next: 'cursor-2' })), [
    'type changed $.items[*].price: number → string',
    'removed $.items[*].discount (null)',
  ])
  assert.deepEqual(lines(recorded, json({ items: [], next: null })), [])
})

test('JSON shape: children of a retyped or removed field are not reported again; the root type is compared', () => {
  assert.deepEqual(lines(json({ user: { a: 1, b: 2 } }), json({ user: 'ada' })), ['type changed $.user: object → string'])
  assert.deepEqual(lines(json({ user: { a: 1, b: 2 } }), json({})), ['removed $.user (object)'])
  assert.deepEqual(lines(json([1, 2]), json({ items: [1, 2] })), ['type changed $: array → object'])
})

test('status, media type and body kind; bodies are not compared once the status changed', () => {
  const recorded = json({ id: 1 })
  const r = compareExchangeShapes(side(recorded), side({ ...json({ error: 'gone' }), status: 404, headers: [['content-type', 'text/html; charset=utf-8']] }))
  assert.deepEqual(r.changes.map(formatShapeDrift), ['status 200 → 404', 'content type application/json → text/html'])
  assert.deepEqual(r.notes, ['bodies not compared: the status changed'])
  // charset and parameters are not the media type
  assert.deepEqual(lines(recorded, { ...json({ id: 2 }), headers: [['content-type', 'application/json; charset=utf-8']] }), [])
  assert.deepEqual(lines(recorded, { ...recorded, body: 'plain words', headers: [['content-type', 'application/json']] }), ['body json → text'])
})

test('a compressed live answer is compared decoded', () => {
  const t = buildTrace('live', [json({ id: 1 })])
  const gz = bodyFromBytes(gzipSync(JSON.stringify({ id: 7, extra: [1] })))
  t.bodies.set(gz.ref.digest, gz.bytes)
  const x = t.exchanges[0] as Exchange
  if (x.outcome.kind !== 'response') throw new Error('fixture')
  x.outcome.response.body = gz.ref
  x.outcome.response.headers = [
    ['content-type', 'application/json'],
    ['content-encoding', 'gzip'],
  ]
  const r = compareExchangeShapes(side(json({ id: 1 })), { trace: t, exchange: x })
  assert.deepEqual(r.changes.map(formatShapeDrift), ['added $.extra (array)'])
})

test('event streams: a dropped event type, a new one, and a field change inside one type’s data', () => {
  const sse = (events: string[]): TraceItem => ({ url: 'https://api.test/events', headers: [['content-type', 'text/event-stream']], chunks: events })
  const recorded = sse([
    'event: progress\ndata: {"pct":10}\n\n',
    'event: progress\ndata: {"pct":90}\n\n',
    'event: done\ndata: {"ok":true,"total":3}\n\n',
    'data: [DONE]\n\n',
  ])
  const live = sse(['event: heartbeat\ndata: {}\n\n', 'event: done\ndata: {"ok":"yes","total":3}\n\n', 'data: [DONE]\n\n'])
  const r = compareExchangeShapes(side(recorded), side(live))
  assert.deepEqual(r.changes, [
    { kind: 'event_type_removed', event: 'progress' },
    { kind: 'event_type_added', event: 'heartbeat' },
    { kind: 'type_changed', path: '$.ok', before: 'boolean', after: 'string', event: 'done' },
  ])
  assert.deepEqual(r.changes.map(formatShapeDrift), [
    'event type "progress" no longer sent',
    'event type "heartbeat" is new',
    'event "done" type changed $.ok: boolean → string',
  ])
  // The same types with other values and other chunking: no drift.
  const again = sse(['event: progress\ndata: {"pct":50}\n\nevent: done\ndata: {"ok":false,"total":9}\n\n', 'data: [DONE]\n\n'])
  assert.deepEqual(compareExchangeShapes(side(recorded), side(again)).changes, [])
})

test('outcome: a recorded answer against a network error, and two errors with the same code', () => {
  const ok = side(json({ id: 1 }))
  const failed = (code: string): ShapeSide => {
    const t: Trace = { meta: { name: 'x', format: 1 }, exchanges: [], bodies: new Map() }
    const x: Exchange = {
      seq: 0,
      request: { method: 'GET', url: 'https://api.test/items/1', headers: [], body: null },
      outcome: { kind: 'error', error: { code, message: code, phase: 'connect' } },
      timing: { startMs: 0, headersMs: 0 },
    }
    return { trace: t, exchange: x }
  }
  assert.deepEqual(compareExchangeShapes(ok, failed('ECONNREFUSED')).changes.map(formatShapeDrift), ['outcome response 200 → ECONNREFUSED during connect'])
  assert.deepEqual(compareExchangeShapes(failed('ECONNRESET'), failed('ECONNRESET')).changes, [])
})

test('model calls are compared by the LLM view: tools called, each tool’s argument schema, finish reason — not the text', () => {
  const call = (args: string, content: string | null = null) =>
    chatTurn({ messages: [{ role: 'user', content: 'weather?' }], content, toolCalls: [{ id: 'call_1', name: 'get_weather', arguments: args }] })
  const recorded = side(call('{"city":"Oslo","days":3}'))
  const sameShape = compareExchangeShapes(recorded, side(call('{"city":"Bergen","days":5}')))
  assert.equal(sameShape.compared, 'llm')
  assert.deepEqual(sameShape.changes, [])
  assert.deepEqual(compareExchangeShapes(recorded, side(call('{"location":"Oslo","days":"3"}'))).changes.map(formatShapeDrift), [
    'tool "get_weather" arguments removed $.city (string)',
    'tool "get_weather" arguments type changed $.days: number → string',
    'tool "get_weather" arguments added $.location (string)',
  ])
  const answered = side(chatTurn({ messages: [{ role: 'user', content: 'weather?' }], content: 'Sunny.' }))
  assert.deepEqual(compareExchangeShapes(recorded, answered).changes.map(formatShapeDrift), [
    'model no longer calls tool "get_weather"',
    'finish reason tool_calls → stop',
  ])
  // Different words, same structure: no drift, though the raw JSON text differs everywhere.
  const a = side(chatTurn({ messages: [{ role: 'user', content: 'hi' }], content: 'Hello there' }))
  const b = side(chatTurn({ messages: [{ role: 'user', content: 'hi' }], content: 'Hi! How can I help?', id: 'chatcmpl-other', created: 1 }))
  assert.deepEqual(compareExchangeShapes(a, b).changes, [])
})

test('a streamed model call (real recording) compared with itself has no drift; with its tool calls gone it has', () => {
  const f = readExchangeFixture('openai/chat-completions-stream-parallel-tool-calls.json')
  const recorded = side(itemFromFixture(f))
  const r = compareExchangeShapes(recorded, side(itemFromFixture(f)))
  assert.equal(r.compared, 'llm')
  assert.deepEqual(r.changes, [])
  const text = readExchangeFixture('openai/chat-completions-stream-include-usage.json')
  const other = compareExchangeShapes(recorded, side(itemFromFixture(text, { url: f.request.url })))
  assert.deepEqual(other.changes.map(formatShapeDrift), ['model no longer calls tool "get_current_weather"', 'finish reason tool_calls → length'])
})

test('bounded: a huge map-like body stops at MAX_SHAPE_NODES and says so; changes are cut at maxChanges', () => {
  const wide: Record<string, number> = {}
  for (let i = 0; i < MAX_SHAPE_NODES + 500; i++) wide[`k${i}`] = i
  const r = compareExchangeShapes(side(json(wide)), side(json({})), { maxChanges: 5 })
  assert.equal(r.truncated, true)
  assert.equal(r.changes.length, 5)
  assert.deepEqual(compareShapes(jsonShape({ a: 1 }), jsonShape({ a: 1 })), [])
})
