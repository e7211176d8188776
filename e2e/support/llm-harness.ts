/** Shared setup for the LLM SDK e2e tests: fake providers over real TLS, the app's config, secret checks. */
import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import { Agent as HttpsAgent } from 'node:https'
import type { LookupFunction } from 'node:net'
import { Agent, buildConnector } from 'undici'
import type { TraceStore } from '../../store/index.ts'
import { bodyBytes, decodeContentEncoding, headerValue, type Trace } from '../../trace/index.ts'
import { AGENTS_HOST, BEDROCK_HOST, GEMINI_HOST } from './fake-llm-apis.ts'
import { ANTHROPIC_HOST, type FakeProviderOptions, type FakeProviders, OPENAI_HOST, startFakeProviders } from './fake-llm-providers.ts'
import { filesUnder } from './files-under.ts'
import type { LlmAppConfig } from './llm-app.ts'
import { createTestPki } from './proxy-upstream.ts'

/** Dummy keys: no real key is needed, and these must never reach the disk. */
export const OPENAI_KEY = 'sk-proj-dummy-tool-replay-e2e-7f3a9c'
export const ANTHROPIC_KEY = 'sk-ant-api03-dummy-tool-replay-e2e-4d1b'
export const GEMINI_KEY = 'AIzaSyDummyToolReplayE2eKey0123456789ab'
/** Dummy AWS credentials: the secret signs every Bedrock request (SigV4), the session token travels as x-amz-security-token. */
export const AWS_CREDENTIALS = {
  accessKeyId: 'ASIADUMMYTOOLREPLAY0E2E',
  secretAccessKey: 'dummy/tool+replay/e2e/secret/0123456789abcdef',
  sessionToken: 'IQoJb3JpZ2luX2VjEDummyToolReplayE2eSessionToken0123456789',
}
const SECRETS = [OPENAI_KEY, ANTHROPIC_KEY, GEMINI_KEY, AWS_CREDENTIALS.secretAccessKey, AWS_CREDENTIALS.sessionToken, AWS_CREDENTIALS.accessKeyId]

/**
 * The miss contract: request to the app's error. A refusal takes a few ms on an idle machine (2-40 ms
 * measured, docs/llm-apps.md); that no SDK retried is proven by the ledger (one entry, one attempt per call).
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

/** A DNS lookup that finds every host on 127.0.0.1. */
const loopback: LookupFunction = (_host, options, callback) => {
  if (options.all) callback(null, [{ address: '127.0.0.1', family: 4 }])
  else callback(null, '127.0.0.1', 4)
}

const HTTPS_HOSTS = [OPENAI_HOST, ANTHROPIC_HOST, GEMINI_HOST, BEDROCK_HOST, AGENTS_HOST]

/**
 * Starts the fake providers (api.openai.test, api.anthropic.test, the Gemini, Bedrock and Agents hosts over
 * HTTPS with their own test CA; Ollama over plain HTTP on 127.0.0.1).
 */
export async function startLlmProviders(options: FakeProviderOptions = {}): Promise<LlmProviders> {
  const pki = await createTestPki(HTTPS_HOSTS)
  const providers = await startFakeProviders(pki.certs, options)
  const tls = buildConnector({ ca: pki.caPem })
  const plain = buildConnector({})
  const upstream = new Agent({
    connect: (opts, callback) =>
      opts.protocol === 'https:'
        ? tls({ ...opts, hostname: '127.0.0.1', servername: opts.hostname, port: String(providers.port) }, callback)
        : plain(opts, callback),
  })
  const mapping = (host: string) => ['--resolve', `${host}=127.0.0.1:${providers.port}`]
  const bedrockHttpsAgent = new HttpsAgent({ keepAlive: true, ca: pki.caPem, lookup: loopback })
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
      geminiBaseURL: `https://${GEMINI_HOST}`,
      geminiApiKey: GEMINI_KEY,
      // node:http requests go live as the app sends them: its agent trusts the fakes' CA and finds them on loopback.
      bedrockEndpoint: `https://${BEDROCK_HOST}:${providers.port}`,
      bedrockHttpsAgent,
      aws: AWS_CREDENTIALS,
      agentsBaseURL: `https://${AGENTS_HOST}/v1`,
      ollamaHost: `http://127.0.0.1:${providers.ollamaPort}`,
    },
    proxyArgs: [...HTTPS_HOSTS.flatMap(mapping), '--upstream-ca', pki.caPath],
    async close() {
      bedrockHttpsAgent.destroy()
      await upstream.close()
      await providers.close()
    },
  }
}

/** The app's environment when it runs as a child (llm-app.ts reads these). */
export function appEnv(config: LlmAppConfig): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    OPENAI_BASE_URL: config.openaiBaseURL,
    ANTHROPIC_BASE_URL: config.anthropicBaseURL,
    OPENAI_API_KEY: config.openaiApiKey,
    ANTHROPIC_API_KEY: config.anthropicApiKey,
  }
  if (config.geminiBaseURL) env.GOOGLE_GEMINI_BASE_URL = config.geminiBaseURL
  if (config.geminiApiKey) env.GEMINI_API_KEY = config.geminiApiKey
  // A child reaches the fakes through the proxy, which maps the host: the default port, no test agent.
  if (config.bedrockEndpoint) env.AWS_ENDPOINT_URL_BEDROCK_RUNTIME = config.bedrockEndpoint.replace(/:\d+$/, '')
  if (config.aws) {
    env.AWS_ACCESS_KEY_ID = config.aws.accessKeyId
    env.AWS_SECRET_ACCESS_KEY = config.aws.secretAccessKey
    env.AWS_SESSION_TOKEN = config.aws.sessionToken
  }
  if (config.agentsBaseURL) env.AGENTS_OPENAI_BASE_URL = config.agentsBaseURL
  if (config.ollamaHost) env.OLLAMA_HOST = config.ollamaHost
  return env
}

/**
 * Asserts no dummy key is anywhere: in the decoded trace (headers, URLs, bodies decompressed) and in
 * any file under the store directory. Also checks the search would have seen the key had it been there.
 */
export async function assertNoKeys(store: TraceStore, trace: string, storeDir: string, options: { sees?: string } = {}): Promise<void> {
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
  assert.ok(decoded.includes(options.sees ?? 'Once upon a time'), 'the decoded search sees response bodies')
  for (const key of SECRETS) assert.equal(decoded.includes(key), false, `the decoded trace holds ${key}`)
  let files = 0
  for await (const file of filesUnder(storeDir)) {
    files++
    const bytes = await readFile(file)
    for (const key of SECRETS) assert.equal(bytes.includes(key), false, `${file} holds ${key}`)
  }
  assert.ok(files > 2, 'the store wrote files')
}
