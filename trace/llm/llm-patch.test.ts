import assert from 'node:assert/strict'
import { test } from 'node:test'
import { gzipSync } from 'node:zlib'
import { buildTrace, itemFromFixture, readExchangeFixture, sseChunks, type TraceItem } from '../../e2e/fixtures/fixture-trace.ts'
import { bodyBytes, bodyFromBytes } from '../body.ts'
import { ErrorCodes, ToolReplayError } from '../errors.ts'
import type { Exchange, RecordedResponse, Trace } from '../exchange.ts'
import { headerValue } from '../header-pairs.ts'
import { canonicalPatchSpec, forkTrace, parsePatchSpec, patchId, resolvePatches } from '../patch.ts'
import { parseSse } from '../sse.ts'
import { llmView } from './llm-view.ts'
import { rechunkLike, splitLike, splitSseSegments } from './sse-segments.ts'

const fx = (path: string) => itemFromFixture(readExchangeFixture(path))
const fork = (items: TraceItem[], patches: string[]) => {
  const source = buildTrace('main', items)
  return { source, branch: forkTrace(source, { name: 'branch', sourceDigest: 'sha256:test', patches }) }
}
const response = (t: Trace, seq = 0): RecordedResponse => {
  const o = t.exchanges[seq]?.outcome
  if (o?.kind !== 'response') throw new Error(`exchange #${seq} has no response`)
  return o.response
}
const text = (t: Trace, seq = 0) => new TextDecoder().decode(bodyBytes(t, response(t, seq).body))
const view = (t: Trace, seq = 0) => llmView(t, t.exchanges[seq] as Exchange)
const events = (t: Trace, seq = 0) =>
  parseSse(text(t, seq)).map((e) => ({ event: e.event, data: e.data === '[DONE]' ? e.data : (JSON.parse(e.data) as Record<string, unknown>) }))
const rejects = (fn: () => unknown, code: string, re: RegExp) =>
  assert.throws(fn, (err: unknown) => err instanceof ToolReplayError && err.code === code && re.test(err.message))

test('parse: llm.* actions, bare or JSON names and finishes, canonical form and stable ids', () => {
  assert.deepEqual(parsePatchSpec('#5 llm.output_text="manual_review"').action, { kind: 'llm', target: { field: 'output_text' }, value: 'manual_review' })
  assert.deepEqual(parsePatchSpec('#5 llm.finish=length').action, { kind: 'llm', target: { field: 'finish' }, value: 'length' })
  assert.deepEqual(parsePatchSpec('#5 llm.tool_calls[1].name="get_weather"').action, {
    kind: 'llm',
    target: { field: 'tool_call', index: 1, part: 'name' },
    value: 'get_weather',
  })
  const args = parsePatchSpec('#5 llm.tool_call[0].arguments={"city": "Oslo", "n": 12345678901234567890}')
  assert.equal(canonicalPatchSpec(args), '#5 llm.tool_call[0].arguments={"city":"Oslo","n":12345678901234567890}')
  assert.equal(patchId(parsePatchSpec('#5 llm.finish=length')), patchId(parsePatchSpec('#5 llm.finish="length"')))
})

test('parse: malformed llm.* actions are TR_INVALID_PATCH naming what is wrong', () => {
  rejects(() => parsePatchSpec('#0 llm.output_tex="x"'), ErrorCodes.INVALID_PATCH, /unknown LLM action "llm\.output_tex"/)
  rejects(() => parsePatchSpec('#0 llm.output_text=manual'), ErrorCodes.INVALID_PATCH, /"manual" is not JSON \(e\.g\. llm\.output_text="manual_review"\)/)
  rejects(() => parsePatchSpec('#0 llm.output_text=42'), ErrorCodes.INVALID_PATCH, /takes a JSON string/)
  rejects(() => parsePatchSpec('#0 llm.tool_call[0].arguments={"a":'), ErrorCodes.INVALID_PATCH, /is not JSON/)
  rejects(() => parsePatchSpec('#0 llm.finish=two words'), ErrorCodes.INVALID_PATCH, /neither a bare name nor a JSON string/)
})

const agentItems = (): TraceItem[] => [
  fx('openai/chat-completions-stream-parallel-tool-calls.json'),
  { method: 'GET', url: 'https://weather.test/forecast?city=Oslo', body: '{"rain":true}' },
  fx('openai/chat-completions-error-400-invalid-image-url.json'),
  fx('openai/responses-stream-reasoning-function-call.json'),
  fx('anthropic/messages-json-tool-result.json'),
]

test('resolve: an llm.* patch on the wrong exchange fails up front, before anything is written', () => {
  const source = buildTrace('agent', agentItems())
  rejects(
    () => resolvePatches(source, ['#1 llm.output_text="x"']),
    ErrorCodes.INVALID_PATCH,
    /exchange #1 \(GET https:\/\/weather\.test\/forecast\?city=Oslo\) is not an LLM exchange: .* Patch it with \$\.path=JSON or body=@FILE instead\./,
  )
  rejects(
    () => resolvePatches(source, ['#0 llm.tool_call[2].arguments={}']),
    ErrorCodes.INVALID_PATCH,
    /has 2 tool call\(s\) \(tool_call\[0\] get_current_weather, tool_call\[1\] get_current_weather\), so tool_call\[2\] does not exist/,
  )
  rejects(() => resolvePatches(source, ['#2 llm.output_text="x"']), ErrorCodes.INVALID_PATCH, /is an error response \(400: invalid_image_url/)
  rejects(() => resolvePatches(source, ['#3 llm.output_text="x"']), ErrorCodes.INVALID_PATCH, /has no output_text part to replace/)
  rejects(() => resolvePatches(source, ['#0 llm.finish=maybe']), ErrorCodes.INVALID_PATCH, /is openai\.chat, whose finish is one of stop, length, tool_calls/)
  rejects(() => resolvePatches(source, ['#4 llm.tool_call[0].name=x']), ErrorCodes.INVALID_PATCH, /has 0 tool call\(s\), so tool_call\[0\] does not exist/)
  const withError = buildTrace('e', agentItems())
  const x = withError.exchanges[0] as Exchange
  x.outcome = { kind: 'error', error: { code: 'ECONNRESET', message: 'read ECONNRESET', phase: 'connect' } }
  rejects(() => resolvePatches(withError, ['#0 llm.finish=stop']), ErrorCodes.INVALID_PATCH, /has a recorded error \(ECONNRESET\), not a model response/)
})

test('Chat stream: tool call name and arguments re-encoded in the same chunks; ids, other calls and framing kept', () => {
  const { source, branch } = fork(
    [fx('openai/chat-completions-stream-parallel-tool-calls.json')],
    ['#0 llm.tool_call[1].arguments={"location":"Bergen, Norway"}', '#0 llm.tool_call[0].name=get_forecast'],
  )
  const before = response(source)
  const after = response(branch)
  assert.deepEqual(
    after.body.chunks.map((c) => c.atMs),
    before.body.chunks.map((c) => c.atMs),
  )
  // One recorded chunk per event, before and after.
  assert.deepEqual(sseChunks(text(branch)).length, before.body.chunks.length)
  const v = view(branch)
  assert.deepEqual(
    v?.toolCalls.map((c) => [c.id, c.name, c.argumentsText]),
    [
      ['call_cCPjAyfwTzboEKjVlqFrArNF', 'get_forecast', '{"location": "San Francisco"}'],
      ['call_Zi4He1Ns0mozwT6f85nW1BOW', 'get_current_weather', '{"location":"Bergen, Norway"}'],
    ],
  )
  // The longer arguments are spread over the same number of fragments as recorded.
  const fragments = (t: Trace) =>
    events(t)
      .flatMap((e) =>
        typeof e.data === 'string'
          ? []
          : ((e.data.choices as Array<{ delta: { tool_calls?: Array<{ index: number; function: { arguments?: string } }> } }>)[0]?.delta.tool_calls ?? []),
      )
      .filter((t) => t.index === 1 && t.function.arguments !== undefined)
      .map((t) => t.function.arguments as string)
  assert.equal(fragments(branch).length, fragments(source).length)
  assert.equal(fragments(branch).join(''), '{"location":"Bergen, Norway"}')
  assert.ok(text(branch).endsWith('data: [DONE]\n\n'))
})

test('Chat stream: text re-split like the recording; a text-less (tool-only) stream takes it in its first delta', () => {
  const { source, branch } = fork(
    [fx('openai/chat-completions-stream-include-usage.json'), fx('openai/chat-completions-stream-parallel-tool-calls.json')],
    ['#0 llm.output_text="manual_review"', '#1 llm.output_text="Let me check."'],
  )
  assert.equal(view(branch, 0)?.outputText, 'manual_review')
  assert.equal(response(branch, 0).body.chunks.length, response(source, 0).body.chunks.length)
  const deltas = (t: Trace) =>
    events(t)
      .map((e) => (typeof e.data === 'string' ? undefined : (e.data.choices as Array<{ delta: { content?: string | null } }>)[0]?.delta.content))
      .filter((c): c is string => typeof c === 'string')
  // Shorter text: the first deltas keep their recorded sizes ("", "Struct"→"manual", "uring"→"_revi", ...).
  assert.deepEqual(deltas(branch).slice(0, 4), ['', 'manual', '_revi', 'ew'])
  assert.equal(deltas(branch).length, deltas(source).length)
  // Usage and finish_reason are kept.
  assert.deepEqual(view(branch, 0)?.usage, view(source, 0)?.usage)
  assert.equal(view(branch, 0)?.finish, 'length')
  assert.equal(view(branch, 1)?.outputText, 'Let me check.')
  assert.equal(view(branch, 1)?.toolCalls.length, 2)
})

test('Responses stream: text in deltas, done events and every snapshot; finish=length renames the final event; sequence numbers intact', () => {
  const { source, branch } = fork([fx('openai/responses-stream-text.json')], ['#0 llm.output_text="manual_review"', '#0 llm.finish=length'])
  const a = events(source)
  const b = events(branch)
  assert.equal(b.length, a.length)
  assert.deepEqual(
    b.map((e) => (e.data as { sequence_number: number }).sequence_number),
    a.map((e) => (e.data as { sequence_number: number }).sequence_number),
  )
  assert.deepEqual(
    b.map((e) => e.event),
    [...a.slice(0, -1).map((e) => e.event), 'response.incomplete'],
  )
  const last = b.at(-1)?.data as {
    type: string
    response: { status: string; incomplete_details: unknown; output: Array<{ content: Array<{ text: string }> }>; usage: unknown }
  }
  assert.equal(last.type, 'response.incomplete')
  assert.equal(last.response.status, 'incomplete')
  assert.deepEqual(last.response.incomplete_details, { reason: 'max_output_tokens' })
  assert.equal(last.response.output[0]?.content[0]?.text, 'manual_review')
  assert.deepEqual(last.response.usage, (a.at(-1)?.data as { response: { usage: unknown } } | undefined)?.response.usage)
  for (const type of ['response.output_text.done', 'response.content_part.done', 'response.output_item.done']) {
    const e = JSON.stringify(b.find((x) => x.event === type)?.data)
    assert.ok(e.includes('"manual_review"') && !e.includes('unicorn'), `${type} carries the new text`)
  }
  const v = view(branch)
  assert.equal(v?.outputText, 'manual_review')
  assert.equal(v?.finish, 'incomplete')
  assert.equal(v?.finishDetail, 'max_output_tokens')
  // Obfuscation, item ids and logprobs stay as recorded.
  const obfuscation = (e: (typeof a)[number] | undefined) => (e?.data as { obfuscation?: string } | undefined)?.obfuscation
  assert.equal(obfuscation(b[4]), obfuscation(a[4]))
  assert.ok(obfuscation(a[4]))
})

test('Responses stream: a function call after a reasoning item; arguments and name change everywhere they appear', () => {
  const { source, branch } = fork(
    [fx('openai/responses-stream-reasoning-function-call.json')],
    ['#0 llm.tool_call[0].arguments={"city":"Tromsø","units":"metric"}', '#0 llm.tool_call[0].name=lookup_weather'],
  )
  const body = text(branch)
  assert.ok(!body.includes('\\"city\\":\\"Oslo\\"'), 'no stale copy of the old arguments')
  const count = (t: string, re: RegExp) => (t.match(re) ?? []).length
  // Renamed in output_item.added, output_item.done and response.completed; the tools lists keep get_weather.
  assert.equal(count(body, /"name":"lookup_weather"/g), 3)
  assert.equal(count(text(source), /"name":"get_weather"/g) - count(body, /"name":"get_weather"/g), 3)
  const v = view(branch)
  assert.deepEqual(
    v?.toolCalls.map((c) => [c.index, c.name, c.arguments]),
    [[1, 'lookup_weather', { city: 'Tromsø', units: 'metric' }]],
  )
  assert.deepEqual(v?.reasoning, view(source)?.reasoning)
})

test('Anthropic stream and JSON: text, tool_use input and stop_reason; a string is no tool_use input in JSON', () => {
  const { source, branch } = fork(
    [fx('anthropic/messages-stream-thinking-tool-use.json'), fx('anthropic/messages-json-tool-result.json')],
    [
      '#0 llm.output_text="Looking it up."',
      '#0 llm.tool_call[0].arguments={"city":"Bergen"}',
      '#0 llm.finish=stop',
      '#1 llm.output_text="No umbrella needed."',
    ],
  )
  const v = view(branch, 0)
  assert.equal(v?.outputText, 'Looking it up.')
  assert.deepEqual(v?.toolCalls[0]?.arguments, { city: 'Bergen' })
  assert.equal(v?.finish, 'end_turn')
  assert.deepEqual(v?.reasoning, view(source, 0)?.reasoning)
  assert.deepEqual(
    events(branch).map((e) => e.event),
    events(source).map((e) => e.event),
  )
  assert.equal(view(branch, 1)?.outputText, 'No umbrella needed.')
  rejects(
    () => fork([fx('anthropic/messages-stream-thinking-tool-use.json'), fx('anthropic/messages-json-tool-result.json')], ['#1 llm.finish=bogus']),
    ErrorCodes.INVALID_PATCH,
    /anthropic\.messages, whose finish is one of end_turn/,
  )
})

test('JSON bodies are edited surgically: only the patched value changes, a compressed body is stored decoded', () => {
  const item = fx('openai/chat-completions-nonstream-gpt5nano.json')
  const { source, branch } = fork([item], ['#0 llm.output_text="approve"', '#0 llm.finish=length'])
  const original = text(source)
  const expected = original.replace(JSON.stringify(view(source)?.outputText), '"approve"').replace('"finish_reason": "stop"', '"finish_reason": "length"')
  assert.equal(text(branch), expected, 'pretty-printing, key order and every other byte kept')
  const gz = buildTrace('gz', [{ ...item, chunks: undefined, body: undefined }])
  const res = response(gz)
  const zipped = bodyFromBytes(gzipSync(Buffer.from(original)))
  gz.bodies.set(zipped.ref.digest, zipped.bytes)
  res.body = zipped.ref
  // One framing per response (trace/validate.ts): the recorded chunked encoding gives way to the length.
  res.headers = [
    ...res.headers.filter(([k]) => k.toLowerCase() !== 'transfer-encoding'),
    ['Content-Encoding', 'gzip'],
    ['Content-Length', String(zipped.ref.size)],
  ]
  const out = forkTrace(gz, { name: 'b', sourceDigest: 'x', patches: ['#0 llm.output_text="approve"'] })
  const r = response(out)
  assert.equal(headerValue(r.headers, 'content-encoding'), undefined)
  assert.equal(headerValue(r.headers, 'content-length'), String(r.body.size))
  assert.equal(view(out)?.outputText, 'approve')
})

test('splitLike: shorter text fills recorded sizes in order, longer text spreads in proportion, code points never cut', () => {
  assert.deepEqual(splitLike('manual_review', ['', 'Once', ' upon', ' a', ' time']), ['', 'manu', 'al_re', 'vi', 'ew'])
  assert.deepEqual(splitLike('abcdefghij', ['ab', 'cd']), ['abcde', 'fghij'])
  assert.deepEqual(splitLike('😀😀😀😀', ['xx', 'yy']), ['😀😀', '😀😀'])
  assert.deepEqual(splitLike('whole', ['', '']), ['whole', ''])
  assert.deepEqual(splitLike('', ['a', 'b']), ['', ''])
})

test('rechunkLike: chunk boundaries follow events, also when a recorded chunk ended inside an event', () => {
  const before = ['data: {"a":"x"}\n\n', 'data: {"a":"y"}\n\n']
  const after = ['data: {"a":"xxxx"}\n\n', 'data: {"a":"y"}\n\n']
  // Recorded: one chunk ending mid-event 0 (8 of 17 bytes: 9 of the 20 rewritten), the rest of event 0, then event 1.
  const chunks = rechunkLike(before, after, [
    { size: 8, atMs: 1 },
    { size: 9, atMs: 2 },
    { size: 17, atMs: 3 },
  ])
  const dec = new TextDecoder()
  assert.deepEqual(
    chunks.map((c) => [dec.decode(c.bytes), c.atMs]),
    [
      ['data: {"a', 1],
      ['":"xxxx"}\n\n', 2],
      ['data: {"a":"y"}\n\n', 3],
    ],
  )
  assert.deepEqual(
    splitSseSegments('event: e\ndata: 1\n\n: comment\n\ndata: 2\r\n\r\ntail').map((s) => [s.event, s.data]),
    [
      ['e', '1'],
      [undefined, undefined],
      [undefined, '2'],
      [undefined, undefined],
    ],
  )
})

test('streams with CRLF line ends keep them; a gzip-compressed stream is stored decoded, one chunk per event', () => {
  const f = readExchangeFixture('openai/chat-completions-stream-parallel-tool-calls.json')
  const crlf = itemFromFixture(f)
  crlf.chunks = (crlf.chunks ?? []).map((c) => String(c).replaceAll('\n', '\r\n'))
  const { branch } = fork([crlf], ['#0 llm.tool_call[0].arguments={"location":"Oslo"}'])
  assert.ok(!/[^\r]\n/.test(text(branch)), 'every line still ends in CRLF')
  assert.equal(view(branch)?.toolCalls[0]?.argumentsText, '{"location":"Oslo"}')

  const gz = buildTrace('gz', [itemFromFixture(f)])
  const res = response(gz)
  const zipped = bodyFromBytes(gzipSync(Buffer.from(f.response.body)))
  gz.bodies.set(zipped.ref.digest, zipped.bytes)
  res.body = {
    ...zipped.ref,
    chunks: [
      { size: 100, atMs: 3 },
      { size: zipped.ref.size - 100, atMs: 40 },
    ],
  }
  res.headers = [...res.headers, ['content-encoding', 'gzip']]
  const out = forkTrace(gz, { name: 'b', sourceDigest: 'x', patches: ['#0 llm.tool_call[1].name=get_forecast'] })
  const r = response(out)
  assert.equal(headerValue(r.headers, 'content-encoding'), undefined)
  assert.equal(r.body.chunks.length, sseChunks(f.response.body).length)
  assert.deepEqual([r.body.chunks[0]?.atMs, r.body.chunks.at(-1)?.atMs], [3, 40])
  assert.equal(view(out)?.toolCalls[1]?.name, 'get_forecast')
})
