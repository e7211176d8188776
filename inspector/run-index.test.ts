import assert from 'node:assert/strict'
import { test } from 'node:test'
import { realtimeTrace, weatherConversation } from '../e2e/fixtures/realtime-session.ts'
import { createMemoryStore } from '../store/index.ts'
import { bodyFromBytes, bodyFromChunks, type Exchange, type Trace } from '../trace/index.ts'
import { RunIndexes, search } from './run-index.ts'
import { summarize } from './run-summary.ts'

const enc = (s: string) => new TextEncoder().encode(s)
const JSON_TYPE: Array<[string, string]> = [['content-type', 'application/json']]
const CHAT = 'https://api.openai.test/v1/chat/completions'

/** A run: a model turn that asks for check_refund (OpenRouter-style usage with a cost), the refund call, an
 * unrelated beacon at the same time, a 500, and a streamed model turn whose first chunk comes at 50 ms. */
function run(): Trace {
  const bodies = new Map<string, Uint8Array>()
  const put = (b: ReturnType<typeof bodyFromBytes>) => {
    bodies.set(b.ref.digest, b.bytes)
    return b.ref
  }
  const x = (
    seq: number,
    method: string,
    url: string,
    req: string | null,
    res: ReturnType<typeof put>,
    status: number,
    startMs: number,
    headersMs: number,
    headers = JSON_TYPE,
  ): Exchange => ({
    seq,
    request: { method, url, headers: JSON_TYPE, body: req === null ? null : put(bodyFromBytes(enc(req))) },
    outcome: { kind: 'response', response: { status, statusText: '', headers, body: res, trailers: [] } },
    timing: { startMs, headersMs },
  })
  const ask = JSON.stringify({ model: 'gpt-4.1-mini', messages: [{ role: 'user', content: 'Refund order A-1042? The jar is cracked.' }], tools: [] })
  const answer = JSON.stringify({
    object: 'chat.completion',
    model: 'gpt-4.1-mini',
    choices: [
      {
        index: 0,
        finish_reason: 'tool_calls',
        message: { role: 'assistant', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'check_refund', arguments: '{"order_id":"A-1042"}' } }] },
      },
    ],
    usage: { prompt_tokens: 50, completion_tokens: 10, total_tokens: 60, cost: 0.0012 },
  })
  const ask2 = JSON.stringify({
    model: 'gpt-4.1-mini',
    stream: true,
    messages: [
      { role: 'user', content: 'x' },
      { role: 'tool', tool_call_id: 'c1', content: '{"refundable_cents":8999}' },
    ],
  })
  const sse = (o: unknown) => enc(`data: ${JSON.stringify(o)}\n\n`)
  const stream = bodyFromChunks([
    { bytes: sse({ model: 'gpt-4.1-mini', choices: [{ index: 0, delta: { content: 'Approve ' } }] }), atMs: 50 },
    { bytes: sse({ model: 'gpt-4.1-mini', choices: [{ index: 0, delta: { content: 'it.' }, finish_reason: 'stop' }] }), atMs: 180 },
    { bytes: sse({ model: 'gpt-4.1-mini', choices: [], usage: { prompt_tokens: 70, completion_tokens: 3, total_tokens: 73 } }), atMs: 200 },
    { bytes: enc('data: [DONE]\n\n'), atMs: 201 },
  ])
  bodies.set(stream.ref.digest, stream.bytes)
  const exchanges = [
    x(0, 'POST', CHAT, ask, put(bodyFromBytes(enc(answer))), 200, 0, 300),
    x(1, 'GET', 'https://refunds.test/v1/orders/A-1042/refund-check', null, put(bodyFromBytes(enc('{"refundable_cents":8999}'))), 200, 310, 40),
    x(2, 'POST', 'https://metrics.test/beacon', '{"event":"tick"}', put(bodyFromBytes(enc('{}'))), 200, 320, 10),
    x(3, 'GET', 'https://refunds.test/v1/health', null, put(bodyFromBytes(enc('{"error":"down"}'))), 500, 400, 5),
    x(4, 'POST', CHAT, ask2, stream.ref, 200, 420, 20, [['content-type', 'text/event-stream']]),
  ]
  return { meta: { name: 'agent', format: 1 }, exchanges, bodies }
}

test('search across a run: text of URLs, bodies, model turns and tool calls; fields; filters', async () => {
  const store = createMemoryStore()
  await store.putTrace(run())
  const index = await new RunIndexes().of(await store.openTrace('agent'))
  const seqs = (q: string, ...f: Array<'model' | 'tool' | 'mcp' | 'errors' | 'faults' | 'slow' | 'live'>) => search(index, q, f).seqs
  assert.deepEqual(seqs('a-1042'), [0, 1], 'the model turn (its input and tool call) and the call that carries the id')
  assert.deepEqual(seqs('cracked'), [0])
  assert.deepEqual(seqs('approve it.'), [4], 'the answer of a streamed turn, reassembled')
  assert.deepEqual(seqs('approve cracked'), [], 'every term must match the same exchange')
  assert.deepEqual(seqs('order cracked'), [0])
  assert.deepEqual(seqs('"order cracked"'), [], 'a quoted phrase is one term')
  assert.deepEqual(seqs('"the jar is"'), [0])
  assert.deepEqual(seqs('status:500'), [3])
  assert.deepEqual(seqs('tool:check_refund'), [0, 1], 'the turn that called it and the call nested under it')
  assert.deepEqual(seqs('', 'model'), [0, 4])
  assert.deepEqual(seqs('', 'errors'), [3])
  assert.deepEqual(seqs('refunds', 'tool'), [1], 'the beacon and the health check answer no tool call')
  assert.deepEqual(seqs('', 'slow'), [0], 'the slowest tenth (at least one)')
  assert.equal(index.rows[1]?.parent?.call, 'check_refund')
  assert.equal(index.rows[2]?.parent, undefined)
})

test('search in a Realtime session: a model row found by what the client said, the answers and the tool it called', async () => {
  const store = createMemoryStore()
  await store.putTrace(realtimeTrace('voice', [weatherConversation()]))
  const index = await new RunIndexes().of(await store.openTrace('voice'))
  const seqs = (q: string, ...f: Array<'model' | 'tool'>) => search(index, q, f).seqs
  assert.equal(index.rows[0]?.kind, 'model')
  assert.deepEqual(seqs('', 'model'), [0])
  assert.deepEqual(seqs('"weather in paris?"'), [0], 'the first item the client sent, not only the last')
  assert.deepEqual(seqs('"sunny in paris"'), [0])
  assert.deepEqual(seqs('tool:get_weather'), [0])
  assert.deepEqual(seqs('"raining"'), [])
})

test('the summary: by model with tokens, the reported cost and time to first token; by tool; lanes for what overlaps', async () => {
  const store = createMemoryStore()
  await store.putTrace(run())
  const s = summarize(await new RunIndexes().of(await store.openTrace('agent')))
  assert.equal(s.exchanges, 5)
  assert.equal(s.errors, 1)
  assert.deepEqual(s.models, [
    { model: 'gpt-4.1-mini', calls: 2, inputTokens: 120, outputTokens: 13, withUsage: 2, cost: 0.0012, ttftMs: 50, medianMs: 250.5, totalMs: 501, errors: 0 },
  ])
  assert.deepEqual(s.tools, [{ tool: 'check_refund', called: 1, runs: 1, errors: 0, totalMs: 40 }])
  // #1 (310-350) and #2 (320-330) overlap: two lanes, the peak at 320 ms.
  assert.equal(s.waterfall.lanes, 2)
  assert.equal(s.waterfall.peakAtMs, 320)
  assert.deepEqual(
    s.waterfall.bars.map((b) => [b[0], b[4]]),
    [
      [0, 0],
      [1, 0],
      [2, 1],
      [3, 0],
      [4, 0],
    ],
  )
  assert.equal(s.durationMs, 621, 'the stream ends 201 ms after it started at 420')
})
