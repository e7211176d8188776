import assert from 'node:assert/strict'
import { test } from 'node:test'
import { realtimeTrace, type SessionEvent, weatherConversation } from '../../e2e/fixtures/realtime-session.ts'
import { bodyBytes } from '../body.ts'
import type { Exchange, Trace } from '../exchange.ts'
import { forkTrace } from '../patch.ts'
import { llmView } from './llm-view.ts'

const source = () => realtimeTrace('rt', [weatherConversation()])
const fork = (t: Trace, ...patches: string[]) => forkTrace(t, { name: 'rt-fork', sourceDigest: 'sha256:0', patches })

/** Each message of the only session, as its JSON (or its opcode). */
function messages(t: Trace): Array<Record<string, unknown> | string> {
  const x = t.exchanges[0] as Exchange
  return (x.websocket?.messages ?? []).map((m) =>
    m.opcode === 'text' ? (JSON.parse(Buffer.from(bodyBytes(t, m.body)).toString('utf8')) as Record<string, unknown>) : m.opcode,
  )
}

test('realtime.response[1].output_text: deltas re-split, the done events and the response.done snapshot say the new text; nothing else changes', () => {
  const src = source()
  const text = 'It is 5°C and raining in Paris.'
  const branch = fork(src, `#0 realtime.response[1].output_text=${JSON.stringify(text)}`)
  const view = llmView(branch, branch.exchanges[0] as Exchange)
  assert.equal(view?.responses?.[1]?.outputText, text)
  assert.equal(view?.responses?.[0]?.outputText, 'Let me check the weather.')
  const before = messages(src)
  const after = messages(branch)
  assert.equal(after.length, before.length)
  const changed = after.map((m, i) => (JSON.stringify(m) === JSON.stringify(before[i]) ? -1 : i)).filter((i) => i >= 0)
  const types = changed.map((i) => (after[i] as { type: string }).type)
  // The first delta ("It is ") keeps its recorded size, so its bytes do not change.
  assert.deepEqual(types, ['response.output_text.delta', 'response.output_text.done', 'response.done'])
  const deltas = after
    .filter((m) => typeof m === 'object' && m.type === 'response.output_text.delta' && m.response_id === 'resp_2')
    .map((m) => (m as { delta: string }).delta)
  assert.deepEqual(deltas, ['It is ', '5°C and raining in Paris.'])
  // Event ids and everything around the edited values stay as recorded.
  for (const i of changed) assert.equal((after[i] as { event_id: string }).event_id, (before[i] as { event_id: string }).event_id)
  const x = branch.exchanges[0] as Exchange
  assert.equal(x.origin, 'patched')
  assert.deepEqual(
    branch.meta.lineage?.patches.map((p) => p.spec),
    [`#0 realtime.response[1].output_text=${JSON.stringify(text)}`],
  )
  // The branch carries every message body it references (and replays on its own).
  for (const m of x.websocket?.messages ?? []) assert.ok(branch.bodies.has(m.body.digest), `body of a ${m.from} ${m.opcode} message kept`)
})

test("realtime.response[0].tool_call[0].arguments: deltas, function_call_arguments.done, output_item.done and response.done carry them; the added item's empty arguments stay", () => {
  const src = source()
  const branch = fork(src, '#0 realtime.response[0].tool_call[0].arguments={"city":"Oslo","unit":"c"}')
  const view = llmView(branch, branch.exchanges[0] as Exchange)
  const call = view?.responses?.[0]?.toolCalls[0]
  assert.equal(call?.argumentsText, '{"city":"Oslo","unit":"c"}')
  assert.equal(call?.name, 'get_weather')
  assert.equal(view?.responses?.[0]?.outputText, 'Let me check the weather.')
  const after = messages(branch) as Array<{
    type?: string
    delta?: string
    arguments?: string
    item?: { arguments?: string }
    response?: { output: Array<{ arguments?: string }> }
  }>
  const argDeltas = after.filter((m) => m.type === 'response.function_call_arguments.delta').map((m) => m.delta)
  assert.equal(argDeltas.length, 2)
  assert.equal(argDeltas.join(''), '{"city":"Oslo","unit":"c"}')
  assert.equal(after.find((m) => m.type === 'response.function_call_arguments.done')?.arguments, '{"city":"Oslo","unit":"c"}')
  assert.equal(after.find((m) => m.type === 'response.output_item.added' && m.item?.arguments !== undefined)?.item?.arguments, '')
  assert.equal(after.find((m) => m.type === 'response.done')?.response?.output[1]?.arguments, '{"city":"Oslo","unit":"c"}')
  // The tool result the client sent is the recording's: the fork changes what the server said, not the app.
  assert.deepEqual(
    messages(branch).filter((m) => typeof m === 'object' && m.type === 'conversation.item.create'),
    messages(src).filter((m) => typeof m === 'object' && m.type === 'conversation.item.create'),
  )
})

test('realtime.response[0].tool_call[0].name renames the call everywhere it is named', () => {
  const branch = fork(source(), '#0 realtime.response[0].tool_call[0].name=get_forecast')
  const view = llmView(branch, branch.exchanges[0] as Exchange)
  assert.equal(view?.responses?.[0]?.toolCalls[0]?.name, 'get_forecast')
  assert.ok(!JSON.stringify(messages(branch).filter((m) => typeof m === 'object' && String(m.type).startsWith('response.'))).includes('get_weather'))
})

test('realtime.* patches fail closed with TR_INVALID_PATCH naming what is wrong', () => {
  const src = source()
  const cases: Array<[string, RegExp]> = [
    ['#0 realtime.response[2].output_text="x"', /has 2 response\(s\) \(response\[0\]-response\[1\]\), so response\[2\] does not exist/],
    ['#0 realtime.response[1].tool_call[0].arguments={}', /has 0 tool call\(s\) in response\[1\], so tool_call\[0\] does not exist/],
    ['#0 realtime.response[0].finish=length', /a Realtime response's finish cannot be patched/],
    ['#0 realtime.output_text="x"', /names no response/],
    ['#0 llm.output_text="x"', /is an OpenAI Realtime session .*realtime\.response\[N\]\.output_text/],
  ]
  for (const [patch, message] of cases) {
    assert.throws(
      () => fork(src, patch),
      (err: Error & { code?: string }) => {
        assert.equal(err.code, 'TR_INVALID_PATCH', patch)
        assert.match(err.message, message)
        return true
      },
    )
  }
})

test('a response with only a tool call has no text to replace: refused, not invented', () => {
  const events = weatherConversation().filter(
    ([, e]) =>
      typeof e !== 'object' ||
      !['response.output_text.delta', 'response.output_text.done', 'response.output_item.added'].includes(String(e.type)) ||
      e.response_id !== 'resp_1',
  )
  const only = events.map(([from, e]) => {
    if (typeof e === 'object' && e.type === 'response.done' && (e.response as { id: string }).id === 'resp_1') {
      const r = e.response as { output: Array<{ type: string }> }
      return [from, { ...e, response: { ...r, output: r.output.filter((o) => o.type === 'function_call') } }] as (typeof events)[number]
    }
    return [from, e] as (typeof events)[number]
  })
  const t = realtimeTrace('rt', [only])
  assert.throws(() => fork(t, '#0 realtime.response[0].output_text="x"'), /response\[0\] has no text or transcript to replace/)
})

test('beta names and audio: the transcript is what output_text forks (deltas, done, content_part.done, the echoed item, response.done); audio and the user transcript stay', () => {
  const audio = Buffer.alloc(300, 9).toString('base64')
  const s = (e: Record<string, unknown>): SessionEvent => ['server', { event_id: `e${++n}`, ...e }]
  let n = 0
  const at = { response_id: 'resp_1', item_id: 'item_a', output_index: 0, content_index: 0 }
  const events: SessionEvent[] = [
    s({ type: 'session.created', session: { id: 'sess_1', model: 'gpt-4o-realtime-preview' } }),
    ['client', { type: 'input_audio_buffer.append', audio }],
    s({ type: 'input_audio_buffer.committed', item_id: 'item_u' }),
    s({ type: 'conversation.item.input_audio_transcription.completed', item_id: 'item_u', content_index: 0, transcript: 'Hello there' }),
    s({ type: 'response.created', response: { id: 'resp_1', status: 'in_progress', output: [] } }),
    s({ type: 'conversation.item.created', item: { id: 'item_a', type: 'message', role: 'assistant', content: [] } }),
    s({ type: 'response.content_part.added', ...at, part: { type: 'audio', transcript: '' } }),
    s({ type: 'response.audio.delta', ...at, delta: audio }),
    s({ type: 'response.audio_transcript.delta', ...at, delta: 'Hi, how ' }),
    s({ type: 'response.audio_transcript.delta', ...at, delta: 'can I help?' }),
    s({ type: 'response.audio_transcript.done', ...at, transcript: 'Hi, how can I help?' }),
    s({ type: 'response.content_part.done', ...at, part: { type: 'audio', transcript: 'Hi, how can I help?' } }),
    s({
      type: 'conversation.item.done',
      item: { id: 'item_a', type: 'message', role: 'assistant', content: [{ type: 'audio', transcript: 'Hi, how can I help?' }] },
    }),
    s({
      type: 'response.done',
      response: {
        id: 'resp_1',
        status: 'completed',
        output: [{ id: 'item_a', type: 'message', role: 'assistant', content: [{ type: 'audio', transcript: 'Hi, how can I help?' }] }],
      },
    }),
  ]
  const src = realtimeTrace('voice', [events], 'https://api.openai.com/v1/realtime?model=gpt-4o-realtime-preview')
  const branch = fork(src, '#0 realtime.response[0].output_text="Goodbye."')
  assert.equal(llmView(branch, branch.exchanges[0] as Exchange)?.responses?.[0]?.outputText, 'Goodbye.')
  const text = messages(branch).map((m) => JSON.stringify(m))
  assert.equal(text.filter((t) => t.includes('can I help')).length, 0, 'no place still says the recorded transcript')
  const before = messages(src)
  const same = (type: string) =>
    assert.deepEqual(
      messages(branch).filter((m) => typeof m === 'object' && m.type === type),
      before.filter((m) => typeof m === 'object' && m.type === type),
      type,
    )
  for (const type of [
    'response.audio.delta',
    'conversation.item.input_audio_transcription.completed',
    'response.content_part.added',
    'conversation.item.created',
  ])
    same(type)
})

test('a function call the server echoes into the conversation (conversation.item.done) is forked there too; its empty added item stays', () => {
  const events = weatherConversation()
  const done = events.findIndex(([, e]) => typeof e === 'object' && e.type === 'response.done')
  const item = { id: 'item_f1', type: 'function_call', call_id: 'call_weather_1', name: 'get_weather' }
  events.splice(
    done,
    0,
    ['server', { type: 'conversation.item.added', item: { ...item, arguments: '' } }],
    ['server', { type: 'conversation.item.done', item: { ...item, arguments: '{"city":"Paris"}' } }],
  )
  const branch = fork(realtimeTrace('rt', [events]), '#0 realtime.response[0].tool_call[0].arguments={"city":"Oslo"}')
  const echoed = messages(branch).filter(
    (m) => typeof m === 'object' && String(m.type).startsWith('conversation.item.') && (m.item as { type?: string })?.type === 'function_call',
  )
  assert.deepEqual(
    echoed.map((m) => (m as { item: { arguments: string } }).item.arguments),
    ['', '{"city":"Oslo"}'],
  )
})
