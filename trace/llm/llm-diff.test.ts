import assert from 'node:assert/strict'
import { test } from 'node:test'
import { agentTrace, buildTrace, chatTurn, itemFromFixture, readExchangeFixture, sseChunks } from '../../e2e/fixtures/fixture-trace.ts'
import { diffTraces } from '../diff.ts'
import { forkTrace } from '../patch.ts'
import { diffTracesLlm, formatLlmDiffText } from './llm-diff.ts'

test('a forked model answer: the first divergence in model terms, attributed to the patch', () => {
  const main = agentTrace('main')
  const branch = forkTrace(main, { name: 'review', sourceDigest: 'x', patches: ['#2 llm.output_text="manual_review"'] })
  const d = diffTracesLlm(main, branch)
  assert.equal(d.view, 'llm')
  assert.equal(d.equal, false)
  assert.equal(d.first?.summary, '#2 model output text: "approve" → "manual_review"')
  assert.deepEqual(d.first?.llm, [{ side: 'response', what: 'output text', before: 'approve', after: 'manual_review' }])
  assert.equal(d.first?.attribution?.[0]?.spec, '#2 llm.output_text="manual_review"')
  assert.deepEqual(d.modelTurns, { a: 2, b: 2 })
  const text = formatLlmDiffText(d)
  assert.match(text, /^diff a "main" \(3 exchanges, 2 model turns\) → b "review" \(3 exchanges, 2 model turns\)\n1 difference: 1 response_changed\n/)
  assert.match(
    text,
    /first divergence: #2 model output text: "approve" → "manual_review" \[from patch [0-9a-f]{12} \(#2 llm\.output_text="manual_review"\) on b #2\]/,
  )
})

test('tool call arguments and names are compared as parsed JSON, by path', () => {
  const a = agentTrace('a')
  const b = forkTrace(a, { name: 'b', sourceDigest: 'x', patches: ['#0 llm.tool_call[0].arguments={"city":"Bergen"}'] })
  assert.equal(diffTracesLlm(a, b).first?.summary, '#0 model tool_call[0].arguments $.city: "Oslo" → "Bergen"')
  // Same arguments spelled differently (spaces, key order) are not a difference.
  const c = forkTrace(a, { name: 'c', sourceDigest: 'x', patches: ['#0 llm.tool_call[0].arguments="{ \\"city\\" : \\"Oslo\\" }"'] })
  assert.equal(diffTraces(a, c).equal, false)
  assert.equal(diffTracesLlm(a, c).equal, true)
})

test('the same answer re-recorded (new ids, created, system_fingerprint, obfuscation, other chunking) is equal in LLM terms', () => {
  const f = readExchangeFixture('openai/chat-completions-stream-include-usage.json')
  const chunks = sseChunks(f.response.body)
  // Another recording of the same answer: every pair of chunks merged into one, new ids and timestamps.
  const merged: string[] = []
  for (let i = 0; i < chunks.length; i += 2) merged.push((chunks[i] as string) + (chunks[i + 1] ?? ''))
  const rerecorded = merged.map((c) =>
    c
      .replaceAll('chatcmpl-BpJBM4XqgLRpLxmTeun39ESCNhQwb', 'chatcmpl-Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2')
      .replaceAll('1751568164', '1764500123')
      .replaceAll('fp_07871e2ad8', 'fp_ffffffffff'),
  )
  const a = buildTrace('a', [itemFromFixture(f)])
  const b = buildTrace('b', [itemFromFixture(f, { chunks: rerecorded })])
  assert.ok(b.exchanges[0]?.outcome.kind === 'response' && b.exchanges[0].outcome.response.body.chunks.length < chunks.length)
  const d = diffTracesLlm(a, b)
  assert.equal(d.equal, true)
  assert.equal(d.hidden.length, 0, 'ids, created and fingerprints are volatile already; chunking does not change events')
  // A stream whose events are cut differently (same text in fewer deltas) differs event by event in HTTP terms only.
  const joined = chunks.map((c, i) =>
    i === 1 ? c.replace('"content":"Struct"', '"content":"Structuring"') : i === 2 ? c.replace('"content":"uring"', '"content":""') : c,
  )
  const c = buildTrace('c', [itemFromFixture(f, { chunks: joined })])
  assert.equal(diffTraces(a, c).equal, false)
  const dc = diffTracesLlm(a, c)
  assert.equal(dc.equal, true)
  assert.equal(dc.hidden.length, 1)
  assert.match(
    formatLlmDiffText(dc),
    /no differences in LLM terms\n\n1 difference on model turns with the same meaning .* not shown; --view http shows every HTTP difference$/,
  )
})

test('obfuscation padding is volatile in the HTTP diff too', () => {
  const f = readExchangeFixture('openai/responses-stream-text.json')
  const a = buildTrace('a', [itemFromFixture(f)])
  const b = buildTrace('b', [itemFromFixture(f, { chunks: sseChunks(f.response.body).map((c) => c.replace(/"obfuscation":"[^"]*"/, '"obfuscation":"zzzz"')) })])
  assert.equal(diffTraces(a, b).equal, true)
  assert.equal(diffTraces(a, b, { volatile: false }).equal, false)
})

test('request side: a changed input message in model terms; a parameter the view does not read stays an HTTP detail', () => {
  const a = agentTrace('a')
  const b = agentTrace('b', 'approve', { messages: [{ role: 'system', content: 'You decide refunds. Be strict.' }] })
  const d = diffTracesLlm(a, b)
  // The changed request no longer matches by identity: aligned by method + URL, reported in LLM terms.
  assert.equal(d.first?.summary, '#2 model input[0] system: "You decide refunds." → "You decide refunds. Be strict."')
  assert.equal(d.first?.kind, 'request_changed')
  assert.match(JSON.stringify(d.first?.llm), /"what":"input\[1\]","before":"user: Refund order 42/)
  const t = agentTrace('t', 'approve', { temperature: 0.2 })
  const dt = diffTracesLlm(a, t)
  assert.equal(dt.first?.summary, '#2 model request $.temperature: (absent) → 0.2')
})

test('differences keep observation order: an HTTP tool difference before a model turn comes first; missing turns are named', () => {
  const a = agentTrace('a')
  const b = forkTrace(a, { name: 'b', sourceDigest: 'x', patches: ['#1 $.rain=false', '#2 llm.output_text="reject"'] })
  const d = diffTracesLlm(a, b)
  assert.deepEqual(
    d.differences.map((x) => [x.turn, x.summary]),
    [
      ['http', 'GET https://weather.test/forecast?city=Oslo #0 response $.rain: true → false'],
      ['model', '#2 model output text: "approve" → "reject"'],
    ],
  )
  const shorter = buildTrace('s', [chatTurn({ messages: [{ role: 'user', content: 'hi' }], content: 'hello' })])
  const missing = diffTracesLlm(a, shorter)
  assert.ok(
    missing.differences.some((x) => x.summary === '#2 model turn missing in b (gpt-5-2025-08-07 → "approve")'),
    JSON.stringify(missing.differences.map((x) => x.summary)),
  )
})

/** A parallel tool-call loop whose model made the ids `made`, and whose app answered them with the ids `echoed`. */
function loopWithIds(name: string, made: [string, string], echoed: [string, string] = made) {
  const user = { role: 'user', content: 'Weather in Oslo and Bergen?' }
  const calls = made.map((id, i) => ({ id, name: 'get_weather', arguments: JSON.stringify({ city: ['Oslo', 'Bergen'][i] }) }))
  return buildTrace(name, [
    chatTurn({ messages: [user], toolCalls: calls, id: `chatcmpl-${made[0]}` }),
    chatTurn({
      messages: [
        user,
        {
          role: 'assistant',
          content: null,
          tool_calls: calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } })),
        },
        { role: 'tool', tool_call_id: echoed[0], content: 'rain' },
        { role: 'tool', tool_call_id: echoed[1], content: 'sun' },
      ],
      content: 'Rain in Oslo, sun in Bergen.',
      id: `chatcmpl-${made[1]}`,
    }),
  ])
}

test('ids the model made and the app echoes back compare by role: the same run with other ids is equal, a swapped echo is not', () => {
  // Ids without digits: no "generated id" pattern hides them, only their role does.
  const a = loopWithIds('a', ['call_abcdefghijkl', 'call_mnopqrstuvwx'])
  const b = loopWithIds('b', ['call_QWERTYUIOPAS', 'call_ZXCVBNMLKJHG'])
  assert.equal(diffTraces(a, b, { volatile: false }).equal, false, 'byte for byte, the ids differ')
  assert.equal(diffTraces(a, b).equal, true)
  assert.equal(diffTracesLlm(a, b).equal, true)
  assert.deepEqual(
    diffTraces(a, b).alignment.map((p) => p.by),
    ['identity', 'identity'],
    'aligned by identity once ids are roles',
  )

  const swapped = loopWithIds('swapped', ['call_QWERTYUIOPAS', 'call_ZXCVBNMLKJHG'], ['call_ZXCVBNMLKJHG', 'call_QWERTYUIOPAS'])
  const d = diffTracesLlm(a, swapped)
  assert.equal(d.equal, false)
  assert.equal(d.first?.summary, '#1 model request $.messages[2].tool_call_id: "⟨model id 2⟩" → "⟨model id 3⟩"')
})

test('a value the app sent before any response is compared by value, even where a response repeats it', () => {
  const turn = (name: string, user: string) =>
    buildTrace(name, [
      {
        method: 'POST',
        url: 'https://api.test/v1/jobs',
        requestBody: JSON.stringify({ user_id: user }),
        body: JSON.stringify({ job_id: 'job_abcdefgh', user_id: user }),
      },
    ])
  const d = diffTraces(turn('a', 'alice-0001'), turn('b', 'bobby-0002'))
  assert.deepEqual(
    d.differences.flatMap((x) => x.details.map((y) => y.path)),
    ['$.user_id', '$.user_id'],
  )
})
