/**
 * A deterministic stand-in for a tool-calling model behind OpenAI's Chat Completions API, for the MCP agent.
 * It plays the support agent's three steps, decided by what the conversation holds so far:
 * no tool result yet → `read_text_file` ticket.txt; after the ticket → `create_entities` (remember the customer
 * and the issue); after that → `write_file` reply.txt with a reply that fits the ticket. Served on 127.0.0.1
 * over plain HTTP; `modelAgent(port)` reaches it as http://model.test.
 */
import { randomBytes } from 'node:crypto'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Agent, buildConnector } from 'undici'

interface Message {
  role: string
  content?: unknown
}

/** The three steps, from the conversation so far. */
function nextCall(messages: Message[]): { name: string; args: Record<string, unknown> } {
  const results = messages.filter((m) => m.role === 'tool').map((m) => String(m.content ?? ''))
  const ticket = results[0] ?? ''
  if (results.length === 0) return { name: 'read_text_file', args: { path: 'ticket.txt' } }
  const customer = /^From: (.+)$/m.exec(ticket)?.[1] ?? 'unknown customer'
  const issue = /charged twice/i.test(ticket) ? 'double charge on invoice 42' : 'general question'
  if (results.length === 1) return { name: 'create_entities', args: { entities: [{ name: customer, entityType: 'customer', observations: [issue] }] } }
  const reply =
    issue === 'double charge on invoice 42'
      ? `Dear ${customer},\n\nsorry about the double charge on invoice 42: we have refunded the second payment.\n`
      : `Dear ${customer},\n\nthank you for your message, we will get back to you.\n`
  return { name: 'write_file', args: { path: 'reply.txt', content: reply } }
}

function completion(call: { name: string; args: Record<string, unknown> }): string {
  const id = (n: number) => randomBytes(n).toString('base64url').slice(0, n)
  return JSON.stringify({
    id: `chatcmpl-${id(24)}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: 'gpt-4.1-mini-2025-04-14',
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: `call_${id(24)}`, type: 'function', function: { name: call.name, arguments: JSON.stringify(call.args) } }],
          refusal: null,
        },
        finish_reason: 'tool_calls',
      },
    ],
    usage: { prompt_tokens: 120, completion_tokens: 30, total_tokens: 150 },
  })
}

/** A running fake model and the number of requests it got. */
export interface FakeModel {
  port: number
  readonly requests: number
  close(): Promise<void>
}

/** Starts the fake model on a free loopback port. */
export async function startFakeModel(): Promise<FakeModel> {
  let requests = 0
  const server: Server = createServer((req, res) => {
    let body = ''
    req.on('data', (c: Buffer) => {
      body += c.toString('utf8')
    })
    req.on('end', () => {
      requests++
      const request = JSON.parse(body) as { messages?: Message[] }
      res.writeHead(200, { 'content-type': 'application/json' }).end(completion(nextCall(request.messages ?? [])))
    })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  return {
    port: (server.address() as AddressInfo).port,
    get requests() {
      return requests
    },
    close: () => new Promise((r) => server.close(() => r())),
  }
}

/** An undici Agent that reaches http://model.test at the fake's port (and nothing else). */
export function modelAgent(port: number): Agent {
  const connect = buildConnector({})
  return new Agent({
    connect: (opts, callback) => {
      // Anything else is refused rather than sent out: this example is offline by design.
      if (opts.hostname !== 'model.test') return callback(new Error(`the MCP agent example only reaches its fake model, not ${opts.hostname}`), null)
      return connect({ ...opts, hostname: '127.0.0.1', port: String(port) }, callback)
    },
  })
}
