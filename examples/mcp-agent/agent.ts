/**
 * The MCP agent: a support agent on the real `openai` SDK (Chat Completions with tools) whose tools are two
 * real MCP servers from npm over stdio, each started through `tr-proxy mcp` exactly as an MCP client config
 * would start it: `@modelcontextprotocol/server-filesystem` (read the ticket, write the reply in ./workspace)
 * and `@modelcontextprotocol/server-memory` (remember the customer). The model reads the ticket, remembers the
 * customer, and writes a reply; the app's job ends when the reply is saved, and it reports whether it was.
 *
 * The `tr-proxy mcp` processes find the run's session by themselves (they are children of this process, which
 * runs under install()), so the model's HTTP calls and the MCP messages land in one trace.
 */
import { resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import OpenAI from 'openai'

const here = (p: string) => fileURLToPath(new URL(p, import.meta.url))
const WORKSPACE = here('./workspace/')
const TR_PROXY = here('../../bin/tr-proxy.js')

/** What the agent did. */
export interface TriageResult {
  /** "reply saved", or "reply not saved" when the filesystem server refused the write. */
  outcome: 'reply saved' | 'reply not saved'
  /** The filesystem server's answer to write_file. */
  detail: string
  /** The tools the model was offered, by server. */
  tools: string[]
}

type ToolResult = { content?: Array<{ type: string; text?: string }>; isError?: boolean }

/** Starts one MCP server through `tr-proxy mcp` (strict replay never starts the server itself). */
async function connect(name: string, server: string[], env: Record<string, string> = {}): Promise<Client> {
  const log = process.env.MCP_AGENT_SPAWN_LOG
  const spawnLog: Record<string, string> = log ? { MCP_AGENT_SPAWN_LOG: resolve(log) } : {}
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [TR_PROXY, 'mcp', '--name', name, '--', process.execPath, here('./launch-server.mjs'), ...server],
    cwd: WORKSPACE,
    env: { ...spawnLog, ...env },
    // The servers' own start-up lines (recorded, and replayed too) are not part of this example's output.
    stderr: 'ignore',
  })
  const client = new Client({ name: 'mcp-agent', version: '1.0.0' })
  await client.connect(transport)
  return client
}

const textOf = (r: ToolResult) => (r.content ?? []).map((c) => c.text ?? `[${c.type}]`).join('\n')

/** Triage ticket.txt: read it, remember the customer, write reply.txt. */
export async function triageTicket(): Promise<TriageResult> {
  const packages = here('../../node_modules/@modelcontextprotocol/')
  // One server at a time, each asked for its tools before the next starts: each server is its own `tr-proxy mcp`
  // process, and a message the agent sends to one only reaches the recording before a message to the other
  // when an answer came back in between. So the trace lists these exchanges in the same order in every run.
  const fs = await connect('filesystem', [`${packages}server-filesystem/dist/index.js`, '.'])
  const listed: Array<[Client, readonly string[], Awaited<ReturnType<Client['listTools']>>['tools']]> = []
  let memory: Client | undefined
  try {
    listed.push([fs, ['read_text_file', 'write_file'], (await fs.listTools()).tools])
    memory = await connect('memory', [`${packages}server-memory/dist/index.js`], { MEMORY_FILE_PATH: `${WORKSPACE}memory.jsonl` })
    listed.push([memory, ['create_entities'], (await memory.listTools()).tools])
    const owner = new Map<string, Client>()
    const tools: OpenAI.Chat.Completions.ChatCompletionFunctionTool[] = []
    for (const [client, wanted, listedTools] of listed) {
      for (const t of listedTools) {
        if (!(wanted as readonly string[]).includes(t.name)) continue
        owner.set(t.name, client)
        tools.push({ type: 'function', function: { name: t.name, description: t.description ?? '', parameters: t.inputSchema as Record<string, unknown> } })
      }
    }
    const openai = new OpenAI({ apiKey: process.env.OPENAI_API_KEY ?? 'sk-placeholder', baseURL: 'http://model.test/v1', maxRetries: 0 })
    const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [
      { role: 'system', content: 'You are a support agent. Read ticket.txt, remember the customer, then write reply.txt.' },
      { role: 'user', content: 'Please handle the new ticket.' },
    ]
    for (let turn = 0; turn < 5; turn++) {
      const completion = await openai.chat.completions.create({ model: 'gpt-4.1-mini', messages, tools })
      const message = completion.choices[0]?.message
      const call = message?.tool_calls?.[0]
      if (!message || !call || call.type !== 'function') break
      messages.push(message)
      const client = owner.get(call.function.name)
      if (!client) throw new Error(`the model asked for an unknown tool ${call.function.name}`)
      const result = (await client.callTool({ name: call.function.name, arguments: JSON.parse(call.function.arguments) })) as ToolResult
      // The reply is the deliverable: once it is written (or refused), the agent is done.
      if (call.function.name === 'write_file')
        return { outcome: result.isError ? 'reply not saved' : 'reply saved', detail: textOf(result), tools: tools.map((t) => t.function.name) }
      messages.push({ role: 'tool', tool_call_id: call.id, content: textOf(result) })
    }
    throw new Error('the model never wrote the reply')
  } finally {
    await fs.close()
    await memory?.close()
  }
}

/** The case runner for `tr-proxy emit-test --runner examples/mcp-agent/agent.ts#runCase`. */
export async function runCase(): Promise<{ outcome: string; detail: string }> {
  const { outcome, detail } = await triageTicket()
  return { outcome, detail }
}
