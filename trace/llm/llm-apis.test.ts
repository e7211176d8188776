/**
 * The LLM view and `llm.*` patches of Gemini generateContent (recordings from googleapis/js-genai), Bedrock
 * Converse and ConverseStream (bodies and a live event stream capture from vercel/ai), Ollama's native API
 * (NDJSON), Groq's streamed usage and the Agents SDK's handoffs.
 */
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { test } from 'node:test'
import { buildTrace, type TraceItem } from '../../e2e/fixtures/fixture-trace.ts'
import { mulberry32, mutate } from '../../e2e/fixtures/json-mutation.ts'
import { decodeEventStream, encodeEventStreamFrame, encodeEventStreamHeaders } from '../eventstream.ts'
import type { Exchange, Trace } from '../exchange.ts'
import { parseJson } from '../json-codec.ts'
import { parsePatchSpec } from '../patch.ts'
import { applyLlmPatch, type LlmPatchAction } from './llm-patch.ts'
import { llmView, readLlmView } from './llm-view.ts'
import { llmTimeline } from './timeline.ts'

const fixture = (path: string) => readFileSync(new URL(`../../e2e/fixtures/${path}`, import.meta.url), 'utf8')
const viewOf = (t: Trace, i = 0) => llmView(t, t.exchanges[i] as Exchange)

// ---- Gemini ---------------------------------------------------------------------------------------------------

interface GenaiRecording {
  interactions: Array<{ request: { url: string; bodySegments: unknown[] }; response: { headers: Record<string, string>; bodySegments: unknown[] } }>
}
const geminiStream = parseJson(fixture('gemini/stream-function-call-loop.json')) as GenaiRecording
const geminiJson = parseJson(fixture('gemini/json-function-call-loop.json')) as GenaiRecording

function geminiItem(rec: GenaiRecording, turn: number, stream: boolean): TraceItem {
  const it = rec.interactions[turn] as GenaiRecording['interactions'][number]
  return {
    method: 'POST',
    url: `https://generativelanguage.googleapis.com${it.request.url}`,
    requestHeaders: [['content-type', 'application/json']],
    requestBody: JSON.stringify(it.request.bodySegments[0]),
    headers: [['content-type', stream ? 'text/event-stream' : 'application/json; charset=UTF-8']],
    chunks: stream ? it.response.bodySegments.map((s) => `data: ${JSON.stringify(s)}\r\n\r\n`) : [JSON.stringify(it.response.bodySegments[0], null, 2)],
  }
}

test('Gemini generateContent (recorded): model from the path, function call, function response sent back, answer, usage', () => {
  const t = buildTrace('g', [geminiItem(geminiJson, 0, false), geminiItem(geminiJson, 1, false)])
  const first = viewOf(t, 0)
  assert.equal(first?.api, 'google.gemini')
  assert.equal(first?.stream, false)
  assert.equal(first?.requestModel, 'gemini-2.0-flash')
  assert.deepEqual(first?.tools, ['customDivide'])
  assert.deepEqual(
    first?.toolCalls.map((c) => [c.index, c.name, c.arguments]),
    [[0, 'customDivide', { denominator: 2, numerator: 10 }]],
  )
  assert.equal(first?.finish, 'STOP')
  assert.deepEqual(first?.usage, { input: 17, output: 6, total: 23 })
  const second = viewOf(t, 1)
  assert.deepEqual(second?.toolResults, [{ callId: '', name: 'customDivide', output: '{"output":42}' }])
  assert.equal(second?.input[1]?.toolCalls?.[0]?.name, 'customDivide')
  assert.equal(second?.outputText, "I've divided 10 by 2 using the customDivide function, and the result is 42.\n")
})

test('Gemini alt=sse stream (recorded): chunks reassembled, and llm.output_text re-split over the recorded text parts', () => {
  const t = buildTrace('g', [geminiItem(geminiStream, 1, true)])
  const v = viewOf(t)
  assert.equal(v?.stream, true)
  assert.equal(v?.events, 4)
  assert.match(v?.outputText ?? '', /^I cannot fulfill this request\. .* returns 42\.\n$/)
  assert.equal(v?.usage?.total !== undefined, true)
  const patched = patch(t, '#0 llm.output_text="Five."')
  assert.equal(patched.chunks.length, 4, 'as many chunks as recorded')
  const text = patched.chunks.map((c) => new TextDecoder().decode(c.bytes)).join('')
  assert.ok(
    text
      .split('\r\n\r\n')
      .slice(0, 4)
      .every((e) => e.startsWith('data: ')),
    'still data: events ending in CRLF CRLF',
  )
  const after = withBody(t, patched.chunks)
  assert.equal(viewOf(after)?.outputText, 'Five.')
})

// ---- Bedrock --------------------------------------------------------------------------------------------------

const CONVERSE_URL = 'https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-3-5-sonnet-20241022-v2%3A0/converse'
const liveStream = Buffer.from((parseJson(fixture('bedrock/converse-stream-live.json')) as { response: { bodyBase64: string } }).response.bodyBase64, 'base64')
const frames = () => decodeEventStream(new Uint8Array(liveStream)).frames.map((f) => liveStream.subarray(f.offset, f.offset + f.length))

function converseItem(path: string, body: unknown, chunks: Array<string | Uint8Array>, stream: boolean): TraceItem {
  return {
    method: 'POST',
    url: CONVERSE_URL.replace(/\/converse$/, path),
    requestHeaders: [
      ['content-type', 'application/json'],
      ['amz-sdk-request', 'attempt=2; max=3'],
    ],
    requestBody: JSON.stringify(body),
    headers: [['content-type', stream ? 'application/vnd.amazon.eventstream' : 'application/json']],
    chunks,
  }
}

const ASK = { messages: [{ role: 'user', content: [{ text: 'What are R1 and C1?' }] }], toolConfig: { tools: [{ toolSpec: { name: 'get_resistor_value' } }] } }

test('Bedrock Converse JSON (recorded): model id decoded from the path, parallel tool uses, usage, attempt from amz-sdk-request', () => {
  const t = buildTrace('b', [converseItem('/converse', ASK, [fixture('bedrock/converse-parallel-tool-calls.json')], false)])
  const v = viewOf(t)
  assert.equal(v?.api, 'aws.bedrock.converse')
  assert.equal(v?.requestModel, 'anthropic.claude-3-5-sonnet-20241022-v2:0')
  assert.equal(v?.attempt, 1)
  assert.equal(v?.outputText, "Sure! I'll look up both values simultaneously right away!")
  assert.deepEqual(
    v?.toolCalls.map((c) => [c.index, c.id, c.name, c.arguments]),
    [
      [1, 'tooluse_hr5juciYZJwUHpRczsw13R', 'get_resistor_value', { ref: 'R1' }],
      [2, 'tooluse_AZHw3Ym0S07qOv5NlXj9iJ', 'get_capacitor_value', { ref: 'C1' }],
    ],
  )
  assert.equal(v?.finish, 'tool_use')
  assert.deepEqual(v?.usage, { input: 694, output: 110, total: 804, cachedInput: 0 })
  const patched = withBody(t, patch(t, '#0 llm.tool_call[1].arguments={"ref":"C2"}').chunks)
  assert.deepEqual(viewOf(patched)?.toolCalls[1]?.arguments, { ref: 'C2' })
})

test('Bedrock ConverseStream (live capture): event stream frames read as a turn; a patch re-encodes valid frames, one per recorded frame', () => {
  const withResult = {
    messages: [
      ...ASK.messages,
      { role: 'assistant', content: [{ toolUse: { toolUseId: 'tooluse_x1', name: 'get_resistor_value', input: { ref: 'R1' } } }] },
      { role: 'user', content: [{ toolResult: { toolUseId: 'tooluse_x1', content: [{ text: '4.7k' }], status: 'error' } }] },
    ],
  }
  const t = buildTrace('b', [converseItem('/converse-stream', withResult, frames(), true)])
  const v = viewOf(t)
  assert.equal(v?.stream, true)
  assert.equal(v?.events, 6)
  assert.equal(v?.outputText, 'OK.')
  assert.equal(v?.finish, 'end_turn')
  assert.deepEqual(v?.usage, { input: 12, output: 5, total: 17 })
  assert.deepEqual(v?.toolResults, [{ callId: 'tooluse_x1', name: 'get_resistor_value', output: '4.7k', isError: true }])
  const patched = patch(t, '#0 llm.output_text="Not OK at all."')
  assert.equal(patched.chunks.length, 6)
  const body = Buffer.concat(patched.chunks.map((c) => c.bytes))
  const decoded = decodeEventStream(new Uint8Array(body))
  assert.equal(decoded.complete, true, 'every re-encoded frame has valid lengths and CRCs')
  assert.deepEqual(
    decoded.frames.map((f) => f.headers[':event-type']),
    ['messageStart', 'contentBlockDelta', 'contentBlockDelta', 'contentBlockStop', 'messageStop', 'metadata'],
  )
  assert.equal(Buffer.compare(Buffer.from(patched.chunks[0]?.bytes ?? []), frames()[0] as Buffer), 0, 'frames the patch does not touch keep their bytes')
  assert.equal(viewOf(withBody(t, patched.chunks))?.outputText, 'Not OK at all.')
  assert.equal(viewOf(withBody(t, patch(t, '#0 llm.finish=length').chunks))?.finish, 'max_tokens')
})

test('Bedrock ConverseStream: a streamed tool use (input fragments joined), an exception frame read as the error', () => {
  const frame = (type: string, payload: unknown, message = 'event') =>
    encodeEventStreamFrame(
      encodeEventStreamHeaders([
        [message === 'event' ? ':event-type' : ':exception-type', type],
        [':content-type', 'application/json'],
        [':message-type', message],
      ]),
      Buffer.from(JSON.stringify(payload)),
    )
  const chunks = [
    frame('messageStart', { role: 'assistant' }),
    frame('contentBlockStart', { contentBlockIndex: 0, start: { toolUse: { toolUseId: 'tooluse_1', name: 'lookup' } } }),
    frame('contentBlockDelta', { contentBlockIndex: 0, delta: { toolUse: { input: '{"ref":' } } }),
    frame('contentBlockDelta', { contentBlockIndex: 0, delta: { toolUse: { input: '"R1"}' } } }),
    frame('modelStreamErrorException', { message: 'Model Stream Error' }, 'exception'),
  ]
  const v = viewOf(buildTrace('b', [converseItem('/converse-stream', ASK, chunks, true)]))
  assert.deepEqual(
    v?.toolCalls.map((c) => [c.index, c.id, c.name, c.arguments]),
    [[0, 'tooluse_1', 'lookup', { ref: 'R1' }]],
  )
  assert.equal(v?.error, 'modelStreamErrorException: Model Stream Error')
  assert.equal(v?.incomplete, true)
})

// ---- Ollama, Groq, handoffs -----------------------------------------------------------------------------------

const ndjson = (lines: unknown[]) => lines.map((l) => `${JSON.stringify(l)}\n`)

test('Ollama /api/chat NDJSON: pieces joined, the tool result named, counts as usage; a patch re-splits the text over the lines', () => {
  const lines = ndjson([
    { model: 'llama3.2', created_at: '2025-01-01T00:00:00Z', message: { role: 'assistant', content: 'The' }, done: false },
    { model: 'llama3.2', created_at: '2025-01-01T00:00:01Z', message: { role: 'assistant', content: ' sky is blue.' }, done: false },
    {
      model: 'llama3.2',
      created_at: '2025-01-01T00:00:02Z',
      message: { role: 'assistant', content: '' },
      done: true,
      done_reason: 'stop',
      prompt_eval_count: 26,
      eval_count: 12,
    },
  ])
  const t = buildTrace('o', [
    {
      method: 'POST',
      url: 'http://127.0.0.1:11434/api/chat',
      requestBody: JSON.stringify({
        model: 'llama3.2',
        messages: [
          { role: 'user', content: 'Rain?' },
          { role: 'assistant', content: '', tool_calls: [{ function: { name: 'get_weather', arguments: { city: 'Oslo' } } }] },
          { role: 'tool', content: '{"rain":true}', tool_name: 'get_weather' },
        ],
      }),
      headers: [['content-type', 'application/x-ndjson']],
      chunks: lines,
    },
  ])
  const v = viewOf(t)
  assert.equal(v?.api, 'ollama.chat')
  assert.equal(v?.stream, true)
  assert.equal(v?.outputText, 'The sky is blue.')
  assert.deepEqual(v?.toolResults, [{ callId: '', name: 'get_weather', output: '{"rain":true}' }])
  assert.deepEqual(v?.usage, { input: 26, output: 12, total: 38 })
  assert.equal(v?.finish, 'stop')
  const patched = patch(t, '#0 llm.output_text="It rains."')
  assert.equal(patched.chunks.length, 3)
  assert.equal(viewOf(withBody(t, patched.chunks))?.outputText, 'It rains.')
})

test('Ollama /api/generate JSON and an error line', () => {
  const t = buildTrace('o', [
    {
      method: 'POST',
      url: 'http://localhost:11434/api/generate',
      requestBody: JSON.stringify({ model: 'llama3.2', prompt: 'Why?', system: 'Be brief.', stream: false }),
      body: JSON.stringify({ model: 'llama3.2', response: 'Because.', done: true, done_reason: 'length', prompt_eval_count: 3, eval_count: 2 }),
    },
    {
      method: 'POST',
      url: 'http://localhost:11434/api/generate',
      requestBody: JSON.stringify({ model: 'llama3.2', prompt: 'Why?' }),
      headers: [['content-type', 'application/x-ndjson']],
      chunks: ndjson([{ model: 'llama3.2', response: 'Be', done: false }, { error: 'model runner crashed' }]),
    },
  ])
  const v = viewOf(t, 0)
  assert.equal(v?.api, 'ollama.generate')
  assert.deepEqual(v?.input, [
    { role: 'system', text: 'Be brief.' },
    { role: 'user', text: 'Why?' },
  ])
  assert.equal(v?.outputText, 'Because.')
  assert.equal(v?.finish, 'length')
  const cut = viewOf(t, 1)
  assert.equal(cut?.error, 'model runner crashed')
  assert.equal(cut?.incomplete, true)
})

test("Groq's streamed usage (x_groq.usage in the last chunk) is read", () => {
  const chunk = (extra: Record<string, unknown>) =>
    `data: ${JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion.chunk', model: 'llama-3.1-8b-instant', choices: [{ index: 0, delta: {}, finish_reason: null }], ...extra })}\n\n`
  const t = buildTrace('q', [
    {
      method: 'POST',
      url: 'https://api.groq.com/openai/v1/chat/completions',
      requestBody: JSON.stringify({ model: 'llama-3.1-8b-instant', stream: true, messages: [{ role: 'user', content: 'Hi' }] }),
      headers: [['content-type', 'text/event-stream']],
      chunks: [
        chunk({ choices: [{ index: 0, delta: { role: 'assistant', content: 'Hello' }, finish_reason: null }] }),
        chunk({
          choices: [{ index: 0, delta: {}, finish_reason: 'stop' }],
          x_groq: { id: 'req_01', usage: { queue_time: 0.01, prompt_tokens: 36, completion_tokens: 9, total_tokens: 45, total_time: 0.02 } },
        }),
        'data: [DONE]\n\n',
      ],
    },
  ])
  assert.deepEqual(viewOf(t)?.usage, { input: 36, output: 9, total: 45 })
})

test('Agents SDK handoff: the transfer_to_* call and its {"assistant": NAME} result marked, the next agent named in the timeline', () => {
  const handoffTool = {
    type: 'function',
    name: 'transfer_to_Spanish_agent',
    description: 'Handoff to the Spanish agent agent to handle the request. ',
    parameters: {},
  }
  const call = { id: 'fc_1', type: 'function_call', name: 'transfer_to_Spanish_agent', call_id: 'call_1', arguments: '{}', status: 'completed' }
  const response = (output: unknown[]) => JSON.stringify({ id: 'resp_1', object: 'response', status: 'completed', model: 'gpt-4.1', output })
  const t = buildTrace('a', [
    {
      method: 'POST',
      url: 'https://api.openai.com/v1/responses',
      requestBody: JSON.stringify({ model: 'gpt-4.1', instructions: 'Triage.', input: [{ role: 'user', content: 'Hola' }], tools: [handoffTool] }),
      body: response([call]),
    },
    {
      method: 'POST',
      url: 'https://api.openai.com/v1/responses',
      requestBody: JSON.stringify({
        model: 'gpt-4.1',
        instructions: 'You only speak Spanish.',
        input: [{ role: 'user', content: 'Hola' }, call, { type: 'function_call_output', call_id: 'call_1', output: '{"assistant":"Spanish agent"}' }],
      }),
      body: response([{ type: 'message', role: 'assistant', content: [{ type: 'output_text', text: '¡Hola!' }] }]),
    },
  ])
  const [first, second] = llmTimeline(t)
  assert.equal(first?.llm?.toolCalls[0]?.handoff, 'Spanish agent')
  assert.equal(second?.agent, 'Spanish agent')
  assert.equal(second?.llm?.toolResults[0]?.handoff, 'Spanish agent')
})

// ---- fuzz -----------------------------------------------------------------------------------------------------

/** The items above, as JSON to mutate: request body and each response event's (or frame's, or line's) JSON. */
function fuzzSources(): Array<{ item: TraceItem; framing: 'sse' | 'json' | 'eventstream' | 'ndjson' }> {
  const lines = [
    { model: 'm', message: { role: 'assistant', content: 'a', tool_calls: [{ function: { name: 'f', arguments: { x: 1 } } }] }, done: false },
    { model: 'm', message: { role: 'assistant', content: '' }, done: true, done_reason: 'stop', prompt_eval_count: 1, eval_count: 2 },
  ]
  return [
    { item: geminiItem(geminiJson, 1, false), framing: 'json' },
    { item: geminiItem(geminiStream, 1, true), framing: 'sse' },
    { item: converseItem('/converse', ASK, [fixture('bedrock/converse-parallel-tool-calls.json')], false), framing: 'json' },
    { item: converseItem('/converse-stream', ASK, frames(), true), framing: 'eventstream' },
    {
      item: {
        method: 'POST',
        url: 'http://127.0.0.1:11434/api/chat',
        requestBody: JSON.stringify({ model: 'm', messages: [{ role: 'tool', content: 'x', tool_name: 'f' }] }),
        headers: [['content-type', 'application/x-ndjson']],
        chunks: ndjson(lines),
      },
      framing: 'ndjson',
    },
  ]
}

function mutatedChunk(chunk: string | Uint8Array, framing: string, rnd: () => number): string | Uint8Array {
  if (framing === 'eventstream') {
    const f = decodeEventStream(chunk as Uint8Array).frames[0]
    if (!f) return chunk
    return encodeEventStreamFrame(f.rawHeaders, Buffer.from(JSON.stringify(mutate(JSON.parse(Buffer.from(f.payload).toString()), rnd))))
  }
  const c = String(chunk)
  const at = c.indexOf('{')
  const end = c.lastIndexOf('}') + 1
  return at < 0 ? c : `${c.slice(0, at)}${JSON.stringify(mutate(JSON.parse(c.slice(at, end)), rnd))}${c.slice(end)}`
}

test('fuzz: 1000 mutated Gemini, Bedrock and Ollama exchanges; the readers never throw (no safety net)', () => {
  const sources = fuzzSources()
  const rnd = mulberry32(19)
  let views = 0
  for (let i = 0; i < 1000; i++) {
    const { item, framing } = sources[i % sources.length] as (typeof sources)[number]
    const chunks = [...(item.chunks ?? [])]
    const r = rnd()
    const mutated: TraceItem = { ...item, chunks }
    if (r < 0.25) mutated.requestBody = JSON.stringify(mutate(JSON.parse(item.requestBody ?? '{}'), rnd))
    else if (r < 0.35) mutated.chunks = chunks.slice(0, Math.floor(rnd() * chunks.length))
    else {
      const k = Math.floor(rnd() * chunks.length)
      chunks[k] = mutatedChunk(chunks[k] as string | Uint8Array, framing, rnd)
    }
    const t = buildTrace('fuzz', [mutated])
    if (readLlmView(t, t.exchanges[0] as Exchange)) views++
  }
  assert.ok(views > 700, `only ${views} of 1000 mutated exchanges were read as model calls`)
})

// ---- helpers --------------------------------------------------------------------------------------------------

function patch(t: Trace, text: string) {
  const spec = parsePatchSpec(text)
  return applyLlmPatch(t, t.exchanges[0] as Exchange, text, spec.action as LlmPatchAction)
}

/** The trace with exchange #0's response body replaced by these chunks. */
function withBody(t: Trace, chunks: Array<{ bytes: Uint8Array; atMs: number }>): Trace {
  const items = t.exchanges.map((x) => x)
  const first = items[0] as Exchange
  const res = first.outcome.kind === 'response' ? first.outcome.response : undefined
  assert.ok(res)
  const fresh = buildTrace(t.meta.name, [{ url: first.request.url, chunks: chunks.map((c) => c.bytes) }])
  const body = fresh.exchanges[0]?.outcome.kind === 'response' ? fresh.exchanges[0].outcome.response.body : res.body
  const bodies = new Map([...t.bodies, ...fresh.bodies])
  return { ...t, bodies, exchanges: [{ ...first, outcome: { kind: 'response', response: { ...res, body } } }, ...items.slice(1)] }
}
