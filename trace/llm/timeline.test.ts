import assert from 'node:assert/strict'
import { test } from 'node:test'
import { agentTrace, buildTrace, chatTurn, itemFromFixture, readExchangeFixture, sseChunks } from '../../e2e/fixtures/fixture-trace.ts'
import type { Exchange } from '../exchange.ts'
import { forkTrace } from '../patch.ts'
import { formatModelTurn, presentLlmView } from './llm-format.ts'
import { formatTimeline, llmTimeline } from './timeline.ts'

test('the timeline reads a run as turns: model call, tool call, HTTP tool, tool result, answer', () => {
  const t = agentTrace()
  assert.equal(
    formatTimeline('agent', llmTimeline(t)),
    [
      'trace "agent": 3 exchanges, 2 model turns',
      '#0 model gpt-5-2025-08-07 → tool_call get_weather {"city":"Oslo"}',
      '#1 GET weather.test/forecast?city=Oslo → 200',
      '#2 model (retry 1) ← tool_result get_weather "{\\"rain\\":true}" → "approve"',
    ].join('\n'),
  )
})

test('flags: a cut stream, an unusual finish and a patched turn are visible on the line', () => {
  const f = readExchangeFixture('openai/chat-completions-stream-include-usage.json')
  const cut = itemFromFixture(f, { chunks: sseChunks(f.response.body).slice(0, 3) })
  const t = buildTrace('t', [itemFromFixture(f), cut])
  const branch = forkTrace(t, { name: 'b', sourceDigest: 'x', patches: ['#0 llm.output_text="Short."'] })
  const lines = formatTimeline('b', llmTimeline(branch)).split('\n')
  assert.match(lines[1] as string, /^#0 model gpt-4o-2024-08-06 → "Short\." \[finish length; patched [0-9a-f]{12}\]$/)
  assert.equal(lines[2], '#1 model → "Structuring" [stream cut]')
})

test('tool results sent with previous_response_id are named from the earlier turn that made the call', () => {
  const first = itemFromFixture(readExchangeFixture('openai/responses-stream-reasoning-function-call.json'))
  const followUp = {
    method: 'POST',
    url: 'https://api.openai.com/v1/responses',
    requestBody: JSON.stringify({
      model: 'gpt-5-mini',
      previous_response_id: 'resp_0c4e2f9a1d5b7c3e00691a2b3c4d5e6f7a8b9c0d1e2f3a4b5c',
      input: [{ type: 'function_call_output', call_id: 'call_Q2mYv8sKp4TnW7xRz1LbHd3F', output: '{"rain":true}' }],
    }),
    body: JSON.stringify({
      id: 'resp_2',
      object: 'response',
      status: 'completed',
      model: 'gpt-5-mini-2025-08-07',
      output: [
        {
          id: 'msg_1',
          type: 'message',
          role: 'assistant',
          status: 'completed',
          content: [{ type: 'output_text', text: 'Take an umbrella.', annotations: [] }],
        },
      ],
    }),
  }
  const turns = llmTimeline(buildTrace('r', [first, followUp]))
  assert.deepEqual(turns[1]?.llm?.toolResults, [{ callId: 'call_Q2mYv8sKp4TnW7xRz1LbHd3F', name: 'get_weather', output: '{"rain":true}' }])
  assert.equal(formatTimeline('r', turns).split('\n')[2], '#1 model ← tool_result get_weather "{\\"rain\\":true}" → "Take an umbrella."')
})

test('one model turn in full: messages in, tool results, output, finish, usage, attempt', () => {
  const turn = llmTimeline(agentTrace())[2]
  assert.ok(turn)
  assert.equal(
    formatModelTurn(turn),
    [
      '#2 model turn (OpenAI Chat Completions, JSON)',
      'POST https://api.openai.com/v1/chat/completions → 200',
      'model: gpt-5-2025-08-07 (asked for gpt-5)',
      'attempt: retry 1 (x-stainless-retry-count: 1)',
      '',
      'input (4 messages):',
      '  [0] system: "You decide refunds."',
      '  [1] user: "Refund order 42? It rained on my parcel."',
      '  [2] assistant: tool_call get_weather {"city":"Oslo"}',
      '  [3] tool get_weather (call_1): "{\\"rain\\":true}"',
      '',
      'tool results sent back:',
      '  get_weather (call_1): "{\\"rain\\":true}"',
      '',
      'output:',
      '  text: approve',
      'finish: stop',
      'usage: input 50, output 10, total 60',
      '',
      '(--view http shows the raw exchange)',
    ].join('\n'),
  )
})

test('JSON output cuts long input messages and says so; output text stays whole', () => {
  const long = 'x'.repeat(5000)
  const t = buildTrace('t', [chatTurn({ messages: [{ role: 'user', content: long }], content: long })])
  const v = presentLlmView(llmTimeline(t)[0]?.llm as NonNullable<ReturnType<typeof llmTimeline>[number]['llm']>)
  assert.equal(v.input[0]?.truncatedFrom, 5000)
  assert.equal(Array.from(v.input[0]?.text ?? '').length, 2000)
  assert.equal(v.outputText.length, 5000)
  assert.equal((t.exchanges[0] as Exchange).seq, 0)
})
