/** What the LLM e2e apps observe of an SDK call: its result, or its error with the time it took to reach the app. */

/** Where the app sends its model calls, and with which (dummy) keys. */
export interface LlmAppConfig {
  openaiBaseURL: string
  anthropicBaseURL: string
  openaiApiKey: string
  anthropicApiKey: string
  /** Gemini API base URL (`httpOptions.baseUrl` of @google/genai). */
  geminiBaseURL?: string
  geminiApiKey?: string
  /** Bedrock runtime endpoint (the AWS SDK's `endpoint`). */
  bedrockEndpoint?: string
  /**
   * The https.Agent the Bedrock client sends through (in-process only): node:http requests go live the way the app
   * sends them, so the test's agent must trust the fakes' CA and resolve their host to loopback.
   */
  bedrockHttpsAgent?: import('node:https').Agent
  /** Dummy AWS credentials (a session token, so SigV4 sends x-amz-security-token). */
  aws?: { accessKeyId: string; secretAccessKey: string; sessionToken: string }
  /** The OpenAI base URL the Agents SDK run uses. */
  agentsBaseURL?: string
  /** Ollama's address (`http://127.0.0.1:PORT`). */
  ollamaHost?: string
  /** When set, the first prompt of a scenario is changed, the n-th way (a request the recording never saw). */
  changed?: number
}

/** What the app saw when an SDK call failed. */
export interface ObservedError {
  /** The error's class. */
  name: string
  /** Its `name`, where that differs from the class (an AWS service error names its type there). */
  type?: string
  message: string
  status?: number
  /** ms from the SDK call to the app's catch. */
  elapsedMs: number
}

/** A scenario's observations, as plain JSON. */
export type Observation = Record<string, unknown>
/** One scenario of an app. */
export type Scenario = (config: LlmAppConfig) => Promise<Observation>

/** Runs `call`, returning its result or what the app saw of its error (with the time it took to arrive). */
export async function observe<T>(call: () => Promise<T>): Promise<{ ok: true; value: T } | { ok: false; error: ObservedError }> {
  const t0 = performance.now()
  try {
    return { ok: true, value: await call() }
  } catch (err) {
    const e = err as Error & { status?: number; statusCode?: number; status_code?: number; $metadata?: { httpStatusCode?: number } }
    const status = e.status ?? e.statusCode ?? e.status_code ?? e.$metadata?.httpStatusCode
    const name = e.constructor?.name ?? e.name
    return {
      ok: false,
      error: {
        name,
        ...(e.name !== name && e.name !== undefined && e.name !== 'Error' ? { type: e.name } : {}),
        message: e.message,
        ...(status === undefined ? {} : { status }),
        elapsedMs: performance.now() - t0,
      },
    }
  }
}

/** The scenario's first prompt, changed the n-th way when the config says so. */
export const prompt = (config: LlmAppConfig, text: string) => (config.changed === undefined ? text : `${text} (asked differently #${config.changed})`)
