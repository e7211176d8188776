/**
 * The LLM app of the cold-start miss benchmark, run by `tr-proxy replay --strict -- node llm-miss.ts SDK` (so it
 * gets HTTPS_PROXY, NODE_USE_ENV_PROXY and the CA from the wrapper): one streamed call with SDK's default
 * retries, as an LLM app makes it, to a provider host the trace never recorded. Its first request is the
 * miss, on a cold process, a cold proxy and a new MITM host. Prints `{ ms, at, status, message }`: ms from the
 * call to the error the app sees, `at` the wall time then (performance.timeOrigin based).
 */
import { createOpenAI } from '@ai-sdk/openai'
import Anthropic from '@anthropic-ai/sdk'
import { ChatOpenAI } from '@langchain/openai'
import { streamText } from 'ai'
import OpenAI from 'openai'

const OPENAI = { apiKey: 'sk-bench-dummy', baseURL: 'https://api.openai.test/v1' }
const PROMPT = 'What is the weather in Lisbon?'

const calls: Record<string, () => Promise<unknown>> = {
  openai: async () => {
    const stream = await new OpenAI(OPENAI).chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: PROMPT }], stream: true })
    for await (const _ of stream);
  },
  anthropic: async () => {
    const client = new Anthropic({ apiKey: 'sk-ant-bench-dummy', baseURL: 'https://api.anthropic.test' })
    const stream = await client.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 64, messages: [{ role: 'user', content: PROMPT }], stream: true })
    for await (const _ of stream);
  },
  ai: async () => {
    const result = streamText({ model: createOpenAI(OPENAI)('gpt-4o-mini'), prompt: PROMPT, onError: () => {} })
    for await (const part of result.fullStream) if (part.type === 'error') throw part.error
  },
  langchain: async () => {
    const model = new ChatOpenAI({ model: 'gpt-4o-mini', apiKey: OPENAI.apiKey, configuration: { baseURL: OPENAI.baseURL } })
    for await (const _ of await model.stream(PROMPT));
  },
}

const sdk = process.argv[2] as string
const call = calls[sdk]
if (!call) throw new Error(`llm-miss: unknown SDK ${sdk}`)
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
