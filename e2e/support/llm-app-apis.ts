/**
 * Scenarios of the LLM e2e app for Google Gemini (`@google/genai`), AWS Bedrock (`@aws-sdk/client-bedrock-runtime`),
 * the OpenAI Agents SDK (`@openai/agents`) and Ollama (`ollama`), each used the way apps use it: a tool loop per
 * model API (JSON and streamed), a two-agent run with a handoff, an Ollama chat with a tool and a streamed answer.
 * llm-app.ts runs them beside the openai / anthropic / AI SDK / LangChain scenarios. Every SDK runs at its
 * default retry settings; keys and AWS credentials are dummies.
 */
import https from 'node:https'
import { BedrockRuntimeClient, type ContentBlock, ConverseCommand, ConverseStreamCommand, type Message, type Tool } from '@aws-sdk/client-bedrock-runtime'
import { type Content, FunctionCallingConfigMode, GoogleGenAI } from '@google/genai'
import { Agent, run, setDefaultOpenAIClient, setTracingDisabled } from '@openai/agents'
import { NodeHttpHandler } from '@smithy/node-http-handler'
import { Ollama, type Message as OllamaMessage } from 'ollama'
import OpenAI from 'openai'
import { type LlmAppConfig, type Observation, observe, prompt, type Scenario } from './llm-observe.ts'

// ---- Gemini ---------------------------------------------------------------------------------------------------

const genai = (c: LlmAppConfig) => new GoogleGenAI({ apiKey: c.geminiApiKey ?? '', httpOptions: { baseUrl: c.geminiBaseURL ?? '' } })

const DIVIDE = {
  tools: [
    {
      functionDeclarations: [
        {
          name: 'customDivide',
          description: 'Custom divide function',
          parametersJsonSchema: { type: 'object', properties: { numerator: { type: 'number' }, denominator: { type: 'number' } } },
        },
      ],
    },
  ],
  toolConfig: { functionCallingConfig: { mode: FunctionCallingConfigMode.AUTO } },
}

const divide = (args: Record<string, unknown> | undefined) => Number(args?.numerator) / Number(args?.denominator)

/** Gemini generateContent in a tool loop: a function call, the app's function response, the answer. */
const geminiToolLoop: Scenario = async (c) => {
  const ai = genai(c)
  const contents: Content[] = [{ role: 'user', parts: [{ text: prompt(c, 'Divide 10 by 2 using the customDivide function') }] }]
  const first = await observe(() => ai.models.generateContent({ model: 'gemini-2.0-flash', contents, config: DIVIDE }))
  if (!first.ok) return { error: first.error }
  const call = first.value.functionCalls?.[0]
  if (!call) return { unexpected: 'no function call', text: first.value.text }
  contents.push(first.value.candidates?.[0]?.content as Content)
  contents.push({ role: 'user', parts: [{ functionResponse: { name: call.name ?? '', response: { output: divide(call.args) } } }] })
  const second = await ai.models.generateContent({ model: 'gemini-2.0-flash', contents, config: DIVIDE })
  return {
    call: { name: call.name, args: call.args },
    text: second.text,
    finish: second.candidates?.[0]?.finishReason,
    usage: second.usageMetadata?.totalTokenCount,
  }
}

/** Gemini streamGenerateContent (SSE) in a tool loop: the streamed function call, then the streamed answer. */
const geminiStreamToolLoop: Scenario = async (c) => {
  const ai = genai(c)
  const contents: Content[] = [{ role: 'user', parts: [{ text: prompt(c, 'Divide 10 by 2 using the customDivide function') }] }]
  const calls: Array<{ name?: string; args?: Record<string, unknown> }> = []
  const first = await observe(async () => {
    for await (const chunk of await ai.models.generateContentStream({ model: 'gemini-2.0-flash', contents, config: DIVIDE }))
      for (const f of chunk.functionCalls ?? []) calls.push({ name: f.name, args: f.args })
  })
  if (!first.ok) return { error: first.error }
  const call = calls[0]
  if (!call) return { unexpected: 'no function call' }
  contents.push({ role: 'model', parts: [{ functionCall: { name: call.name, args: call.args } }] })
  contents.push({ role: 'user', parts: [{ functionResponse: { name: call.name ?? '', response: { output: divide(call.args) } } }] })
  let text = ''
  let chunks = 0
  let finish: string | undefined
  for await (const chunk of await ai.models.generateContentStream({ model: 'gemini-2.0-flash', contents, config: DIVIDE })) {
    chunks++
    text += chunk.text ?? ''
    finish = chunk.candidates?.[0]?.finishReason ?? finish
  }
  return { calls, chunks, text, finish }
}

// ---- Bedrock --------------------------------------------------------------------------------------------------

/**
 * The Bedrock Runtime client sends over HTTP/2 by default (NodeHttp2Handler, for bidirectional streams), which
 * neither capture path sees; HTTP/1.1 (NodeHttpHandler) serves Converse and ConverseStream alike. Its own
 * https.Agent reads HTTPS_PROXY only with `proxyEnv` (Node's NODE_USE_ENV_PROXY covers the global agents).
 */
const bedrock = (c: LlmAppConfig) =>
  new BedrockRuntimeClient({
    region: 'us-east-1',
    requestHandler: new NodeHttpHandler({
      httpsAgent: c.bedrockHttpsAgent ?? new https.Agent({ keepAlive: true, proxyEnv: process.env } as https.AgentOptions),
    }),
    ...(c.bedrockEndpoint ? { endpoint: c.bedrockEndpoint } : {}),
    ...(c.aws ? { credentials: c.aws } : {}),
  })

const MODEL_ID = 'anthropic.claude-3-5-sonnet-20241022-v2:0'
const PART_TOOLS: Tool[] = ['get_resistor_value', 'get_capacitor_value'].map((name) => ({
  toolSpec: {
    name,
    description: `Look up a ${name.split('_')[1]} by reference`,
    inputSchema: { json: { type: 'object', properties: { ref: { type: 'string' } } } },
  },
}))
const partValue = (name: string | undefined, input: unknown) => `${name === 'get_resistor_value' ? '4.7k' : '100nF'} (${JSON.stringify(input)})`

/** Bedrock Converse in a tool loop: two parallel tool uses, the app's tool results, the answer. */
const bedrockToolLoop: Scenario = async (c) => {
  const client = bedrock(c)
  const messages: Message[] = [{ role: 'user', content: [{ text: prompt(c, 'What are the values of R1 and C1?') }] }]
  const first = await observe(() => client.send(new ConverseCommand({ modelId: MODEL_ID, messages, toolConfig: { tools: PART_TOOLS } })))
  if (!first.ok) return { error: first.error }
  const content = first.value.output?.message?.content ?? []
  const uses = content.flatMap((b) => (b.toolUse ? [b.toolUse] : []))
  messages.push({ role: 'assistant', content })
  messages.push({
    role: 'user',
    content: uses.map((u): ContentBlock => ({ toolResult: { toolUseId: u.toolUseId, content: [{ text: partValue(u.name, u.input) }], status: 'success' } })),
  })
  const second = await client.send(new ConverseCommand({ modelId: MODEL_ID, messages, toolConfig: { tools: PART_TOOLS } }))
  return {
    uses: uses.map((u) => ({ name: u.name, input: u.input })),
    stop1: first.value.stopReason,
    text: second.output?.message?.content?.map((b) => b.text ?? '').join(''),
    stop2: second.stopReason,
    usage: second.usage?.totalTokens,
    attempts: [first.value.$metadata.attempts, second.$metadata.attempts],
  }
}

/** Bedrock ConverseStream (binary event stream) in a tool loop: the streamed tool use, the tool result, the streamed answer. */
const bedrockStreamToolLoop: Scenario = async (c) => {
  const client = bedrock(c)
  const tools = [PART_TOOLS[0] as Tool]
  const messages: Message[] = [{ role: 'user', content: [{ text: prompt(c, 'What is the value of R1?') }] }]
  const events: string[] = []
  let use: { toolUseId?: string; name?: string; input: string } | undefined
  let stop1: string | undefined
  const first = await observe(async () => {
    const res = await client.send(new ConverseStreamCommand({ modelId: MODEL_ID, messages, toolConfig: { tools } }))
    for await (const e of res.stream ?? []) {
      events.push(Object.keys(e)[0] as string)
      if (e.contentBlockStart?.start?.toolUse) use = { ...e.contentBlockStart.start.toolUse, input: '' }
      if (e.contentBlockDelta?.delta?.toolUse && use) use.input += e.contentBlockDelta.delta.toolUse.input ?? ''
      if (e.messageStop) stop1 = e.messageStop.stopReason
    }
  })
  if (!first.ok) return { error: first.error }
  if (!use) return { unexpected: 'no tool use', events }
  const input = JSON.parse(use.input) as { [key: string]: string }
  messages.push({ role: 'assistant', content: [{ toolUse: { toolUseId: use.toolUseId, name: use.name, input } }] })
  messages.push({ role: 'user', content: [{ toolResult: { toolUseId: use.toolUseId, content: [{ text: partValue(use.name, input) }] } }] })
  let text = ''
  let stop2: string | undefined
  let usage: number | undefined
  const res = await client.send(new ConverseStreamCommand({ modelId: MODEL_ID, messages, toolConfig: { tools } }))
  for await (const e of res.stream ?? []) {
    text += e.contentBlockDelta?.delta?.text ?? ''
    stop2 = e.messageStop?.stopReason ?? stop2
    usage = e.metadata?.usage?.totalTokens ?? usage
  }
  return { events, tool: { name: use.name, input }, stop1, text, stop2, usage }
}

// ---- OpenAI Agents SDK ----------------------------------------------------------------------------------------

/** A two-agent run: the triage agent hands the conversation to the Spanish agent, which answers. */
const agentsHandoff: Scenario = async (c) => {
  setTracingDisabled(true)
  setDefaultOpenAIClient(new OpenAI({ apiKey: c.openaiApiKey, baseURL: c.agentsBaseURL }))
  const spanish = new Agent({ name: 'Spanish agent', instructions: 'You only speak Spanish.', model: 'gpt-4.1' })
  const english = new Agent({ name: 'English agent', instructions: 'You only speak English.', model: 'gpt-4.1' })
  const triage = Agent.create({
    name: 'Triage agent',
    instructions: 'Hand the conversation to the agent that speaks the language of the request.',
    handoffs: [spanish, english],
    model: 'gpt-4.1',
  })
  const r = await observe(() => run(triage, prompt(c, 'Hola, ¿cómo estás?')))
  if (!r.ok) return { error: r.error }
  return { lastAgent: r.value.lastAgent?.name, finalOutput: r.value.finalOutput, items: r.value.newItems.map((i) => i.type) }
}

// ---- Ollama ---------------------------------------------------------------------------------------------------

const WEATHER = {
  type: 'function',
  function: { name: 'get_weather', description: 'Current weather for a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
}

/** Ollama's native chat: a tool call (JSON), the tool result, a streamed answer (NDJSON); then a streamed generate. */
const ollamaChat: Scenario = async (c) => {
  const o = new Ollama({ host: c.ollamaHost ?? '' })
  const messages: OllamaMessage[] = [{ role: 'user', content: prompt(c, 'Will it rain in Oslo?') }]
  const first = await observe(() => o.chat({ model: 'llama3.2', messages, tools: [WEATHER] }))
  if (!first.ok) return { error: first.error }
  const call = first.value.message.tool_calls?.[0]
  messages.push(first.value.message, { role: 'tool', content: '{"rain":true}', tool_name: call?.function.name ?? '' })
  let text = ''
  let lines = 0
  let reason: string | undefined
  for await (const part of await o.chat({ model: 'llama3.2', messages, tools: [WEATHER], stream: true })) {
    lines++
    text += part.message.content
    if (part.done) reason = part.done_reason
  }
  let generated = ''
  for await (const part of await o.generate({ model: 'llama3.2', prompt: 'Why is the sky blue?', stream: true })) generated += part.response
  const out: Observation = { call: call?.function, text, lines, reason, generated }
  return out
}

/** The scenarios of this file, by name. */
export const API_SCENARIOS: Record<string, Scenario> = {
  'gemini-tool-loop': geminiToolLoop,
  'gemini-stream-tool-loop': geminiStreamToolLoop,
  'bedrock-tool-loop': bedrockToolLoop,
  'bedrock-stream-tool-loop': bedrockStreamToolLoop,
  'agents-handoff': agentsHandoff,
  'ollama-chat': ollamaChat,
}
