import assert from 'node:assert/strict'
import { test } from 'node:test'
import { realtimeTrace, weatherConversation } from '../../e2e/fixtures/realtime-session.ts'
import type { Exchange } from '../exchange.ts'
import { diffTracesLlm, formatLlmDiffText } from './llm-diff.ts'
import { formatModelTurn } from './llm-format.ts'
import { formatTimeline, llmTimeline } from './timeline.ts'

test('timeline: a Realtime session is one exchange whose responses are its model turns, tool results named by their call', () => {
  const t = realtimeTrace('voice', [weatherConversation()])
  assert.equal(
    formatTimeline('voice', llmTimeline(t)),
    [
      'trace "voice": 1 exchange, 2 model turns',
      '#0 realtime gpt-realtime-2025-08-28 (tools get_weather; instructions "Be brief."): 2 responses',
      '   response[0] ← user "Weather in Paris?" → "Let me check the weather." + tool_call get_weather {"city":"Paris"}',
      '   response[1] ← tool_result get_weather "{\\"city\\":\\"Paris\\",\\"celsius\\":21,\\"sky\\":\\"sun…" → "It is 21°C and sunny in Paris."',
    ].join('\n'),
  )
})

test('show --exchange: the session in full, response by response', () => {
  const t = realtimeTrace('voice', [weatherConversation()])
  const [turn] = llmTimeline(t)
  assert.ok(turn)
  const text = formatModelTurn(turn)
  assert.match(
    text,
    /^#0 realtime session \(OpenAI Realtime, 19 server events, 2 responses\)\nGET https:\/\/api\.openai\.com\/v1\/realtime\?model=gpt-realtime → 101\n/,
  )
  assert.match(text, /\nmodel: gpt-realtime-2025-08-28 \(asked for gpt-realtime\)\ntools offered: get_weather\ninstructions: "Be brief\."\n/)
  assert.match(
    text,
    /\nresponse\[0\] \(\d+ events\):\n {2}input: user: "Weather in Paris\?"\n {2}text: Let me check the weather\.\n {2}tool_call\[0\] get_weather \{"city":"Paris"\} \(id call_weather_1\)\n {2}finish: completed\n {2}usage: input 120, output 30, total 150, cached input 0\n/,
  )
  assert.match(
    text,
    /\nresponse\[1\] \(\d+ events\):\n {2}input: tool get_weather \(call_weather_1\): "\{\\"city\\":\\"Paris\\",\\"celsius\\":21,\\"sky\\":\\"sunny\\"\}"\n {2}text: It is 21°C and sunny in Paris\.\n/,
  )
  assert.match(text, /\nusage \(session\): input 290, output 42, total 332, cached input 0\n/)
})

test('diff --view llm: two recordings of one conversation (fresh event ids) are equal; a changed answer is named by its response', () => {
  const a = realtimeTrace('a', [weatherConversation()])
  const same = realtimeTrace('b', [weatherConversation()])
  const d0 = diffTracesLlm(a, same)
  assert.equal(d0.equal, true, formatLlmDiffText(d0))
  assert.deepEqual(d0.modelTurns, { a: 2, b: 2 })
  const b = realtimeTrace('b', [weatherConversation('It is 5°C and raining in Paris.')])
  const d = diffTracesLlm(a, b)
  assert.equal(d.equal, false)
  assert.equal(d.differences.length, 1)
  assert.equal(d.first?.turn, 'model')
  assert.equal(d.first?.summary, '#0 model response[1] output text: "It is 21°C and sunny in Paris." → "It is 5°C and raining in Paris."')
  assert.deepEqual(
    d.first?.llm?.map((x) => x.what),
    ['response[1] output text'],
  )
})

test('diff --view llm: changed function-call arguments are named by response and JSON path; a missing response is named', () => {
  const a = realtimeTrace('a', [weatherConversation()])
  const b = realtimeTrace('b', [weatherConversation(undefined, '{"city":"Oslo"}')])
  const d = diffTracesLlm(a, b)
  assert.equal(d.first?.summary, '#0 model response[0] tool_call[0].arguments $.city: "Paris" → "Oslo"')
  const cut = realtimeTrace('c', [weatherConversation().slice(0, 16)])
  const x = cut.exchanges[0] as Exchange
  assert.equal(x.websocket?.messages.length, 16)
  const dc = diffTracesLlm(a, cut)
  const whats = dc.first?.llm?.map((l) => l.what) ?? []
  assert.ok(whats.includes('response[1]'), whats.join(', '))
  assert.match(formatLlmDiffText(dc), /response\[1\]: "It is 21°C and sunny in Paris\." → \(absent\)/)
})
