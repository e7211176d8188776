/**
 * What the e2e tests of Gemini, Bedrock, the Agents SDK and Ollama expect, shared by both capture paths: the
 * live observations, the timeline `show` prints for their turns, one fork by meaning per SDK and what the app
 * then sees, and each SDK's miss.
 */
import assert from 'node:assert/strict'
import type { LedgerEntry } from '../../engine/index.ts'
import { llmView, type Trace } from '../../trace/index.ts'
import { AGENTS_HOST, GEMINI_HOST } from './fake-llm-apis.ts'
import { MISS_BOUND_MS } from './llm-harness.ts'
import type { ObservedError } from './llm-observe.ts'
import { changedRuns } from './llm-scenarios.ts'

type Observations = Record<string, Record<string, unknown>>

/** The scenarios of these SDKs, in order. */
export const API_SCENARIO_NAMES = [
  'gemini-tool-loop',
  'gemini-stream-tool-loop',
  'bedrock-tool-loop',
  'bedrock-stream-tool-loop',
  'agents-handoff',
  'ollama-chat',
] as const

/** The scenario per library whose first request a changed prompt turns into a miss. */
export const API_MISS_SCENARIOS = { gemini: 'gemini-tool-loop', bedrock: 'bedrock-tool-loop', agents: 'agents-handoff', ollama: 'ollama-chat' } as const

const GEMINI_ANSWER = "I've divided 10 by 2 using the customDivide function, and the result is 42.\n"
const GEMINI_STREAM_ANSWER =
  'I cannot fulfill this request. The customDivide function does not return the correct result of 10 / 2. The function seems to be flawed and returns 42.\n'
const BEDROCK_ANSWER =
  'The password you requested, "blah", is not long enough. Password policies typically require passwords to be at least 8 characters long. Please try again with a longer password.'
const SPANISH = '¡Hola! Estoy muy bien, gracias. ¿En qué puedo ayudarte?'
const SKY = 'The sky is blue because of Rayleigh scattering.'

/** Each SDK parsed the fakes' answers: the tool calls, the answers, the handoff, the streamed lines. */
export function assertLiveApis(live: Observations): void {
  for (const name of API_SCENARIO_NAMES) assert.equal(live[name]?.threw, undefined, `${name} threw: ${JSON.stringify(live[name]?.threw)}`)
  const divide = { name: 'customDivide', args: { denominator: 2, numerator: 10 } }
  assert.deepEqual(live['gemini-tool-loop'], { call: divide, text: GEMINI_ANSWER, finish: 'STOP', usage: 52 })
  assert.deepEqual(live['gemini-stream-tool-loop'], { calls: [divide], chunks: 4, text: GEMINI_STREAM_ANSWER, finish: 'STOP' })
  assert.deepEqual(live['bedrock-tool-loop'], {
    uses: [
      { name: 'get_resistor_value', input: { ref: 'R1' } },
      { name: 'get_capacitor_value', input: { ref: 'C1' } },
    ],
    stop1: 'tool_use',
    text: BEDROCK_ANSWER,
    stop2: 'end_turn',
    usage: 541,
    attempts: [1, 1],
  })
  assert.deepEqual(live['bedrock-stream-tool-loop'], {
    events: ['messageStart', 'contentBlockStart', 'contentBlockDelta', 'contentBlockDelta', 'contentBlockStop', 'messageStop', 'metadata'],
    tool: { name: 'get_resistor_value', input: { value: 'Sparkle Day' } },
    stop1: 'tool_use',
    text: 'OK.',
    stop2: 'end_turn',
    usage: 17,
  })
  assert.deepEqual(live['agents-handoff'], {
    lastAgent: 'Spanish agent',
    finalOutput: SPANISH,
    items: ['handoff_call_item', 'handoff_output_item', 'message_output_item'],
  })
  assert.deepEqual(live['ollama-chat'], { call: { name: 'get_weather', arguments: { city: 'Oslo' } }, text: SKY, lines: 10, reason: 'stop', generated: SKY })
}

/**
 * What `tr-proxy show` prints for these turns: one line per model turn (the model named when it changes, tool
 * calls and results named, the handoff and the agent that takes over), and no call left as plain HTTP.
 */
export function assertApiTimeline(shown: string, trace: string): void {
  const expected = [
    '#0 model gemini-2.0-flash → tool_call customDivide {"denominator":2,"numerator":10}',
    '#1 model ← tool_result customDivide "{\\"output\\":5}" → "I\'ve divided 10 by 2 using the customDivide function, and t…"',
    '#2 model → tool_call customDivide {"denominator":2,"numerator":10}',
    '#3 model ← tool_result customDivide "{\\"output\\":5}" → "I cannot fulfill this request. The customDivide function do…"',
    '#4 model anthropic.claude-3-5-sonnet-20241022-v2:0 → "Sure! I\'ll look up both values simultaneously right away!" + tool_calls get_resistor_value {"ref":"R1"}, get_capacitor_value {"ref":"C1"}',
    '#5 model ← tool_result get_resistor_value "4.7k ({\\"ref\\":\\"R1\\"})", tool_result get_capacitor_value "100nF ({\\"ref\\":\\"C1\\"})" → "The password you requested, \\"blah\\", is not long enough. Pas…"',
    '#6 model → tool_call get_resistor_value {"value":"Sparkle Day"}',
    '#7 model ← tool_result get_resistor_value "4.7k ({\\"value\\":\\"Sparkle Day\\"})" → "OK."',
    '#8 model gpt-4.1-2025-04-14 → handoff → Spanish agent (transfer_to_Spanish_agent)',
    `#9 model [Spanish agent] ← handoff to Spanish agent → "${SPANISH}"`,
    '#10 model llama3.2 → tool_call get_weather {"city":"Oslo"}',
    `#11 model ← tool_result get_weather "{\\"rain\\":true}" → "${SKY}"`,
    `#12 model → "${SKY}"`,
  ]
  // The timeline, up to the app's outcome that `show` prints after it for a run of a command.
  const lines = shown.trimEnd().split('\n')
  const app = lines.findIndex((l) => l.startsWith('app: '))
  assert.deepEqual(app < 0 ? lines : lines.slice(0, app), [`trace "${trace}": 13 exchanges, 13 model turns`, ...expected])
}

/** The model turn to fork per SDK: the final turn of each loop (forking it changes no later request). */
export function forkTargets(trace: Trace): { gemini: number; bedrock: number; agents: number; ollama: number } {
  const views = trace.exchanges.map((x) => ({ seq: x.seq, v: llmView(trace, x) }))
  const find = (what: string, pick: (v: NonNullable<ReturnType<typeof llmView>>) => boolean) => {
    const hit = views.find((e) => e.v !== undefined && pick(e.v))
    assert.ok(hit, `no model turn for ${what}`)
    return hit.seq
  }
  return {
    gemini: find('the streamed Gemini answer', (v) => v.api === 'google.gemini' && v.stream && v.toolResults.length > 0),
    bedrock: find('the ConverseStream answer', (v) => v.api === 'aws.bedrock.converse' && v.stream && v.toolResults.length > 0),
    agents: find('the Spanish agent', (v) => v.api === 'openai.responses' && v.toolResults.some((r) => r.handoff !== undefined)),
    ollama: find('the streamed Ollama answer', (v) => v.api === 'ollama.chat' && v.toolResults.length > 0),
  }
}

/** The fork per SDK: the answer text, re-encoded in its own framing (SSE chunks, event stream frames, JSON, NDJSON). */
export const FORKED = {
  gemini: 'Forked: 10 / 2 is 5.',
  bedrock: 'Forked answer from Bedrock.',
  agents: '¡Bifurcado!',
  ollama: 'Forked: it will rain in Oslo.',
}

/** The patches of that fork. */
export function forkPatches(t: ReturnType<typeof forkTargets>): string[] {
  return [
    `#${t.gemini} llm.output_text=${JSON.stringify(FORKED.gemini)}`,
    `#${t.bedrock} llm.output_text=${JSON.stringify(FORKED.bedrock)}`,
    `#${t.agents} llm.output_text=${JSON.stringify(FORKED.agents)}`,
    `#${t.ollama} llm.output_text=${JSON.stringify(FORKED.ollama)}`,
  ]
}

/** The app, replaying the fork, saw the forked answers and everything else as recorded. */
export function assertForkSeen(live: Observations, forked: Observations): void {
  const expected: Observations = {
    ...live,
    'gemini-stream-tool-loop': { ...live['gemini-stream-tool-loop'], text: FORKED.gemini },
    'bedrock-stream-tool-loop': { ...live['bedrock-stream-tool-loop'], text: FORKED.bedrock },
    'agents-handoff': { ...live['agents-handoff'], finalOutput: FORKED.agents },
    'ollama-chat': { ...live['ollama-chat'], text: FORKED.ollama },
  }
  assert.deepEqual(forked, expected)
}

const MISSED_URL = (o: Origins): Record<keyof typeof API_MISS_SCENARIOS, string> => ({
  gemini: `https://${GEMINI_HOST}/v1/models/gemini-2.0-flash:generateContent`,
  bedrock: `${o.bedrock}/model/anthropic.claude-3-5-sonnet-20241022-v2%3A0/converse`,
  agents: `https://${AGENTS_HOST}/v1/responses`,
  ollama: `${o.ollama}/api/chat`,
})

/** Where the app reached Bedrock (the interceptor's app names the fakes' port) and Ollama. */
export interface Origins {
  bedrock: string
  ollama: string
}

/** Each SDK's own error for a refusal: the class it throws, and where its message carries the refusal's text. */
const ERROR_OF: Record<keyof typeof API_MISS_SCENARIOS, { name: string; type?: string; text: (e: ObservedError) => string }> = {
  // @google/genai's ApiError message is the error body as JSON: Google's {error: {code, message, status}}.
  gemini: { name: 'ApiError', text: (e) => (JSON.parse(e.message) as { error: { message: string; status: string } }).error.message },
  // The AWS SDK's service exception, named by the x-amzn-errortype header, its message the body's.
  bedrock: { name: 'BedrockRuntimeServiceException', type: 'ToolReplayRefusedException', text: (e) => e.message },
  // The openai client (under the Agents SDK) prefixes the status.
  agents: { name: 'PermissionDeniedError', text: (e) => e.message.replace(/^403 /, '') },
  // The ollama client's message is the body's `error` string.
  ollama: { name: 'ResponseError', text: (e) => e.message },
}

/**
 * Each changed prompt reached the app as the SDK's own error for a 403, its message the refusal's (the miss and
 * the closest recording), the best of the tries within the bound; `misses` (when the caller has the ledger)
 * holds each once, with no retry folded in. Returns the measured times.
 */
export function assertApiMisses(library: keyof typeof API_MISS_SCENARIOS, observed: Observations, origins: Origins, misses?: readonly LedgerEntry[]): number[] {
  const url = MISSED_URL(origins)[library]
  const times = changedRuns(API_MISS_SCENARIOS[library]).map((name, i) => {
    const error = observed[name]?.error as ObservedError | undefined
    assert.ok(error, `${library}: expected an error from ${name}, got ${JSON.stringify(observed[name])}`)
    assert.equal(error.name, ERROR_OF[library].name, JSON.stringify(error))
    assert.equal(error.type, ERROR_OF[library].type, JSON.stringify(error))
    assert.equal(error.status, 403)
    const text = ERROR_OF[library].text(error)
    assert.ok(text.startsWith(`TR_REPLAY_MISS: Failed to replay "POST ${url}": no recorded exchange in trace`), text)
    assert.ok(text.includes(`closest recorded: "POST ${url}" (differs: body $.`), text)
    assert.ok(text.includes(`(asked differently #${i + 1})`), `${library}: the difference shows the changed prompt: ${text}`)
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
