/**
 * A stateful MCP server over Streamable HTTP on the real SDK (`McpServer` + `StreamableHTTPServerTransport` with
 * session ids; its GET stream and DELETE served by the SDK), as the SDK's examples build one: a `forecast` tool
 * that only reads (readOnlyHint) and sends a log notification. It counts connections, sessions and error answers.
 */
import { randomUUID } from 'node:crypto'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import { z } from 'zod'

/** A running weather server. */
export interface McpHttpServer {
  url: string
  port: number
  /** Connections accepted, sessions opened (initialize), answers with a status >= 400. */
  connections(): number
  sessions(): number
  errors(): number
  close(): Promise<void>
}

/** Starts the server on `port` (0: any free one) of 127.0.0.1. */
export async function startWeatherServer(port = 0): Promise<McpHttpServer> {
  const transports = new Map<string, StreamableHTTPServerTransport>()
  let connections = 0
  let sessions = 0
  let errors = 0
  const http: Server = createServer(async (req, res) => {
    res.once('finish', () => {
      if (res.statusCode >= 400) errors++
    })
    const id = req.headers['mcp-session-id']
    const known = typeof id === 'string' ? transports.get(id) : undefined
    if (known) {
      await known.handleRequest(req, res)
      return
    }
    if (req.method !== 'POST' || id !== undefined) {
      res.writeHead(id === undefined ? 400 : 404).end()
      return
    }
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (sid) => {
        sessions++
        transports.set(sid, transport)
      },
    })
    const mcp = new McpServer({ name: 'weather', version: '1.0.0' }, { capabilities: { logging: {} } })
    mcp.registerTool(
      'forecast',
      { description: 'The forecast for a city', inputSchema: { city: z.string() }, annotations: { readOnlyHint: true } },
      async ({ city }, extra) => {
        await extra.sendNotification({ method: 'notifications/message', params: { level: 'info', data: `looking up ${city}` } })
        return { content: [{ type: 'text', text: `${city}: rain, 9°C` }] }
      },
    )
    await mcp.connect(transport)
    await transport.handleRequest(req, res)
  })
  http.on('connection', () => connections++)
  await new Promise<void>((r) => http.listen(port, '127.0.0.1', r))
  const bound = (http.address() as AddressInfo).port
  return {
    url: `http://127.0.0.1:${bound}/mcp`,
    port: bound,
    connections: () => connections,
    sessions: () => sessions,
    errors: () => errors,
    close: async () => {
      if (!http.listening) return
      for (const t of transports.values()) await t.close()
      http.closeAllConnections()
      await new Promise<void>((r) => http.close(() => r()))
    },
  }
}

/** The agent: lists the tools, asks for the forecast, decides; its client opens the background GET stream. */
export async function umbrellaAgent(url: string): Promise<{ tools: string[]; forecast: string; advice: string }> {
  const client = new Client({ name: 'umbrella-agent', version: '1.0.0' })
  // The SDK reopens a background stream that ended after 1 s, then 1.5 s more; here after 100 ms, then 150 ms.
  const reconnectionOptions = { initialReconnectionDelay: 100, maxReconnectionDelay: 1000, reconnectionDelayGrowFactor: 1.5, maxRetries: 2 }
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { reconnectionOptions }))
  const tools = (await client.listTools()).tools.map((t) => t.name)
  const result = await client.callTool({ name: 'forecast', arguments: { city: 'Oslo' } })
  const forecast = (result.content as Array<{ text: string }>)[0]?.text ?? ''
  // A session that lasts (an agent thinks between calls): longer than the SDK waits to reopen a stream that ended
  // (both tries, 250 ms), so a background stream replayed as a failure would ask again for a GET never recorded.
  await new Promise((r) => setTimeout(r, 400))
  await client.close()
  return { tools, forecast, advice: forecast.includes('rain') ? 'take an umbrella' : 'leave the umbrella' }
}
