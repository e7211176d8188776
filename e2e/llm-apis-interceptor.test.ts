/**
 * Google Gemini (`@google/genai`, fetch), AWS Bedrock Converse and ConverseStream (`@aws-sdk/client-bedrock-runtime`,
 * node:https), the OpenAI Agents SDK (`@openai/agents`, a two-agent run with a handoff) and Ollama (`ollama`, plain
 * HTTP) through the interceptor (`install()`): record against local fakes speaking each wire format, strict replay
 * with the same observations and zero provider connections, no key or AWS secret stored, `tr-proxy show` reading
 * every call as a model turn (the handoff in the timeline), one fork by meaning per SDK that the real SDK parses,
 * and a changed prompt per SDK failing at once with the SDK's own error and no retry.
 */
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { install } from 'tool-replay/interceptor'
import { openStore, type TraceStore, traceDigest } from 'tool-replay/store'
import { forkTrace } from 'tool-replay/trace'
import {
  API_MISS_SCENARIOS,
  API_SCENARIO_NAMES,
  assertApiMisses,
  assertApiTimeline,
  assertForkSeen,
  assertLiveApis,
  forkPatches,
  forkTargets,
} from './support/llm-api-checks.ts'
import { runScenarios } from './support/llm-app.ts'
import { assertNoKeys, type LlmProviders, startLlmProviders } from './support/llm-harness.ts'
import { missRun } from './support/llm-scenarios.ts'
import { run, tempDir } from './support/proxy-harness.ts'

const BIN = fileURLToPath(new URL('../bin/tr-proxy.js', import.meta.url))
const TRACE = 'llm-apis'
let llm: LlmProviders
let store: TraceStore
const storeDir = join(tempDir('tr-llm-apis-interceptor-'), 'store')

before(async () => {
  llm = await startLlmProviders()
  store = await openStore(storeDir)
})
after(async () => {
  await store?.close()
  await llm?.close()
})

describe('Gemini, Bedrock, the Agents SDK and Ollama through the interceptor', { timeout: 120_000 }, () => {
  let live: Awaited<ReturnType<typeof runScenarios>>

  test('record: every scenario runs live against the fakes', async () => {
    const rec = await install({ mode: 'record', trace: TRACE, store, upstream: llm.upstream })
    live = await runScenarios(API_SCENARIO_NAMES, llm.config)
    const summary = await rec.close()
    assertLiveApis(live)
    assert.equal(summary.recorded, llm.providers.requests.length)
    assert.equal(summary.recorded, 13)
  })

  test('strict replay: the same observations, offline (zero provider connections), every recording used', async () => {
    const connections = llm.providers.connections
    const requests = llm.providers.requests.length
    const rep = await install({ mode: 'replay', trace: TRACE, store })
    const replayed = await runScenarios(API_SCENARIO_NAMES, llm.config)
    rep.assertDone()
    const summary = await rep.close()
    assert.equal(llm.providers.connections, connections, 'replay opened a provider connection')
    assert.equal(llm.providers.requests.length, requests)
    assert.equal(summary.replayed, requests)
    assert.deepEqual(replayed, live)
  })

  test('no key, AWS secret or session token is stored: decoded trace and store files', async () => {
    await assertNoKeys(store, TRACE, storeDir, { sees: 'using the customDivide function' })
  })

  test('tr-proxy show reads every call as a model turn, the handoff included', async () => {
    const shown = await run(process.execPath, [BIN, '--store', storeDir, 'show', TRACE], process.env)
    assert.equal(shown.code, 0, shown.stderr)
    assertApiTimeline(shown.stdout, TRACE)
  })

  test('a fork by meaning per SDK replays through the real SDK: SSE chunks, event stream frames, JSON and NDJSON re-encoded', async () => {
    const source = await store.readTrace(TRACE)
    const branch = forkTrace(source, { name: `${TRACE}-fork`, sourceDigest: traceDigest(source), patches: forkPatches(forkTargets(source)) })
    await store.putTrace(branch)
    const connections = llm.providers.connections
    const rep = await install({ mode: 'replay', trace: `${TRACE}-fork`, store })
    const forked = await runScenarios(API_SCENARIO_NAMES, llm.config)
    rep.assertDone()
    await rep.close()
    assert.equal(llm.providers.connections, connections, 'replay opened a provider connection')
    assertForkSeen(live, forked)
  })

  describe('a changed prompt fails at once in each SDK with its own error, TR_REPLAY_MISS and the closest recording', () => {
    for (const [library, scenario] of Object.entries(API_MISS_SCENARIOS)) {
      test(library, async (t) => {
        const rep = await install({ mode: 'replay', trace: TRACE, store })
        const observed = await runScenarios(missRun(scenario), llm.config)
        const summary = await rep.close()
        assert.deepEqual(observed[scenario], live[scenario], 'the recorded call replays before the changed one')
        const origins = { bedrock: llm.config.bedrockEndpoint as string, ollama: llm.config.ollamaHost as string }
        const times = assertApiMisses(library as keyof typeof API_MISS_SCENARIOS, observed, origins, summary.misses)
        t.diagnostic(`${library}: request to the app's error in ${times.map((ms) => ms.toFixed(1)).join(', ')} ms`)
      })
    }
  })
})
