/**
 * Reverse mode with the real SDKs, across capture paths. `tr-proxy record --reverse https://api.openai.com
 * --reverse ...` runs an app that only gets OPENAI_BASE_URL / ANTHROPIC_BASE_URL from the wrapper (no proxy
 * variables, no CA); the trace it writes is stored under the providers' own URLs, so it replays in-process
 * through the interceptor and through the forward proxy. The other way round, a trace the interceptor
 * recorded replays through the reverse port. Every replay is strict, with zero provider connections.
 * The providers are the local HTTPS fakes (e2e/support/fake-llm-providers.ts) answering as api.openai.com
 * and api.anthropic.com, which `--resolve` maps to loopback.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { Agent, buildConnector } from 'undici'
import { install } from '../interceptor/index.ts'
import { openStore } from '../store/index.ts'
import { ANTHROPIC_REAL_HOST, type FakeProviders, OPENAI_REAL_HOST, startFakeProviders } from './support/fake-llm-providers.ts'
import { runScenarios } from './support/llm-app.ts'
import { ANTHROPIC_KEY, OPENAI_KEY } from './support/llm-harness.ts'
import { ALL_SCENARIOS } from './support/llm-scenarios.ts'
import { tempDir } from './support/proxy-harness.ts'
import { createTestPki } from './support/proxy-upstream.ts'

const BIN = fileURLToPath(new URL('../bin/tr-proxy.js', import.meta.url))
const APP = fileURLToPath(new URL('./support/llm-app.ts', import.meta.url))
/** Every OpenAI scenario (JSON, streams, tool calls, a 429 then success, a 500, a cut stream) and an Anthropic tool loop. */
const SCENARIOS = [...ALL_SCENARIOS.filter((s) => s.startsWith('openai-')), 'anthropic-tool-loop']
const work = tempDir('tr-reverse-llm-')
const storeDir = join(work, 'store')
/** A preload that writes what the app process was given (its base URLs, proxy and CA variables) to a file. */
const PROBE = join(work, 'env-probe.mjs')
const PROBED = join(work, 'app-env.json')
const PROBED_KEYS = ['OPENAI_BASE_URL', 'ANTHROPIC_BASE_URL', 'HTTPS_PROXY', 'HTTP_PROXY', 'NODE_USE_ENV_PROXY', 'NODE_EXTRA_CA_CERTS']
writeFileSync(
  PROBE,
  `import { writeFileSync } from 'node:fs'\nif (process.argv[1]?.endsWith('llm-app.ts')) writeFileSync(${JSON.stringify(PROBED)}, JSON.stringify(Object.fromEntries(${JSON.stringify(PROBED_KEYS)}.map((k) => [k, process.env[k] ?? null]))))\n`,
)
/** The SDKs' own default base URLs: what the in-process app uses. */
const REAL = {
  openaiBaseURL: `https://${OPENAI_REAL_HOST}/v1`,
  anthropicBaseURL: `https://${ANTHROPIC_REAL_HOST}`,
  openaiApiKey: OPENAI_KEY,
  anthropicApiKey: ANTHROPIC_KEY,
}
let pki: Awaited<ReturnType<typeof createTestPki>>

before(async () => {
  pki = await createTestPki([OPENAI_REAL_HOST, ANTHROPIC_REAL_HOST])
})

/** Fresh fake providers (their 429 scenario answers 429 to the first attempt only, so each recording gets its own). */
async function providers(): Promise<FakeProviders> {
  return startFakeProviders(pki.certs)
}

/** `tr-proxy MODE [--reverse ...] ... -- node llm-app.ts SCENARIOS`; the app's observations and stderr. */
async function wrapped(mode: 'record' | 'replay', trace: string, up: FakeProviders, proxyArgs: string[], env: NodeJS.ProcessEnv) {
  const args = [
    BIN,
    mode,
    '--store',
    storeDir,
    '--trace',
    trace,
    ...proxyArgs,
    '--resolve',
    `${OPENAI_REAL_HOST}=127.0.0.1:${up.port}`,
    '--resolve',
    `${ANTHROPIC_REAL_HOST}=127.0.0.1:${up.port}`,
    '--upstream-ca',
    pki.caPath,
    '--',
    process.execPath,
    APP,
    ...SCENARIOS,
  ]
  const clean = { ...process.env }
  for (const k of [...PROBED_KEYS, 'https_proxy', 'http_proxy']) delete clean[k]
  const child = spawn(process.execPath, args, {
    env: { ...clean, OPENAI_API_KEY: OPENAI_KEY, ANTHROPIC_API_KEY: ANTHROPIC_KEY, NODE_OPTIONS: `--import=${PROBE}`, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (c: Buffer) => (stdout += c))
  child.stderr.on('data', (c: Buffer) => (stderr += c))
  const [code] = await once(child, 'exit')
  assert.equal(code, 0, `${mode} exited ${code}:\n${stderr}`)
  const appEnv = JSON.parse(readFileSync(PROBED, 'utf8')) as Record<string, string | null>
  return { observed: JSON.parse(stdout) as Record<string, unknown>, stderr, appEnv }
}

const REVERSE = ['--reverse', `openai=https://${OPENAI_REAL_HOST}`, '--reverse', `anthropic=https://${ANTHROPIC_REAL_HOST}`]

describe('reverse mode with the real SDKs, across capture paths', { timeout: 180_000 }, () => {
  let up: FakeProviders
  let live: Record<string, unknown>
  before(async () => {
    up = await providers()
  })
  after(async () => {
    await up?.close()
  })

  test('record through the reverse port: the app gets OPENAI_BASE_URL / ANTHROPIC_BASE_URL (and the proxy variables); the trace holds the providers’ URLs', async () => {
    const rec = await wrapped('record', 'reverse-llm', up, REVERSE, {})
    live = rec.observed
    // The SDKs' base URLs point at the proxy port; the proxy variables are there too, so a host no mount
    // serves would still be recorded (or refused in strict replay) rather than reached directly.
    assert.match(rec.appEnv.OPENAI_BASE_URL ?? '', /^http:\/\/127\.0\.0\.1:\d+\/openai\/v1$/)
    const origin = (rec.appEnv.OPENAI_BASE_URL as string).replace('/openai/v1', '')
    assert.deepEqual(rec.appEnv, {
      OPENAI_BASE_URL: `${origin}/openai/v1`,
      ANTHROPIC_BASE_URL: `${origin}/anthropic`,
      HTTPS_PROXY: origin,
      HTTP_PROXY: origin,
      NODE_USE_ENV_PROXY: '1',
      NODE_EXTRA_CA_CERTS: rec.appEnv.NODE_EXTRA_CA_CERTS,
    })
    assert.match(rec.stderr, new RegExp(`record of trace "reverse-llm": 0 replayed, ${up.requests.length} recorded`))
    // The fakes were reached as the real hosts (Host rewritten), never as the proxy's address.
    assert.deepEqual([...new Set(up.requests.map((r) => r.host))].sort(), [ANTHROPIC_REAL_HOST, OPENAI_REAL_HOST])
    assert.equal(typeof (live['openai-chat'] as { content?: unknown }).content, 'string', JSON.stringify(live['openai-chat']))
    for (const name of SCENARIOS) assert.equal((live[name] as { threw?: unknown }).threw, undefined, `${name}: ${JSON.stringify(live[name])}`)
    const store = await openStore(storeDir)
    try {
      const trace = await store.readTrace('reverse-llm')
      const origins = new Set(trace.exchanges.map((x) => new URL(x.request.url).origin))
      assert.deepEqual([...origins].sort(), [`https://${ANTHROPIC_REAL_HOST}`, `https://${OPENAI_REAL_HOST}`])
      assert.equal(trace.exchanges.length, up.requests.length)
      assert.equal(JSON.stringify(trace.exchanges).includes('127.0.0.1'), false, 'the trace names the proxy')
    } finally {
      await store.close()
    }
  })

  test('…replays in-process through the interceptor (the SDKs at their default base URLs), offline', async () => {
    const connections = up.connections
    const store = await openStore(storeDir)
    try {
      const tr = await install({ mode: 'replay', trace: 'reverse-llm', store })
      const replayed = await runScenarios(SCENARIOS, REAL)
      const summary = await tr.close()
      assert.ok(summary.ok, JSON.stringify(summary))
      assert.deepEqual(replayed, live)
    } finally {
      await store.close()
    }
    assert.equal(up.connections, connections, 'replay opened a provider connection')
  })

  test('…and through the forward proxy (HTTPS_PROXY, the MITM CA), offline', async () => {
    const connections = up.connections
    const rep = await wrapped('replay', 'reverse-llm', up, [], { OPENAI_BASE_URL: REAL.openaiBaseURL, ANTHROPIC_BASE_URL: REAL.anthropicBaseURL })
    assert.deepEqual(rep.observed, live)
    assert.match(rep.stderr, /0 unmatched, 0 over the recorded count, 0 unused/)
    assert.equal(up.connections, connections, 'replay opened a provider connection')
  })
})

describe('the other way round: an interceptor-recorded trace replays through the reverse port', { timeout: 180_000 }, () => {
  test('record in-process, replay with OPENAI_BASE_URL=http://127.0.0.1:PORT/openai/v1, offline', async () => {
    const up = await providers()
    try {
      const connector = buildConnector({ ca: pki.caPem })
      const upstream = new Agent({
        connect: (opts, cb) => connector({ ...opts, hostname: '127.0.0.1', servername: opts.hostname, port: String(up.port) }, cb),
      })
      const store = await openStore(storeDir)
      let live: Record<string, unknown>
      try {
        const tr = await install({ mode: 'record', trace: 'interceptor-llm', store, upstream })
        live = await runScenarios(SCENARIOS, REAL)
        await tr.close()
      } finally {
        await store.close()
        await upstream.close()
      }
      const connections = up.connections
      const rep = await wrapped('replay', 'interceptor-llm', up, REVERSE, {})
      assert.deepEqual(rep.observed, live)
      assert.match(rep.stderr, /0 unmatched, 0 over the recorded count, 0 unused/)
      assert.equal(up.connections, connections, 'replay opened a provider connection')
    } finally {
      await up.close()
    }
  })
})
