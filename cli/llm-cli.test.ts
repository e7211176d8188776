import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { agentTrace, buildTrace, itemFromFixture, readExchangeFixture } from '../e2e/fixtures/fixture-trace.ts'
import { openStore } from '../store/index.ts'
import { ErrorCodes } from '../trace/index.ts'
import { EXIT_CODES } from './exit-codes.ts'
import { runCli } from './main.ts'

let dir: string
let store: string
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tr-llm-cli-'))
  store = join(dir, 'store')
  const s = await openStore(store)
  await s.putTrace(agentTrace('agent'))
  await s.putTrace(buildTrace('stream', [itemFromFixture(readExchangeFixture('openai/responses-stream-text.json'))]))
  await s.close()
})
after(() => rm(dir, { recursive: true, force: true }))

async function cli(...args: string[]) {
  const out: string[] = []
  const err: string[] = []
  const code = await runCli([...args, '--store', store], { out: (t) => out.push(t), err: (t) => err.push(t) })
  return { code, out: out.join('\n'), err: err.join('\n') }
}

test('show: a run with model calls prints as a timeline of turns; --view http keeps the exchange lines', async () => {
  const r = await cli('show', 'agent')
  assert.equal(r.code, 0)
  assert.equal(
    r.out,
    [
      'trace "agent": 3 exchanges, 2 model turns',
      '#0 model gpt-5-2025-08-07 → tool_call get_weather {"city":"Oslo"}',
      '#1 GET weather.test/forecast?city=Oslo → 200',
      '#2 model (retry 1) ← tool_result get_weather "{\\"rain\\":true}" → "approve"',
    ].join('\n'),
  )
  const http = await cli('show', 'agent', '--view', 'http')
  assert.match(http.out, /^trace "agent": 3 exchange\(s\)\n#0 POST https:\/\/api\.openai\.com\/v1\/chat\/completions → 200 OK \(\d+ B, 1 chunk\)/)
})

test('show --exchange: a model turn readably by default, the raw exchange with --view http, a note for a non-model exchange', async () => {
  const turn = await cli('show', 'stream', '--exchange', '0')
  assert.match(turn.out, /^#0 model turn \(OpenAI Responses, streamed in 86 events\)\n/)
  assert.match(turn.out, /\noutput:\n {2}text: Once upon a time, in a enchanted forest/)
  assert.match(turn.out, /\nusage: input 18, output 79 \(reasoning 0\), total 97, cached input 0\n/)
  const raw = await cli('show', 'stream', '--exchange', '0', '--view', 'http')
  assert.match(raw.out, /\n<\nevent: response\.created\ndata: \{"type":"response\.created"/)
  const note = await cli('show', 'agent', '--exchange', '1', '--view', 'llm')
  assert.match(note.out, /^\(#1 is not a model call Tool Replay reads: showing the HTTP view\)\n#1 GET https:\/\/weather\.test/)
})

test('show --json carries the timeline structure (view, turns with their LLM view)', async () => {
  const r = await cli('show', 'agent', '--json')
  const j = JSON.parse(r.out)
  assert.equal(j.view, 'llm')
  assert.deepEqual(
    j.turns.map((t: { seq: number; kind: string }) => [t.seq, t.kind]),
    [
      [0, 'model'],
      [1, 'http'],
      [2, 'model'],
    ],
  )
  assert.equal(j.turns[2].llm.outputText, 'approve')
  assert.deepEqual(j.turns[2].llm.toolResults, [{ callId: 'call_1', name: 'get_weather', output: '{"rain":true}' }])
  const one = JSON.parse((await cli('show', 'agent', '--exchange', '0', '--json')).out)
  assert.deepEqual(one.turn.llm.toolCalls[0].arguments, { city: 'Oslo' })
})

test('fork by meaning, then diff: the first divergence in model terms (text and JSON), HTTP view on request, --exit-code', async () => {
  const f = await cli('fork', 'agent', '--to', 'review', '--patch', '#2 llm.output_text="manual_review"')
  assert.equal(f.code, 0, f.err)
  const d = await cli('diff', 'agent', 'review')
  assert.match(
    d.out,
    /\nfirst divergence: #2 model output text: "approve" → "manual_review" \[from patch [0-9a-f]{12} \(#2 llm\.output_text="manual_review"\) on b #2\]\n/,
  )
  const http = await cli('diff', 'agent', 'review', '--view', 'http')
  assert.match(
    http.out,
    /first divergence: POST https:\/\/api\.openai\.com\/v1\/chat\/completions #1 response \$\.choices\[0\]\.message\.content: "approve" → "manual_review"/,
  )
  const j = JSON.parse((await cli('diff', 'agent', 'review', '--format', 'json')).out)
  assert.equal(j.format, 'tool-replay-diff')
  assert.equal(j.view, 'llm')
  assert.deepEqual(j.first.llm, [{ side: 'response', what: 'output text', before: 'approve', after: 'manual_review' }])
  assert.equal((await cli('diff', 'agent', 'review', '--exit-code')).code, 1)
  assert.equal((await cli('diff', 'agent', 'agent', '--exit-code')).code, 0)
})

test('an llm.* patch on the wrong exchange: TR_INVALID_PATCH with its exit code, naming why, nothing written', async () => {
  const r = await cli('fork', 'agent', '--to', 'bad', '--patch', '#1 llm.output_text="x"')
  assert.equal(r.code, EXIT_CODES[ErrorCodes.INVALID_PATCH])
  assert.match(
    r.err,
    /^error TR_INVALID_PATCH: Failed to resolve patch "#1 llm\.output_text="x"" against trace "agent": exchange #1 \(GET https:\/\/weather\.test\/forecast\?city=Oslo\) is not an LLM exchange/,
  )
  const missing = await cli('fork', 'agent', '--to', 'bad', '--patch', '#0 llm.tool_call[1].name=x')
  assert.match(missing.err, /has 1 tool call\(s\) \(tool_call\[0\] get_weather\), so tool_call\[1\] does not exist/)
  assert.doesNotMatch((await cli('ls')).out, /\bbad\b/)
})
