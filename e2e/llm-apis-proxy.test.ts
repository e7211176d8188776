/**
 * Google Gemini (`@google/genai`), AWS Bedrock Converse and ConverseStream (`@aws-sdk/client-bedrock-runtime`),
 * the OpenAI Agents SDK (`@openai/agents`, a two-agent run with a handoff) and Ollama (`ollama`, plain HTTP)
 * through the proxy, as a user runs them: `tr-proxy record|replay -- node app.js` with the proxy environment
 * (HTTPS_PROXY / HTTP_PROXY, NODE_USE_ENV_PROXY, NODE_EXTRA_CA_CERTS). The same app and checks as the interceptor
 * test: record → strict replay with zero provider connections → no secret stored → `tr-proxy show` → a fork
 * by meaning per SDK → a changed prompt per SDK failing at once, with no retry.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { EXIT_CODES } from '../cli/exit-codes.ts'
import { openStore, traceDigest } from '../store/index.ts'
import { forkTrace } from '../trace/index.ts'
import { BEDROCK_HOST } from './support/fake-llm-apis.ts'
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
import { appEnv, assertNoKeys, type LlmProviders, startLlmProviders } from './support/llm-harness.ts'
import { MISS_TRIES, missRun } from './support/llm-scenarios.ts'
import { run, tempDir } from './support/proxy-harness.ts'

const BIN = fileURLToPath(new URL('../bin/tr-proxy.js', import.meta.url))
const APP = fileURLToPath(new URL('./support/llm-app.ts', import.meta.url))
const TRACE = 'llm-apis-proxy'
const storeDir = join(tempDir('tr-llm-apis-proxy-'), 'store')
let llm: LlmProviders

before(async () => {
  llm = await startLlmProviders()
})
after(async () => {
  await llm?.close()
})

type Observations = Record<string, Record<string, unknown>>

/** `tr-proxy MODE ... -- node llm-app.ts SCENARIOS`; resolves with the exit code, the app's observations and stderr. */
async function wrapped(mode: 'record' | 'replay', trace: string, scenarios: readonly string[]) {
  const args = [
    BIN,
    mode,
    ...(mode === 'replay' ? ['--strict'] : []),
    '--store',
    storeDir,
    ...llm.proxyArgs,
    '--trace',
    trace,
    '--',
    process.execPath,
    APP,
    ...scenarios,
  ]
  const child = spawn(process.execPath, args, { env: { ...process.env, ...appEnv(llm.config) }, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (c: Buffer) => (stdout += c))
  child.stderr.on('data', (c: Buffer) => (stderr += c))
  const [code] = await once(child, 'exit')
  let observed: Observations = {}
  try {
    observed = JSON.parse(stdout)
  } catch {
    assert.fail(`the app printed no result (exit ${code}):\n${stdout}\n${stderr}`)
  }
  return { code: code as number, observed, stderr }
}

const origins = () => ({ bedrock: `https://${BEDROCK_HOST}`, ollama: llm.config.ollamaHost as string })

describe('Gemini, Bedrock, the Agents SDK and Ollama through tr-proxy -- node app', { timeout: 180_000 }, () => {
  let live: Observations

  test('record: every scenario runs live through the proxy', async () => {
    const rec = await wrapped('record', TRACE, API_SCENARIO_NAMES)
    assert.equal(rec.code, 0, rec.stderr)
    live = rec.observed
    assertLiveApis(live)
    assert.match(rec.stderr, new RegExp(`record of trace "${TRACE}": 0 replayed, 13 recorded`))
    assert.equal(llm.providers.requests.length, 13)
  })

  test('strict replay: the same observations, offline (zero provider connections), every recording used', async () => {
    const connections = llm.providers.connections
    const rep = await wrapped('replay', TRACE, API_SCENARIO_NAMES)
    assert.equal(rep.code, 0, rep.stderr)
    assert.match(
      rep.stderr,
      new RegExp(`replay of trace "${TRACE}": 13 replayed, 0 recorded, 0 passed through; 0 unmatched, 0 over the recorded count, 0 unused`),
    )
    assert.equal(llm.providers.connections, connections, 'replay opened a provider connection')
    assert.deepEqual(rep.observed, live)
  })

  test('no key, AWS secret or session token is stored; tr-proxy show reads every call as a model turn, the handoff included', async () => {
    const store = await openStore(storeDir)
    try {
      await assertNoKeys(store, TRACE, storeDir, { sees: 'using the customDivide function' })
    } finally {
      await store.close()
    }
    const shown = await run(process.execPath, [BIN, '--store', storeDir, 'show', TRACE], process.env)
    assert.equal(shown.code, 0, shown.stderr)
    assertApiTimeline(shown.stdout, TRACE)
  })

  test('a fork by meaning per SDK replays through the real SDK in a child behind the proxy', async () => {
    const store = await openStore(storeDir)
    try {
      const source = await store.readTrace(TRACE)
      await store.putTrace(forkTrace(source, { name: `${TRACE}-fork`, sourceDigest: traceDigest(source), patches: forkPatches(forkTargets(source)) }))
    } finally {
      await store.close()
    }
    const connections = llm.providers.connections
    const rep = await wrapped('replay', `${TRACE}-fork`, API_SCENARIO_NAMES)
    assert.equal(rep.code, 0, rep.stderr)
    assert.equal(llm.providers.connections, connections, 'replay opened a provider connection')
    assertForkSeen(live, rep.observed)
  })

  describe('a changed prompt fails at once in each SDK with its own error, TR_REPLAY_MISS and the closest recording', () => {
    // One app run for the four SDKs (a run costs two process starts); each SDK is its own test.
    let runOnce: ReturnType<typeof wrapped> | undefined
    const misses = () => (runOnce ??= wrapped('replay', TRACE, Object.values(API_MISS_SCENARIOS).flatMap(missRun)))

    test('the run fails with the replay-contract exit code and one ledger entry per changed call, no retries', async () => {
      const { code, stderr } = await misses()
      assert.equal(code, EXIT_CODES.TR_REPLAY_INCOMPLETE, stderr)
      const expected = 4 * MISS_TRIES
      assert.match(stderr, new RegExp(`; ${expected} unmatched, 0 over the recorded count, \\d+ unused\\.`))
      assert.equal(stderr.match(/^ {2}TR_REPLAY_MISS POST \S+: Failed to replay/gm)?.length, expected, stderr)
      assert.doesNotMatch(stderr, /attempts\)/)
    })
    for (const [library, scenario] of Object.entries(API_MISS_SCENARIOS)) {
      test(library, async (t) => {
        const { observed } = await misses()
        assert.deepEqual(observed[scenario], live[scenario], 'the recorded call replays before the changed one')
        const times = assertApiMisses(library as keyof typeof API_MISS_SCENARIOS, observed, origins())
        t.diagnostic(`${library}: request to the app's error in ${times.map((ms) => ms.toFixed(1)).join(', ')} ms`)
      })
    }
  })
})
