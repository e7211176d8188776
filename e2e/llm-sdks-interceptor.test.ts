/**
 * Real LLM SDKs through the interceptor (`install()`): openai (Chat Completions and Responses, streamed and
 * not, parallel tool calls, structured output, a 429 then success, a 500, a stream cut mid-way),
 * @anthropic-ai/sdk, the Vercel AI SDK and @langchain/openai in streamed tool loops. Recorded against local
 * HTTPS fake providers, replayed strictly with zero provider connections, then a changed prompt per
 * library must fail at once with TR_REPLAY_MISS.
 */
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { install } from 'tool-replay/interceptor'
import { openStore, type TraceStore } from 'tool-replay/store'
import { runScenarios } from './support/llm-app.ts'
import { assertLiveRun, assertMisses, assertRecordedFaults } from './support/llm-assertions.ts'
import { assertNoKeys, type LlmProviders, startLlmProviders } from './support/llm-harness.ts'
import { ALL_SCENARIOS, MISS_SCENARIOS, missRun } from './support/llm-scenarios.ts'
import { tempDir } from './support/proxy-harness.ts'

const TRACE = 'llm-sdks'
let llm: LlmProviders
let store: TraceStore
const storeDir = join(tempDir('tr-llm-interceptor-'), 'store')

before(async () => {
  llm = await startLlmProviders()
  store = await openStore(storeDir)
})
after(async () => {
  await store?.close()
  await llm?.close()
})

describe('LLM SDKs through the interceptor', () => {
  let live: Awaited<ReturnType<typeof runScenarios>>

  test('record: every scenario runs live against the fake providers', async () => {
    const rec = await install({ mode: 'record', trace: TRACE, store, upstream: llm.upstream })
    live = await runScenarios(ALL_SCENARIOS, llm.config)
    const summary = await rec.close()
    assertLiveRun(live, llm.providers)
    assert.equal(summary.recorded, llm.providers.requests.length)
    await assertRecordedFaults(store, TRACE)
  })

  test('strict replay: the same observations, offline (zero provider connections), every recording used', async () => {
    const connections = llm.providers.connections
    const requests = llm.providers.requests.length
    const rep = await install({ mode: 'replay', trace: TRACE, store })
    const replayed = await runScenarios(ALL_SCENARIOS, llm.config)
    rep.assertDone()
    const summary = await rep.close()
    assert.equal(llm.providers.connections, connections, 'replay opened a provider connection')
    assert.equal(llm.providers.requests.length, requests)
    assert.equal(summary.replayed, requests)
    assert.deepEqual(replayed, live)
  })

  test('no API key is stored: decoded trace and store files', async () => {
    await assertNoKeys(store, TRACE, storeDir)
  })

  describe('a changed prompt fails at once in each SDK, with TR_REPLAY_MISS and the closest recording', () => {
    for (const [library, scenario] of Object.entries(MISS_SCENARIOS)) {
      test(library, async (t) => {
        const rep = await install({ mode: 'replay', trace: TRACE, store })
        const observed = await runScenarios(missRun(scenario), llm.config)
        const summary = await rep.close()
        assert.deepEqual(observed[scenario], live[scenario], 'the recorded call replays before the changed one')
        const times = assertMisses(library, observed, summary.misses)
        t.diagnostic(`${library}: request to the app's error in ${times.map((ms) => ms.toFixed(1)).join(', ')} ms`)
      })
    }
  })
})
