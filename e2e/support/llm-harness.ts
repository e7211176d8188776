/** Shared setup for the LLM SDK e2e tests: fake providers over real TLS, the app's config, secret checks. */
import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import { Agent, buildConnector } from 'undici'
import type { TraceStore } from '../../store/index.ts'
import { bodyBytes, decodeContentEncoding, headerValue, type Trace } from '../../trace/index.ts'
import { ANTHROPIC_HOST, type FakeProviders, OPENAI_HOST, startFakeProviders } from './fake-llm-providers.ts'
import { filesUnder } from './files-under.ts'
import type { LlmAppConfig } from './llm-app.ts'
import { createTestPki } from './proxy-upstream.ts'

/** Dummy keys: no real key is needed, and these must never reach the disk. */
export const OPENAI_KEY = 'sk-proj-dummy-tool-replay-e2e-7f3a9c'
export const ANTHROPIC_KEY = 'sk-ant-api03-dummy-tool-replay-e2e-4d1b'

/**
 * The miss contract: request to the app's error. A refusal takes a few ms on an idle machine (2-40 ms
 * measured, README "LLM apps"); that no SDK retried is proven by the ledger (one entry, one attempt per call).
 * This bound only catches a gross regression: it stays below any SDK's first retry delay (>= 375 ms for
 * openai and anthropic, 2 s for the AI SDK) while leaving room for a loaded CI machine, where a single call has
 * taken up to ~340 ms.
 */
export const MISS_BOUND_MS = 300

/** The running fakes, the CA that signed them, and how to reach them from each capture path. */
export interface LlmProviders {
  providers: FakeProviders
  caPem: string
  caPath: string
  /** For the interceptor's live requests: resolves both hosts to the fakes and trusts their CA. */
  upstream: Agent
  /** The app's configuration (same base URLs on both paths). */
  config: LlmAppConfig
  /** `tr-proxy` arguments that map both hosts to the fakes and trust their CA. */
  proxyArgs: string[]
  close(): Promise<void>
}

/** Starts the fake providers for api.openai.test and api.anthropic.test with their own test CA. */
export async function startLlmProviders(): Promise<LlmProviders> {
  const pki = await createTestPki([OPENAI_HOST, ANTHROPIC_HOST])
  const providers = await startFakeProviders(pki.certs)
  const connector = buildConnector({ ca: pki.caPem })
  const upstream = new Agent({
    connect: (opts, callback) => connector({ ...opts, hostname: '127.0.0.1', servername: opts.hostname, port: String(providers.port) }, callback),
  })
  const mapping = (host: string) => ['--resolve', `${host}=127.0.0.1:${providers.port}`]
  return {
    providers,
    caPem: pki.caPem,
    caPath: pki.caPath,
    upstream,
    config: {
      openaiBaseURL: `https://${OPENAI_HOST}/v1`,
      anthropicBaseURL: `https://${ANTHROPIC_HOST}`,
      openaiApiKey: OPENAI_KEY,
      anthropicApiKey: ANTHROPIC_KEY,
    },
    proxyArgs: [...mapping(OPENAI_HOST), ...mapping(ANTHROPIC_HOST), '--upstream-ca', pki.caPath],
    async close() {
      await upstream.close()
      await providers.close()
    },
  }
}

/** The app's environment when it runs as a child (llm-app.ts reads these). */
export function appEnv(config: LlmAppConfig): NodeJS.ProcessEnv {
  return {
    OPENAI_BASE_URL: config.openaiBaseURL,
    ANTHROPIC_BASE_URL: config.anthropicBaseURL,
    OPENAI_API_KEY: config.openaiApiKey,
    ANTHROPIC_API_KEY: config.anthropicApiKey,
  }
}

/**
 * Asserts no dummy key is anywhere: in the decoded trace (headers, URLs, bodies decompressed) and in
 * any file under the store directory. Also checks the search would have seen the key had it been there.
 */
export async function assertNoKeys(store: TraceStore, trace: string, storeDir: string): Promise<void> {
  const t: Trace = await store.readTrace(trace)
  let decoded = JSON.stringify(t.exchanges)
  for (const x of t.exchanges) {
    const bodies = [x.request.body, x.outcome.kind === 'response' ? x.outcome.response.body : x.outcome.error.partial?.body]
    const headers = x.outcome.kind === 'response' ? x.outcome.response.headers : (x.outcome.error.partial?.headers ?? [])
    for (const ref of bodies) {
      if (!ref) continue
      const bytes = bodyBytes(t, ref)
      const encoding = ref === x.request.body ? headerValue(x.request.headers, 'content-encoding') : headerValue(headers, 'content-encoding')
      decoded += Buffer.from(encoding ? decodeContentEncoding(bytes, encoding) : bytes).toString('utf8')
    }
  }
  assert.ok(decoded.includes('[REDACTED]'), 'the authorization headers were recorded, redacted')
  assert.ok(decoded.includes('Once upon a time'), 'the decoded search sees response bodies')
  for (const key of [OPENAI_KEY, ANTHROPIC_KEY]) assert.equal(decoded.includes(key), false, `the decoded trace holds ${key}`)
  let files = 0
  for await (const file of filesUnder(storeDir)) {
    files++
    const bytes = await readFile(file)
    for (const key of [OPENAI_KEY, ANTHROPIC_KEY]) assert.equal(bytes.includes(key), false, `${file} holds ${key}`)
  }
  assert.ok(files > 2, 'the store wrote files')
}
