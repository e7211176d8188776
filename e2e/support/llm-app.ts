/**
 * An app that uses the real LLM SDKs the way apps do, for the LLM SDK e2e tests. Each scenario returns
 * what the app observed (text, tool calls, parsed output, errors) as plain JSON, so a recorded run and
 * its replay can be compared. The same code runs in-process under the interceptor and as a child process
 * under `tr-proxy record|replay -- node e2e/support/llm-app.ts SCENARIO...` (stdout: one JSON object).
 *
 * Every SDK runs at its default retry settings except where a scenario says otherwise. API keys are
 * dummies: the fake providers accept anything.
 */
import { fileURLToPath } from 'node:url'
import { createOpenAI } from '@ai-sdk/openai'
import Anthropic from '@anthropic-ai/sdk'
import { type AIMessageChunk, type BaseMessage, HumanMessage, ToolMessage } from '@langchain/core/messages'
import { ChatOpenAI } from '@langchain/openai'
import { jsonSchema, stepCountIs, streamText, tool } from 'ai'
import OpenAI from 'openai'
import { zodResponseFormat } from 'openai/helpers/zod'
import { z } from 'zod'
import { API_SCENARIOS } from './llm-app-apis.ts'
import { type LlmAppConfig, type Observation, type ObservedError, observe, prompt, type Scenario } from './llm-observe.ts'
import { CHANGED } from './llm-scenarios.ts'

export type { LlmAppConfig, ObservedError } from './llm-observe.ts'

const openai = (c: LlmAppConfig) => new OpenAI({ apiKey: c.openaiApiKey, baseURL: c.openaiBaseURL })

const WEATHER_TOOL = {
  type: 'function' as const,
  function: {
    name: 'get_current_weather',
    description: 'Get the current weather',
    parameters: {
      type: 'object',
      properties: { location: { type: 'string', description: 'The city and state, e.g. San Francisco, CA' } },
      required: ['location'],
    },
  },
}

/** Chat Completions, not streamed (the provider gzips it). */
const openaiChat: Scenario = async (c) => {
  const r = await observe(() =>
    openai(c).chat.completions.create({
      model: 'gpt-5-nano',
      messages: [{ role: 'user', content: prompt(c, "Count r's in strawberry") }],
      reasoning_effort: 'low',
    }),
  )
  if (!r.ok) return { error: r.error }
  return { id: r.value.id, content: r.value.choices[0]?.message.content, finish: r.value.choices[0]?.finish_reason, usage: r.value.usage }
}

/** Chat Completions streamed with two parallel tool calls whose arguments arrive as deltas. */
const openaiChatToolStream: Scenario = async (c) => {
  const args: Record<number, { id?: string; name?: string; arguments: string }> = {}
  let chunks = 0
  let finish: string | null | undefined
  const stream = await openai(c).chat.completions.create({
    model: 'gpt-3.5-turbo',
    stream: true,
    messages: [{ role: 'user', content: "What's the weather like in San Francisco and Boston?" }],
    tools: [WEATHER_TOOL],
  })
  for await (const chunk of stream) {
    chunks++
    const choice = chunk.choices[0]
    finish = choice?.finish_reason ?? finish
    for (const t of choice?.delta.tool_calls ?? []) {
      const call = (args[t.index] ??= { arguments: '' })
      call.id ??= t.id
      call.name ??= t.function?.name
      call.arguments += t.function?.arguments ?? ''
    }
  }
  const calls = Object.values(args).map((a) => ({ id: a.id, name: a.name, arguments: JSON.parse(a.arguments) as unknown }))
  return { chunks, finish, calls }
}

/** Chat Completions in a tool loop: two streamed tool calls, the app's tool results (echoing the call ids), the streamed answer. */
const openaiToolLoop: Scenario = async (c) => {
  const client = openai(c)
  const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: 'user', content: prompt(c, "What's the weather like in San Francisco and Boston?") }]
  const first = await client.chat.completions.stream({ model: 'gpt-3.5-turbo', messages, tools: [WEATHER_TOOL] }).finalChatCompletion()
  const message = first.choices[0]?.message
  const calls = (message?.tool_calls ?? []).flatMap((t) => (t.type === 'function' ? [t] : []))
  messages.push({ role: 'assistant', content: message?.content ?? null, tool_calls: calls })
  for (const call of calls) messages.push({ role: 'tool', tool_call_id: call.id, content: `Sunny in ${JSON.parse(call.function.arguments).location}` })
  const second = await client.chat.completions.stream({ model: 'gpt-3.5-turbo', messages, tools: [WEATHER_TOOL] }).finalChatCompletion()
  return { calls: calls.map((t) => t.function.name), text: second.choices[0]?.message.content?.slice(0, 40) }
}

/** Chat Completions streamed as text with a final usage chunk. */
const openaiChatTextStream: Scenario = async (c) => {
  let text = ''
  let chunks = 0
  let usage: unknown
  const stream = await openai(c).chat.completions.create({
    model: 'gpt-4o',
    stream: true,
    stream_options: { include_usage: true },
    messages: [{ role: 'user', content: 'How should I structure a database schema?' }],
  })
  for await (const chunk of stream) {
    chunks++
    text += chunk.choices[0]?.delta.content ?? ''
    usage = chunk.usage ?? usage
  }
  return { chunks, text, usage }
}

/** Responses, not streamed. */
const openaiResponses: Scenario = async (c) => {
  const r = await openai(c).responses.create({ model: 'gpt-4.1-nano', input: 'What is the capital of France?' })
  return { id: r.id, status: r.status, text: r.output_text, usage: r.usage }
}

/** Responses, streamed: the event types in order and the text they carry. */
const openaiResponsesStream: Scenario = async (c) => {
  const types: string[] = []
  const sequence: number[] = []
  let text = ''
  const stream = await openai(c).responses.create({ model: 'gpt-4.1-nano', input: 'Tell me a three sentence bedtime story about a unicorn.', stream: true })
  for await (const event of stream) {
    types.push(event.type)
    sequence.push(event.sequence_number)
    if (event.type === 'response.output_text.delta') text += event.delta
  }
  return { events: types.length, first: types[0], last: types.at(-1), sequenceInOrder: sequence.every((n, i) => n === i), text }
}

/** Structured output: a zod schema as response_format, parsed by the SDK. */
const openaiStructured: Scenario = async (c) => {
  const Weather = z.object({ city: z.string(), umbrella: z.boolean(), reasons: z.array(z.string()) })
  const r = await openai(c).chat.completions.parse({
    model: 'gpt-4o',
    messages: [{ role: 'user', content: 'Do I need an umbrella in Oslo today?' }],
    response_format: zodResponseFormat(Weather, 'weather'),
  })
  return { parsed: r.choices[0]?.message.parsed }
}

/** A 429 with retry-after-ms: the SDK waits and retries on its own; the app sees only the success. */
const openaiRateLimited: Scenario = async (c) => {
  const { data, response } = await openai(c)
    .chat.completions.create({ model: 'gpt-5-nano', messages: [{ role: 'user', content: 'Answer after a rate limit [fault:429]' }] })
    .withResponse()
  return { content: data.choices[0]?.message.content, status: response.status }
}

/** A 500, with retries off for this call: the app gets the SDK's InternalServerError. */
const openaiServerError: Scenario = async (c) => {
  const r = await observe(() =>
    openai(c).chat.completions.create(
      { model: 'gpt-5-nano', messages: [{ role: 'user', content: 'Fail with a server error [fault:500]' }] },
      { maxRetries: 0 },
    ),
  )
  return r.ok ? { unexpected: 'success' } : { error: { name: r.error.name, status: r.error.status, message: r.error.message } }
}

/** A stream whose connection dies mid-way: the app keeps what arrived and sees the SDK's error. */
const openaiStreamCut: Scenario = async (c) => {
  let text = ''
  let chunks = 0
  const r = await observe(async () => {
    const stream = await openai(c).chat.completions.create({
      model: 'gpt-4o',
      stream: true,
      messages: [{ role: 'user', content: 'Stream, then lose the connection [fault:cut]' }],
    })
    for await (const chunk of stream) {
      chunks++
      text += chunk.choices[0]?.delta.content ?? ''
    }
  })
  return { chunks, text, error: r.ok ? null : { name: r.error.name, message: r.error.message } }
}

/** Anthropic Messages, streamed, in a tool loop: text + tool_use (input_json_delta), the tool result, the answer. */
const anthropicToolLoop: Scenario = async (c) => {
  const client = new Anthropic({ apiKey: c.anthropicApiKey, baseURL: c.anthropicBaseURL })
  const tools: Anthropic.Tool[] = [
    {
      name: 'get_weather',
      description: 'Current weather for a city',
      input_schema: { type: 'object', properties: { location: { type: 'string' } }, required: ['location'] },
    },
  ]
  const messages: Anthropic.MessageParam[] = [{ role: 'user', content: prompt(c, 'What is the weather in Paris?') }]
  let jsonDeltas = 0
  const first = await observe(async () => {
    const stream = client.messages.stream({ model: 'claude-opus-4-8', max_tokens: 1024, tools, messages })
    stream.on('inputJson', () => jsonDeltas++)
    return stream.finalMessage()
  })
  if (!first.ok) return { error: first.error }
  const toolUse = first.value.content.find((b) => b.type === 'tool_use')
  if (toolUse?.type !== 'tool_use') return { unexpected: 'no tool_use', content: first.value.content }
  messages.push({ role: 'assistant', content: first.value.content })
  messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: toolUse.id, content: '18°C, light rain' }] })
  const second = await client.messages.stream({ model: 'claude-opus-4-8', max_tokens: 1024, tools, messages }).finalMessage()
  const text = (m: Anthropic.Message) => m.content.flatMap((b) => (b.type === 'text' ? [b.text] : [])).join('')
  return {
    turn1: { text: text(first.value), tool: { name: toolUse.name, input: toolUse.input }, jsonDeltas, stop: first.value.stop_reason },
    turn2: { text: text(second), stop: second.stop_reason },
  }
}

/** Vercel AI SDK: streamText with a calculator tool over the Responses API, looping until the model answers. */
const aiToolLoop: Scenario = async (c) => {
  const provider = createOpenAI({ apiKey: c.openaiApiKey, baseURL: c.openaiBaseURL })
  const calculator = tool({
    description: 'A minimal calculator for basic arithmetic. Call it once per step.',
    inputSchema: jsonSchema<{ a: number; b: number; op: 'add' | 'subtract' | 'multiply' | 'divide' }>({
      type: 'object',
      properties: { a: { type: 'number' }, b: { type: 'number' }, op: { type: 'string', enum: ['add', 'subtract', 'multiply', 'divide'] } },
      required: ['a', 'b', 'op'],
      additionalProperties: false,
    }),
    execute: async ({ a, b, op }) => ({ add: a + b, subtract: a - b, multiply: a * b, divide: a / b })[op],
  })
  const calls: unknown[] = []
  let text = ''
  const t0 = performance.now()
  let error: ObservedError | undefined
  const result = streamText({
    model: provider('gpt-5.1-codex-max'),
    prompt: prompt(c, 'Compute ((12 + 7) * 3) * 10 with the calculator, one step at a time.'),
    tools: { calculator },
    stopWhen: stepCountIs(6),
    onError: () => {},
  })
  for await (const part of result.fullStream) {
    if (part.type === 'tool-call') calls.push({ name: part.toolName, input: part.input })
    if (part.type === 'text-delta') text += part.text
    if (part.type === 'error' && !error) {
      const e = part.error as Error & { statusCode?: number }
      error = {
        name: e.constructor?.name ?? e.name,
        message: e.message,
        ...(e.statusCode === undefined ? {} : { status: e.statusCode }),
        elapsedMs: performance.now() - t0,
      }
    }
  }
  if (error) return { error }
  return { calls, text, steps: (await result.steps).length, finish: await result.finishReason }
}

/** LangChain: ChatOpenAI with a bound tool, streamed, then the tool results and the streamed answer. */
const langchainToolLoop: Scenario = async (c) => {
  const model = new ChatOpenAI({ model: 'gpt-3.5-turbo', apiKey: c.openaiApiKey, configuration: { baseURL: c.openaiBaseURL } }).bindTools([WEATHER_TOOL])
  const messages: BaseMessage[] = [new HumanMessage(prompt(c, "What's the weather like in San Francisco and Boston?"))]
  const first = await observe(async () => {
    let gathered: AIMessageChunk | undefined
    for await (const chunk of await model.stream(messages)) gathered = gathered ? gathered.concat(chunk) : chunk
    return gathered as AIMessageChunk
  })
  if (!first.ok) return { error: first.error }
  const calls = first.value.tool_calls ?? []
  messages.push(first.value)
  for (const call of calls) messages.push(new ToolMessage({ tool_call_id: call.id ?? '', content: `Sunny in ${String(call.args.location)}` }))
  let text = ''
  for await (const chunk of await model.stream(messages)) text += typeof chunk.content === 'string' ? chunk.content : ''
  return { calls: calls.map((t) => ({ name: t.name, args: t.args })), text }
}

/** Every scenario by name, in the order `all` runs them. */
export const SCENARIOS: Record<string, Scenario> = {
  'openai-chat': openaiChat,
  'openai-chat-tool-stream': openaiChatToolStream,
  'openai-chat-text-stream': openaiChatTextStream,
  'openai-tool-loop': openaiToolLoop,
  'openai-responses': openaiResponses,
  'openai-responses-stream': openaiResponsesStream,
  'openai-structured': openaiStructured,
  'openai-429': openaiRateLimited,
  'openai-500': openaiServerError,
  'openai-stream-cut': openaiStreamCut,
  'anthropic-tool-loop': anthropicToolLoop,
  'ai-tool-loop': aiToolLoop,
  'langchain-tool-loop': langchainToolLoop,
  ...API_SCENARIOS,
}

/**
 * Runs scenarios in order (`NAME~changed-N` runs NAME with its first prompt changed, the N-th way); a scenario that
 * throws is reported as such, and the others still run. Results are keyed by the names given.
 */
export async function runScenarios(names: readonly string[], config: LlmAppConfig): Promise<Record<string, Observation>> {
  const out: Record<string, Observation> = {}
  for (const name of names) {
    const [base, changed] = name.split(CHANGED) as [string, string | undefined]
    const scenario = SCENARIOS[base]
    if (!scenario) throw new Error(`unknown scenario "${name}"; known: ${Object.keys(SCENARIOS).join(', ')}`)
    try {
      out[name] = await scenario(changed === undefined ? config : { ...config, changed: Number(changed) })
    } catch (err) {
      out[name] = { threw: { name: (err as Error).constructor?.name, message: (err as Error).message } }
    }
  }
  return out
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  // As a child process: configuration from the environment, scenarios from argv, results on stdout.
  const env = process.env
  const names = process.argv.slice(2)
  const results = await runScenarios(names, {
    openaiBaseURL: env.OPENAI_BASE_URL ?? '',
    anthropicBaseURL: env.ANTHROPIC_BASE_URL ?? '',
    openaiApiKey: env.OPENAI_API_KEY ?? '',
    anthropicApiKey: env.ANTHROPIC_API_KEY ?? '',
    ...(env.GOOGLE_GEMINI_BASE_URL ? { geminiBaseURL: env.GOOGLE_GEMINI_BASE_URL } : {}),
    ...(env.GEMINI_API_KEY ? { geminiApiKey: env.GEMINI_API_KEY } : {}),
    ...(env.AWS_ENDPOINT_URL_BEDROCK_RUNTIME ? { bedrockEndpoint: env.AWS_ENDPOINT_URL_BEDROCK_RUNTIME } : {}),
    ...(env.AWS_ACCESS_KEY_ID
      ? { aws: { accessKeyId: env.AWS_ACCESS_KEY_ID, secretAccessKey: env.AWS_SECRET_ACCESS_KEY ?? '', sessionToken: env.AWS_SESSION_TOKEN ?? '' } }
      : {}),
    ...(env.AGENTS_OPENAI_BASE_URL ? { agentsBaseURL: env.AGENTS_OPENAI_BASE_URL } : {}),
    ...(env.OLLAMA_HOST ? { ollamaHost: env.OLLAMA_HOST } : {}),
  })
  process.stdout.write(`${JSON.stringify(results)}\n`)
}
