import assert from 'node:assert/strict'
import { test } from 'node:test'
import { realtimeTrace, weatherConversation } from '../e2e/fixtures/realtime-session.ts'
import { createMemoryStore, type TraceReader } from '../store/index.ts'
import { bodyFromBytes, bodyFromChunks, type Exchange, type Trace } from '../trace/index.ts'
import { curlOf, exchangeView } from './exchange-view.ts'
import { StatsCache, timelinePage } from './run-view.ts'

const enc = (s: string) => new TextEncoder().encode(s)
const CHAT_REQUEST = JSON.stringify({ model: 'gpt-4.1-mini', messages: [{ role: 'user', content: 'Ship order o-1' }], tools: [] })
const CHAT_ANSWER = JSON.stringify({
  object: 'chat.completion',
  model: 'gpt-4.1-mini',
  choices: [
    {
      index: 0,
      finish_reason: 'tool_calls',
      message: { role: 'assistant', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'ship', arguments: '{"id":12345678901234567890}' } }] },
    },
  ],
})

/** A trace: a model call, an event stream in three chunks, a binary body, then `extra` plain exchanges. */
function trace(extra: number): Trace {
  const bodies = new Map<string, Uint8Array>()
  const put = (b: { ref: Exchange['request']['body']; bytes: Uint8Array }) => {
    if (b.ref) bodies.set(b.ref.digest, b.bytes)
    return b.ref as NonNullable<Exchange['request']['body']>
  }
  const json = [['content-type', 'application/json']] as Array<[string, string]>
  const x = (seq: number, method: string, url: string, req: string | null, res: ReturnType<typeof put>, headers: Array<[string, string]>): Exchange => ({
    seq,
    request: { method, url, headers: [['authorization', '[REDACTED]'], ...json], body: req === null ? null : put(bodyFromBytes(enc(req))) },
    outcome: { kind: 'response', response: { status: 200, statusText: 'OK', headers, body: res, trailers: [] } },
    timing: { startMs: seq * 10, headersMs: 5 },
  })
  const sse = put(
    bodyFromChunks([
      { bytes: enc('event: a\ndata: 1\n\nevent: b\n'), atMs: 10 },
      { bytes: enc('data: 2\n\n'), atMs: 20 },
      { bytes: enc('data: 3\n\n'), atMs: 35 },
    ]),
  )
  const exchanges = [
    x(0, 'POST', 'https://api.openai.test/v1/chat/completions', CHAT_REQUEST, put(bodyFromBytes(enc(CHAT_ANSWER))), json),
    x(1, 'GET', 'https://api.test/events', null, sse, [['content-type', 'text/event-stream']]),
    x(2, 'GET', 'https://api.test/blob?key=[REDACTED]', null, put(bodyFromBytes(new Uint8Array([0, 1, 2, 255]))), [
      ['content-type', 'application/octet-stream'],
    ]),
  ]
  for (let i = 0; i < extra; i++) exchanges.push(x(3 + i, 'POST', 'https://api.test/items', `{"i":${i}}`, put(bodyFromBytes(enc(`{"n":${i}}`))), json))
  return { meta: { name: 't', format: 1 }, exchanges, bodies }
}

/** The reader, counting which bodies are read. */
function spied(reader: TraceReader, uses: string[]): TraceReader {
  return new Proxy(reader, {
    get(target, prop) {
      if (prop === 'bodyBytes')
        return (ref: unknown, use: string) => {
          uses.push(use)
          return target.bodyBytes(ref as never, use)
        }
      const v = Reflect.get(target, prop, target)
      return typeof v === 'function' ? v.bind(target) : v
    },
  })
}

test("a timeline page reads the model call as a model turn and loads only its own exchanges' bodies", async () => {
  const store = createMemoryStore()
  await store.putTrace(trace(500))
  const uses: string[] = []
  const reader = spied(await store.openTrace('t'), uses)
  const rows = await timelinePage(reader, 0, 3)
  assert.deepEqual(
    rows.map((r) => r.seq),
    [0, 1, 2],
  )
  assert.equal(rows[0]?.llm?.toolCalls[0]?.name, 'ship')
  assert.equal(rows[1]?.bodyMs, 35)
  assert.ok(
    uses.every((u) => /^exchange #[0-2] /.test(u)),
    uses.join(', '),
  )
  const later = await timelinePage(reader, 400, 50)
  assert.deepEqual([later[0]?.seq, later.at(-1)?.seq], [400, 449])
})

test('statistics count model turns, hosts and duration, once per complete trace', async () => {
  const store = createMemoryStore()
  await store.putTrace(trace(2))
  const cache = new StatsCache(store)
  const reader = await store.openTrace('t')
  const s = await cache.of(reader)
  assert.equal(s.modelTurns, 1)
  assert.deepEqual(s.hosts, ['api.openai.test', 'api.test'])
  // The stream (#1) ends last: started at 10 ms, its last chunk 35 ms after its request.
  assert.equal(s.durationMs, 45)
  assert.equal(cache.known(reader.info.id), s)
})

test('a Realtime session is a model row holding its responses, and counts a model turn per response', async () => {
  const store = createMemoryStore()
  await store.putTrace(realtimeTrace('voice', [weatherConversation()]))
  const reader = await store.openTrace('voice')
  const [row] = await timelinePage(reader, 0, 1)
  assert.equal(row?.kind, 'model')
  assert.equal(row?.llm?.api, 'openai.realtime')
  assert.deepEqual(
    row?.llm?.responses?.map((r) => [r.outputText, r.toolCalls.map((c) => c.name)]),
    [
      ['Let me check the weather.', ['get_weather']],
      ['It is 21°C and sunny in Paris.', []],
    ],
  )
  const s = await new StatsCache(store).of(reader)
  assert.equal(s.modelTurns, 2)
  assert.deepEqual(s.modelTurnSeqs, [0])
})

test('the exchange view: events with the chunk each ended in, binary as hex, redaction marked, numbers kept as text', async () => {
  const store = createMemoryStore()
  await store.putTrace(trace(0))
  const reader = await store.openTrace('t')
  const sse = await exchangeView(reader, 1)
  assert.equal(sse.response?.body.kind, 'sse')
  assert.deepEqual(
    sse.response?.body.events?.map((e) => [e.event ?? '', e.data, e.chunk, e.atMs]),
    [
      ['a', '1', 0, 10],
      ['b', '2', 1, 20],
      ['', '3', 2, 35],
    ],
  )
  const bin = await exchangeView(reader, 2)
  assert.equal(bin.response?.body.kind, 'binary')
  assert.equal(bin.response?.body.hex, '000102ff')
  assert.deepEqual(bin.redacted, ['request header authorization', 'url query key'])
  const model = await exchangeView(reader, 0)
  assert.equal(model.response?.body.kind, 'json')
  assert.ok(model.response?.body.text?.includes('12345678901234567890'), 'the body text keeps the exact number for the page')
  assert.equal(model.llm?.toolCalls[0]?.argumentsText, '{"id":12345678901234567890}')
})

test('copy as curl quotes for the shell and leaves redacted values visible', () => {
  const x = trace(0).exchanges[0] as Exchange
  const curl = curlOf(x, enc("{'a': 1}"))
  assert.equal(
    curl,
    `curl -X POST 'https://api.openai.test/v1/chat/completions' -H 'authorization: [REDACTED]' -H 'content-type: application/json' --data-binary '{'\\''a'\\'': 1}'`,
  )
})

test('copy as curl points at a file for a body with control bytes (a gRPC message), instead of pasting them', () => {
  const x = trace(0).exchanges[0] as Exchange
  const framed = new Uint8Array([0, 0, 0, 0, 3, ...enc('{}\n')])
  assert.match(curlOf(x, framed), / --data-binary @body-0\.bin {2}# 8 bytes: save the request body from the page$/)
  assert.match(curlOf(x, enc('{"a":\t1}\n')), /--data-binary '\{"a":\t1\}\n'$/)
})
