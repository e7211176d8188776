/**
 * Real LLM SDKs through the proxy, as a user runs them: `tr-proxy record|replay -- node app.js` with the
 * proxy environment (HTTPS_PROXY, NODE_USE_ENV_PROXY, NODE_EXTRA_CA_CERTS). The same app and scenarios as
 * the interceptor test: openai in depth, @anthropic-ai/sdk, the Vercel AI SDK and @langchain/openai in
 * streamed tool loops; record → strict replay with zero provider connections → a miss per library that
 * fails at once.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { EXIT_CODES } from '../cli/exit-codes.ts'
import { openStore } from '../store/index.ts'
import { assertLiveRun, assertMisses, assertRecordedFaults } from './support/llm-assertions.ts'
import { appEnv, assertNoKeys, type LlmProviders, startLlmProviders } from './support/llm-harness.ts'
import { ALL_SCENARIOS, MISS_SCENARIOS, MISS_TRIES, missRun } from './support/llm-scenarios.ts'
import { tempDir } from './support/proxy-harness.ts'

const BIN = fileURLToPath(new URL('../bin/tr-proxy.js', import.meta.url))
const APP = fileURLToPath(new URL('./support/llm-app.ts', import.meta.url))
const TRACE = 'llm-sdks-proxy'
const REPLAY_CONTRACT_EXIT = EXIT_CODES.TR_REPLAY_INCOMPLETE
const storeDir = join(tempDir('tr-llm-proxy-'), 'store')
let llm: LlmProviders

before(async () => {
  llm = await startLlmProviders()
})
after(async () => {
  await llm?.close()
})

/** `tr-proxy MODE ... -- node llm-app.ts SCENARIOS`; resolves with the exit code, the app's observations and stderr. */
async function wrapped(mode: 'record' | 'replay', scenarios: readonly string[]) {
  const args = [
    BIN,
    mode,
    ...(mode === 'replay' ? ['--strict'] : []),
    '--store',
    storeDir,
    ...llm.proxyArgs,
    '--trace',
    TRACE,
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
  let observed: Record<string, Record<string, unknown>> = {}
  try {
    observed = JSON.parse(stdout)
  } catch {
    assert.fail(`the app printed no result (exit ${code}):\n${stdout}\n${stderr}`)
  }
  return { code: code as number, observed, stderr }
}

describe('LLM SDKs through tr-proxy -- node app', { timeout: 120_000 }, () => {
  let live: Record<string, Record<string, unknown>>

  test('record: every scenario runs live through the proxy', async () => {
    const rec = await wrapped('record', ALL_SCENARIOS)
    assert.equal(rec.code, 0, rec.stderr)
    live = rec.observed
    assertLiveRun(live, llm.providers)
    assert.match(rec.stderr, new RegExp(`record of trace "${TRACE}": 0 replayed, ${llm.providers.requests.length} recorded`))
    const store = await openStore(storeDir)
    try {
      await assertRecordedFaults(store, TRACE)
      await assertNoKeys(store, TRACE, storeDir)
    } finally {
      await store.close()
    }
  })

  test('strict replay: the same observations, offline (zero provider connections), every recording used', async () => {
    const connections = llm.providers.connections
    const requests = llm.providers.requests.length
    const rep = await wrapped('replay', ALL_SCENARIOS)
    assert.equal(rep.code, 0, rep.stderr)
    assert.match(
      rep.stderr,
      new RegExp(`replay of trace "${TRACE}": ${requests} replayed, 0 recorded, 0 passed through; 0 unmatched, 0 over the recorded count, 0 unused`),
    )
    assert.equal(llm.providers.connections, connections, 'replay opened a provider connection')
    assert.deepEqual(rep.observed, live)
  })

  describe('a changed prompt fails at once in each SDK, with TR_REPLAY_MISS and the closest recording', () => {
    // One app run for the four libraries (a run costs two process starts); each library is its own test.
    let run: ReturnType<typeof wrapped> | undefined
    const misses = () => (run ??= wrapped('replay', Object.values(MISS_SCENARIOS).flatMap(missRun)))

    test('the run fails with the replay-contract exit code and one ledger entry per changed call, no retries', async () => {
      const { code, stderr } = await misses()
      assert.equal(code, REPLAY_CONTRACT_EXIT, stderr)
      const expected = 4 * MISS_TRIES
      assert.match(stderr, new RegExp(`; ${expected} unmatched, 0 over the recorded count, \\d+ unused\\.`))
      assert.equal(stderr.match(/^ {2}TR_REPLAY_MISS POST https:\/\/api\.(openai|anthropic)\.test\/v1\/[a-z/]+: Failed to replay/gm)?.length, expected, stderr)
      assert.doesNotMatch(stderr, /attempts\)/)
    })
    for (const [library, scenario] of Object.entries(MISS_SCENARIOS)) {
      test(library, async (t) => {
        const { observed } = await misses()
        assert.deepEqual(observed[scenario], live[scenario], 'the recorded call replays before the changed one')
        const times = assertMisses(library, observed)
        t.diagnostic(`${library}: request to the app's error in ${times.map((ms) => ms.toFixed(1)).join(', ')} ms`)
      })
    }
  })
})
