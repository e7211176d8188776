/**
 * MCP over Streamable HTTP, recorded by the existing HTTP capture (install(), fetch): a server built on the
 * real SDK (`McpServer` + `StreamableHTTPServerTransport`, stateless, answering with an event stream or with
 * JSON) and the real SDK client. Replay with the server closed gives the same answers; `show` reads the
 * messages as tool calls; a fork of the tool result by meaning changes what the agent does.
 */
import assert from 'node:assert/strict'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { test } from 'node:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import { install } from 'tool-replay/interceptor'
import { createMemoryStore } from 'tool-replay/store'
import { forkTrace, formatTimeline, llmTimeline } from 'tool-replay/trace'
import { z } from 'zod'

/** A weather MCP server on the SDK; every POST gets a fresh stateless server, as the SDK's examples do. */
async function weatherServer(json: boolean): Promise<{ url: string; calls: () => number; close: () => Promise<void> }> {
  let calls = 0
  const http: Server = createServer(async (req, res) => {
    if (req.method !== 'POST') {
      res.writeHead(405).end()
      return
    }
    calls++
    const mcp = new McpServer({ name: 'weather', version: '1.0.0' }, { capabilities: { logging: {} } })
    mcp.registerTool('forecast', { inputSchema: { city: z.string() } }, async ({ city }, extra) => {
      await extra.sendNotification({ method: 'notifications/message', params: { level: 'info', data: `looking up ${city}` } })
      return { content: [{ type: 'text', text: `${city}: rain, 9°C` }] }
    })
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: json })
    res.on('close', () => {
      void transport.close()
      void mcp.close()
    })
    await mcp.connect(transport)
    await transport.handleRequest(req, res)
  })
  await new Promise<void>((r) => http.listen(0, '127.0.0.1', r))
  const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`
  return { url, calls: () => calls, close: () => new Promise((r) => http.close(() => r())) }
}

/** The agent: asks for the forecast and decides. */
async function agent(url: string): Promise<{ tools: string[]; forecast: string; advice: string }> {
  const client = new Client({ name: 'umbrella-agent', version: '1.0.0' })
  await client.connect(new StreamableHTTPClientTransport(new URL(url)))
  const tools = (await client.listTools()).tools.map((t) => t.name)
  const result = await client.callTool({ name: 'forecast', arguments: { city: 'Oslo' } })
  const forecast = (result.content as Array<{ text: string }>)[0]?.text ?? ''
  await client.close()
  return { tools, forecast, advice: forecast.includes('rain') ? 'take an umbrella' : 'leave the umbrella' }
}

for (const json of [false, true]) {
  test(`Streamable HTTP (${json ? 'JSON' : 'event-stream'} answers): record, offline replay, read as tool calls, fork the result`, async () => {
    const server = await weatherServer(json)
    const store = createMemoryStore()
    try {
      const rec = await install({ mode: 'record', trace: 'weather', store, config: false })
      const recorded = await agent(server.url).finally(() => rec.close())
      assert.deepEqual(recorded, { tools: ['forecast'], forecast: 'Oslo: rain, 9°C', advice: 'take an umbrella' })
      const live = server.calls()
      await server.close()

      const rep = await install({ mode: 'replay', trace: 'weather', store, config: false })
      const replayed = await agent(server.url)
      rep.assertDone()
      await rep.close()
      assert.deepEqual(replayed, recorded)
      assert.equal(server.calls(), live, 'replay never reached the server')

      const trace = await store.readTrace('weather')
      const timeline = formatTimeline('weather', llmTimeline(trace))
      assert.match(timeline, /mcp 127\.0\.0\.1 tools\/list → 1 tool: forecast/)
      assert.match(timeline, /mcp 127\.0\.0\.1 tools\/call forecast \{"city":"Oslo"\} → "Oslo: rain, 9°C"/)
      if (!json) assert.match(timeline, /tools\/call forecast .* \(1 notification\)/)

      const call = llmTimeline(trace).find((t) => t.mcp?.tool === 'forecast') as { seq: number }
      await store.putTrace(forkTrace(trace, { name: 'sunny', sourceDigest: 'x', patches: [`#${call.seq} mcp.result.content[0].text="Oslo: sun, 21°C"`] }))
      const fork = await install({ mode: 'replay', trace: 'sunny', store, config: false })
      const forked = await agent(server.url)
      fork.assertDone()
      await fork.close()
      assert.deepEqual(forked, { tools: ['forecast'], forecast: 'Oslo: sun, 21°C', advice: 'leave the umbrella' })
    } finally {
      await store.close()
    }
  })
}
