/** What the LLM SDK e2e tests expect the app to observe, shared by both capture paths. */
import assert from 'node:assert/strict'
import type { LedgerEntry } from '../../engine/index.ts'
import type { TraceStore } from '../../store/index.ts'
import type { FakeProviders } from './fake-llm-providers.ts'
import { MISS_BOUND_MS } from './llm-harness.ts'
import { changedRuns, MISS_SCENARIOS } from './llm-scenarios.ts'

type Observations = Record<string, Record<string, unknown>>

/**
 * The live run saw what the fixtures hold: each SDK parsed the fake providers' answers, the rate-limited
 * call was retried by the SDK after the 429, the stream cut surfaced as an error after the events that arrived.
 */
export function assertLiveRun(live: Observations, providers: FakeProviders): void {
  for (const [name, o] of Object.entries(live)) assert.equal(o.threw, undefined, `${name} threw: ${JSON.stringify(o.threw)}`)
  assert.match(String(live['openai-chat']?.content), /three 'r' letters/)
  assert.deepEqual(live['openai-chat-tool-stream'], {
    chunks: 15,
    finish: 'tool_calls',
    calls: [
      { id: 'call_cCPjAyfwTzboEKjVlqFrArNF', name: 'get_current_weather', arguments: { location: 'San Francisco' } },
      { id: 'call_Zi4He1Ns0mozwT6f85nW1BOW', name: 'get_current_weather', arguments: { location: 'Boston' } },
    ],
  })
  assert.equal(live['openai-chat-text-stream']?.chunks, 103)
  assert.equal((live['openai-chat-text-stream']?.usage as { total_tokens?: number } | undefined)?.total_tokens, 1520)
  assert.equal(live['openai-responses']?.text, 'The capital of France is Paris.')
  assert.deepEqual(
    { ...live['openai-responses-stream'], text: undefined },
    { events: 86, first: 'response.created', last: 'response.completed', sequenceInOrder: true, text: undefined },
  )
  assert.deepEqual(live['openai-structured'], { parsed: { city: 'Oslo', umbrella: true, reasons: ['rain after 14:00', 'wind 8 m/s'] } })
  assert.equal(live['openai-429']?.status, 200)
  const rateLimited = providers.requests.filter((r) => r.body.includes('[fault:429]'))
  assert.deepEqual(
    rateLimited.map((r) => r.headers['x-stainless-retry-count']),
    ['0', '1'],
    'the SDK retried the 429 once, by itself',
  )
  assert.deepEqual(live['openai-500'], {
    error: { name: 'InternalServerError', status: 500, message: '500 The server had an error while processing your request. Sorry about that!' },
  })
  assert.deepEqual(live['openai-stream-cut'], { chunks: 6, text: 'Structuring a database schema', error: { name: 'TypeError', message: 'terminated' } })
  assert.deepEqual(live['anthropic-tool-loop'], {
    turn1: {
      text: "I'll check the current weather in Paris for you.",
      tool: { name: 'get_weather', input: { location: 'Paris' } },
      jsonDeltas: 5,
      stop: 'tool_use',
    },
    turn2: { text: 'Hello there!', stop: 'end_turn' },
  })
  assert.deepEqual(live['ai-tool-loop'], {
    calls: [
      { name: 'calculator', input: { a: 12, b: 7, op: 'add' } },
      { name: 'calculator', input: { a: 19, b: 3, op: 'multiply' } },
      { name: 'calculator', input: { a: 57, b: 10, op: 'multiply' } },
    ],
    text: 'The final result is **570**.',
    steps: 4,
    finish: 'stop',
  })
  assert.deepEqual(live['langchain-tool-loop']?.calls, [
    { name: 'get_current_weather', args: { location: 'San Francisco' } },
    { name: 'get_current_weather', args: { location: 'Boston' } },
  ])
  assert.match(String(live['langchain-tool-loop']?.text), /^Structuring a database schema/)
}

/** The trace holds the faults as they happened: the 429 and its retry in order, the 500, the cut stream. */
export async function assertRecordedFaults(store: TraceStore, trace: string): Promise<void> {
  const t = await store.readTrace(trace)
  const text = (i: number) => {
    const ref = t.exchanges[i]?.request.body
    return ref ? Buffer.from(t.bodies.get(ref.digest) ?? []).toString() : ''
  }
  const outcome = (marker: string) =>
    t.exchanges.flatMap((x, i) =>
      text(i).includes(marker) ? [x.outcome.kind === 'response' ? x.outcome.response.status : `${x.outcome.error.code}@${x.outcome.error.phase}`] : [],
    )
  assert.deepEqual(outcome('[fault:429]'), [429, 200], 'the 429 and the retry that succeeded, in order')
  assert.deepEqual(outcome('[fault:500]'), [500])
  const cut = t.exchanges.find((_, i) => text(i).includes('[fault:cut]'))
  assert.equal(cut?.outcome.kind, 'error')
  if (cut?.outcome.kind === 'error') {
    assert.equal(cut.outcome.error.phase, 'response-body')
    assert.equal(cut.outcome.error.partial?.status, 200)
  }
}

const MISSED_URL: Record<keyof typeof MISS_SCENARIOS, string> = {
  openai: 'https://api.openai.test/v1/chat/completions',
  anthropic: 'https://api.anthropic.test/v1/messages',
  ai: 'https://api.openai.test/v1/responses',
  langchain: 'https://api.openai.test/v1/chat/completions',
}
const ERROR_CLASS: Record<keyof typeof MISS_SCENARIOS, string> = {
  openai: 'PermissionDeniedError',
  anthropic: 'PermissionDeniedError',
  ai: 'APICallError',
  langchain: 'PermissionDeniedError',
}

/**
 * Each changed prompt reached the app as the SDK's own error for a 403, with the miss and the closest
 * recorded request in its message; the best of the tries arrived within the contract's bound; `misses`
 * (when the caller has the ledger) holds each once, with no retry folded in. Returns the measured times.
 */
export function assertMisses(library: string, observed: Record<string, Record<string, unknown>>, misses?: readonly LedgerEntry[]): number[] {
  const lib = library as keyof typeof MISS_SCENARIOS
  const url = MISSED_URL[lib]
  const times = changedRuns(MISS_SCENARIOS[lib]).map((name, i) => {
    const error = observed[name]?.error as { name: string; message: string; status: number; elapsedMs: number } | undefined
    assert.ok(error, `${library}: expected an error from ${name}, got ${JSON.stringify(observed[name])}`)
    assert.equal(error.name, ERROR_CLASS[lib])
    assert.equal(error.status, 403)
    assert.ok(error.message.includes(`TR_REPLAY_MISS: Failed to replay "POST ${url}": no recorded exchange in trace`), error.message)
    assert.ok(error.message.includes(`closest recorded: "POST ${url}" (differs: body $.`), error.message)
    assert.ok(error.message.includes(`(asked differently #${i + 1})`), `${library}: the difference shows the changed prompt: ${error.message}`)
    return error.elapsedMs
  })
  const best = Math.min(...times)
  assert.ok(best < MISS_BOUND_MS, `${library}: the misses took ${times.map((t) => t.toFixed(1)).join(', ')} ms to reach the app (bound ${MISS_BOUND_MS} ms)`)
  if (misses) {
    assert.deepEqual(
      misses.map((m) => [m.request, m.attempts ?? 1]),
      times.map(() => [`POST ${url}`, 1]),
      `${library}: one ledger entry per changed call, no retries`,
    )
  }
  return times
}
