/**
 * One tool-calling run recorded twice compares as the same run under `tr-proxy diff --view llm`, for every SDK
 * (openai, @anthropic-ai/sdk, the AI SDK, LangChain, @google/genai, the AWS SDK's Bedrock client, the Agents SDK,
 * ollama) on every path: twice through the interceptor, twice through the forward proxy, and once through the
 * forward proxy against once in reverse mode. The fakes mint fresh ids for every answer, as real APIs do, so
 * the two recordings differ where real ones differ: the model's tool call ids (echoed back by the app in the
 * next request), response and item ids, encrypted reasoning, rate-limit headers, timings; and the two proxy
 * modes differ in what the client sends (accept-encoding). The test checks that they do differ byte for byte
 * (`--no-volatile`), then that the LLM view finds nothing.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { install } from '../interceptor/index.ts'
import { openStore } from '../store/index.ts'
import { diffTraces, headerValue, type Trace } from '../trace/index.ts'
import { ANTHROPIC_REAL_HOST, type FakeProviders, OPENAI_REAL_HOST, startFakeProviders } from './support/fake-llm-providers.ts'
import { API_SCENARIO_NAMES } from './support/llm-api-checks.ts'
import { runScenarios } from './support/llm-app.ts'
import { ANTHROPIC_KEY, appEnv, type LlmProviders, OPENAI_KEY, startLlmProviders } from './support/llm-harness.ts'
import { run, tempDir } from './support/proxy-harness.ts'
import { createTestPki } from './support/proxy-upstream.ts'

const BIN = fileURLToPath(new URL('../bin/tr-proxy.js', import.meta.url))
const APP = fileURLToPath(new URL('./support/llm-app.ts', import.meta.url))
/** A tool-calling run per SDK: each echoes ids the model made back in its next request. */
const OPENAI_FAMILY = ['openai-tool-loop', 'anthropic-tool-loop', 'ai-tool-loop', 'langchain-tool-loop']
const TOOL_LOOPS = [...OPENAI_FAMILY, ...API_SCENARIO_NAMES]
const storeDir = join(tempDir('tr-llm-twice-'), 'store')
let llm: LlmProviders

before(async () => {
  llm = await startLlmProviders({ freshIds: true })
})
after(async () => {
  await llm?.close()
})

/** `tr-proxy record [...args] -- node llm-app.ts SCENARIOS` with the given environment; the app's observations. */
async function recordWrapped(trace: string, args: string[], env: NodeJS.ProcessEnv, scenarios: readonly string[]): Promise<Record<string, unknown>> {
  const child = spawn(process.execPath, [BIN, 'record', '--store', storeDir, '--trace', trace, ...args, '--', process.execPath, APP, ...scenarios], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (c: Buffer) => (stdout += c))
  child.stderr.on('data', (c: Buffer) => (stderr += c))
  const [code] = await once(child, 'exit')
  assert.equal(code, 0, stderr)
  return JSON.parse(stdout) as Record<string, unknown>
}

async function readTraces(...names: string[]): Promise<Trace[]> {
  const store = await openStore(storeDir)
  try {
    return await Promise.all(names.map((n) => store.readTrace(n)))
  } finally {
    await store.close()
  }
}

/** The two recordings differ byte for byte (ids the model made, what the app echoed) but not in LLM terms. */
async function assertSameRun(a: string, b: string, differs: RegExp): Promise<void> {
  const [ta, tb] = await readTraces(a, b)
  const raw = diffTraces(ta as Trace, tb as Trace, { volatile: false })
  assert.ok(!raw.equal, 'the two recordings differ byte for byte')
  const rawText = JSON.stringify(raw.differences)
  assert.match(rawText, differs)
  const shown = await run(process.execPath, [BIN, '--store', storeDir, 'diff', a, b, '--view', 'llm', '--exit-code'], process.env)
  assert.equal(shown.code, 0, shown.stdout + shown.stderr)
  assert.match(shown.stdout, /\nno differences in LLM terms(\n|$)/, shown.stdout)
}

/** What the raw diffs must show: tool call ids of each API, echoed back in the next request. */
const ECHOED_IDS = [/"\$\.messages\[\d+\]\.tool_call_id"/, /tool_use_id/, /"\$\.input\[\d+\]\.call_id"/, /toolUseId/]

describe('one tool-calling run recorded twice is the same run in LLM terms', { timeout: 300_000 }, () => {
  test('twice through the interceptor, every SDK', async () => {
    const store = await openStore(storeDir)
    const observed: Array<Record<string, unknown>> = []
    try {
      for (const trace of ['twice-interceptor-1', 'twice-interceptor-2']) {
        const rec = await install({ mode: 'record', trace, store, upstream: llm.upstream })
        observed.push(await runScenarios(TOOL_LOOPS, llm.config))
        await rec.close()
      }
    } finally {
      await store.close()
    }
    for (const name of TOOL_LOOPS) assert.equal((observed[0]?.[name] as { threw?: unknown } | undefined)?.threw, undefined, name)
    assert.deepEqual(observed[1], observed[0], 'the app saw the same run twice')
    await assertSameRun('twice-interceptor-1', 'twice-interceptor-2', new RegExp(ECHOED_IDS.map((r) => r.source).join('|')))
    // Every API's echo differed: Chat tool_call_id, Anthropic tool_use_id, Responses call_id, Bedrock toolUseId.
    const [a, b] = (await readTraces('twice-interceptor-1', 'twice-interceptor-2')) as [Trace, Trace]
    const rawText = JSON.stringify(diffTraces(a, b, { volatile: false }).differences)
    for (const id of ECHOED_IDS) assert.match(rawText, id, `the app echoed a fresh id (${id.source}) in the second recording`)
  })

  test('twice through the forward proxy, every SDK', async () => {
    const env = { ...process.env, ...appEnv(llm.config) }
    for (const trace of ['twice-proxy-1', 'twice-proxy-2']) await recordWrapped(trace, llm.proxyArgs, env, TOOL_LOOPS)
    await assertSameRun('twice-proxy-1', 'twice-proxy-2', new RegExp(ECHOED_IDS.map((r) => r.source).join('|')))
  })
})

describe('a forward-proxy and a reverse-mode recording of one run are the same run in LLM terms', { timeout: 180_000 }, () => {
  let up: FakeProviders
  let pki: Awaited<ReturnType<typeof createTestPki>>
  before(async () => {
    pki = await createTestPki([OPENAI_REAL_HOST, ANTHROPIC_REAL_HOST])
    up = await startFakeProviders(pki.certs, { freshIds: true })
  })
  after(async () => {
    await up?.close()
  })

  test('openai, anthropic, the AI SDK and LangChain: HTTPS_PROXY against OPENAI_BASE_URL / ANTHROPIC_BASE_URL on the reverse port', async (t) => {
    const upstream = [
      '--resolve',
      `${OPENAI_REAL_HOST}=127.0.0.1:${up.port}`,
      '--resolve',
      `${ANTHROPIC_REAL_HOST}=127.0.0.1:${up.port}`,
      '--upstream-ca',
      pki.caPath,
    ]
    const clean: NodeJS.ProcessEnv = { ...process.env, OPENAI_API_KEY: OPENAI_KEY, ANTHROPIC_API_KEY: ANTHROPIC_KEY }
    for (const k of ['OPENAI_BASE_URL', 'ANTHROPIC_BASE_URL', 'HTTPS_PROXY', 'HTTP_PROXY', 'https_proxy', 'http_proxy']) delete clean[k]
    await recordWrapped(
      'forward',
      upstream,
      { ...clean, OPENAI_BASE_URL: `https://${OPENAI_REAL_HOST}/v1`, ANTHROPIC_BASE_URL: `https://${ANTHROPIC_REAL_HOST}` },
      OPENAI_FAMILY,
    )
    await recordWrapped(
      'reverse',
      [...upstream, '--reverse', `openai=https://${OPENAI_REAL_HOST}`, '--reverse', `anthropic=https://${ANTHROPIC_REAL_HOST}`],
      clean,
      OPENAI_FAMILY,
    )
    const [forward, reverse] = (await readTraces('forward', 'reverse')) as [Trace, Trace]
    // The two modes reach the same URLs with what the client sends over each: their encodings differ.
    const encodings = (t: Trace) => [...new Set(t.exchanges.map((x) => headerValue(x.request.headers, 'accept-encoding') ?? '(none)'))].sort().join(' | ')
    assert.notEqual(encodings(forward), encodings(reverse), `accept-encoding: forward ${encodings(forward)}, reverse ${encodings(reverse)}`)
    t.diagnostic(`accept-encoding: forward ${encodings(forward)}; reverse ${encodings(reverse)}`)
    await assertSameRun('forward', 'reverse', /tool_call_id|tool_use_id|call_id/)
  })
})
