/**
 * The LLM app of the cold-start miss benchmark, run by `tr-proxy replay --strict -- node llm-miss.ts SDK` (so it
 * gets HTTPS_PROXY, NODE_USE_ENV_PROXY and the CA from the wrapper): one streamed call with SDK's default
 * retries, as an LLM app makes it, to a provider host the trace never recorded. Its first request is the
 * miss, on a cold process, a cold proxy and a new MITM host. Prints `{ ms, at, status, message }`: ms from the
 * call to the error the app sees, `at` the wall time then (performance.timeOrigin based).
 */
// Each SDK is imported only when its call runs, as an app that uses one of them loads only that one.
// Provider hosts the trace never recorded; BENCH_*_BASE point the app at the limit's bare server instead.
const OPENAI = { apiKey: 'sk-bench-dummy', baseURL: process.env.BENCH_OPENAI_BASE ?? 'https://api.openai.test/v1' }
const ANTHROPIC_BASE = process.env.BENCH_ANTHROPIC_BASE ?? 'https://api.anthropic.test'
const PROMPT = 'What is the weather in Lisbon?'

/** Per SDK: imports it and makes its client (not timed), then returns the call (timed). */
const setups: Record<string, () => Promise<() => Promise<unknown>>> = {
  openai: async () => {
    const { default: OpenAI } = await import('openai')
    const client = new OpenAI(OPENAI)
    return async () => {
      const stream = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: PROMPT }], stream: true })
      for await (const _ of stream);
    }
  },
  anthropic: async () => {
    const { default: Anthropic } = await import('@anthropic-ai/sdk')
    const client = new Anthropic({ apiKey: 'sk-ant-bench-dummy', baseURL: ANTHROPIC_BASE })
    return async () => {
      const stream = await client.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 64, messages: [{ role: 'user', content: PROMPT }], stream: true })
      for await (const _ of stream);
    }
  },
  ai: async () => {
    const [{ createOpenAI }, { streamText }] = await Promise.all([import('@ai-sdk/openai'), import('ai')])
    const model = createOpenAI(OPENAI)('gpt-4o-mini')
    return async () => {
      const result = streamText({ model, prompt: PROMPT, onError: () => {} })
      for await (const part of result.fullStream) if (part.type === 'error') throw part.error
    }
  },
  langchain: async () => {
    const { ChatOpenAI } = await import('@langchain/openai')
    const model = new ChatOpenAI({ model: 'gpt-4o-mini', apiKey: OPENAI.apiKey, configuration: { baseURL: OPENAI.baseURL } })
    return async () => {
      for await (const _ of await model.stream(PROMPT));
    }
  },
}

const sdk = process.argv[2] as string
const setup = setups[sdk]
if (!setup) throw new Error(`llm-miss: unknown SDK ${sdk}`)
const call = await setup()
const t0 = performance.now()
try {
  await call()
  process.stdout.write(JSON.stringify({ ms: performance.now() - t0, at: performance.timeOrigin + performance.now(), status: 0, message: 'no error' }))
} catch (err) {
  const ms = performance.now() - t0
  const e = err as { status?: number; statusCode?: number; message?: string }
  process.stdout.write(
    JSON.stringify({ ms, at: performance.timeOrigin + ms + t0, status: e.status ?? e.statusCode ?? 0, message: String(e.message).slice(0, 300) }),
  )
}
