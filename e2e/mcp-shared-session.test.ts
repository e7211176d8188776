/**
 * MCP messages and HTTP exchanges of one app in ONE trace: under `tr-proxy record|replay -- <app>` (the app's
 * MCP client spawns `tr-proxy mcp -- <server>` with the SDK's scrubbed environment, so the wrapper finds the
 * run's session through its ancestors), and under `install()` (a `tr-proxy mcp` child, and the in-process
 * `wrapMcpTransport`). Replay is offline: the HTTP upstream is closed and the MCP server never starts.
 */
import assert from 'node:assert/strict'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { test } from 'node:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { install } from 'tool-replay/interceptor'
import { wrapMcpTransport } from 'tool-replay/mcp'
import { createMemoryStore } from 'tool-replay/store'
import { connectSharedSession, openSession, shareSession } from '../engine/index.ts'
import { MCP_REFUSAL_CODE, McpConversation } from '../mcp/index.ts'
import { fixtureServer, markedServer, npmServer, spawnsIn, TR_PROXY, tempDir } from './support/mcp-harness.ts'
import { run } from './support/proxy-harness.ts'

/** A weather API that counts the requests it gets. */
async function weatherApi(): Promise<{ url: string; hits: () => number; close: () => Promise<void> }> {
  let hits = 0
  const server: Server = createServer((_req, res) => {
    hits++
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ city: 'Oslo', forecast: 'rain' }))
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/forecast`
  return { url, hits: () => hits, close: () => new Promise((r) => server.close(() => r())) }
}

test('tr-proxy record|replay -- app: the app HTTP calls and its MCP server (spawned with a scrubbed env) land in one trace; replay starts neither', async (t) => {
  const dir = tempDir(t)
  const store = join(dir, 'store')
  const log = join(dir, 'spawns')
  const api = await weatherApi()
  const app = [fixtureServer('agent-app.mjs'), api.url, TR_PROXY, ...markedServer(log, npmServer('server-memory'))]
  const env = { ...process.env, MEMORY_FILE_PATH: join(dir, 'memory.jsonl') }
  const recorded = await run(process.execPath, [TR_PROXY, 'record', '--store', store, '-t', 'agent', '--', process.execPath, ...app], env, 120_000)
  assert.equal(recorded.code, 0, recorded.stderr)
  assert.equal(api.hits(), 1)
  assert.equal(spawnsIn(log).length, 1)
  await api.close()

  const replayed = await run(process.execPath, [TR_PROXY, 'replay', '--store', store, '-t', 'agent', '--', process.execPath, ...app], env, 120_000)
  assert.equal(replayed.code, 0, replayed.stderr)
  assert.equal(replayed.stdout, recorded.stdout)
  assert.equal(spawnsIn(log).length, 1, 'the MCP server never started in replay')

  const shown = await run(process.execPath, [TR_PROXY, 'show', '--store', store, 'agent'], env)
  assert.match(shown.stdout, /^#0 GET 127\.0\.0\.1:\d+\/forecast → 200$/m)
  assert.match(shown.stdout, /^#\d mcp memory tools\/call create_entities \{"entities":\[\{"name":"Oslo".* → "\[\\n {2}\{/m)
  assert.match(shown.stdout, /^#\d mcp memory tools\/call read_graph \{\} → /m)
})

test('install(): a `tr-proxy mcp` child and an in-process wrapped transport record into the app trace and replay offline', async (t) => {
  const dir = tempDir(t)
  const log = join(dir, 'spawns')
  const api = await weatherApi()
  // The child wrapper talks to the session through the socket, so the app may keep its store in memory.
  const store = createMemoryStore()
  t.after(() => store.close())
  const memoryEnv = { MEMORY_FILE_PATH: join(dir, 'memory.jsonl') }
  const appRun = async (mode: 'record' | 'replay') => {
    const tr = await install({ mode, trace: 'in-process', store, config: false })
    try {
      const weather = (await (await fetch(api.url)).json()) as { forecast: string }
      // 1: the MCP client spawns `tr-proxy mcp -- server` itself.
      const child = new Client({ name: 'a', version: '1.0.0' })
      await child.connect(
        new StdioClientTransport({
          command: process.execPath,
          args: [TR_PROXY, 'mcp', '--name', 'memory', '--', ...markedServer(log, npmServer('server-memory'))],
          env: memoryEnv,
        }),
      )
      const a = await child.callTool({
        name: 'create_entities',
        arguments: { entities: [{ name: 'Oslo', entityType: 'city', observations: [weather.forecast] }] },
      })
      await child.close()
      // 2: the same server through the in-process wrapper.
      const [cmd, ...args] = markedServer(log, npmServer('server-memory')) as [string, ...string[]]
      const transport = wrapMcpTransport(new StdioClientTransport({ command: cmd, args, env: memoryEnv }), { session: tr.session, name: 'memory-inproc' })
      const inproc = new Client({ name: 'b', version: '1.0.0' })
      await inproc.connect(transport)
      const b = await inproc.callTool({ name: 'read_graph', arguments: {} })
      await inproc.close()
      const summary = await tr.close()
      return { weather, a: a.content, b: b.content, ok: summary.ok, started: transport.started }
    } finally {
      await tr.close()
    }
  }
  const recorded = await appRun('record')
  assert.equal(spawnsIn(log).length, 2)
  assert.equal(recorded.started, 1)
  await api.close()
  const replayed = await appRun('replay')
  assert.deepEqual({ ...replayed, started: 0 }, { ...recorded, started: 0 })
  assert.equal(replayed.started, 0, 'the wrapped transport was never started')
  assert.equal(replayed.ok, true)
  assert.equal(spawnsIn(log).length, 2, 'no server process started in replay')
  const trace = await store.readTrace('in-process')
  const urls = trace.exchanges.map((x) => x.request.url)
  assert.ok(urls.some((u) => u.startsWith('http://127.0.0.1')))
  assert.ok(urls.includes('mcp+stdio://memory/tools/call/create_entities'))
  assert.ok(urls.includes('mcp+stdio://memory-inproc/tools/call/read_graph'))
})

test('a child whose MCP message is over the body limit: the client gets the JSON-RPC refusal, the owner ledger counts it', async (t) => {
  const store = createMemoryStore()
  t.after(() => store.close())
  await (await openSession({ mode: 'record', trace: 'limit', store })).close()
  const owner = await openSession({ mode: 'replay', trace: 'limit', store })
  const host = await shareSession(owner)
  t.after(() => host.close(0))
  const child = await connectSharedSession(host.socketPath)
  t.after(() => child.close())
  const seen: Array<{ id?: unknown; error?: { code: number; message: string } }> = []
  const conversation = new McpConversation({
    session: child,
    server: 's',
    command: ['s'],
    maxBodyBytes: 64,
    log: () => {},
    client: { send: (line) => void seen.push(JSON.parse(line)), stderr: () => {}, exit: () => {} },
    start: () => Promise.reject(new Error('strict replay starts no server')),
  })
  conversation.fromClient(JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'echo', arguments: { text: 'x'.repeat(100) } } }))
  for (let i = 0; i < 200 && (seen.length === 0 || owner.ledger.length === 0); i++) await new Promise((r) => setTimeout(r, 5))
  assert.equal(seen[0]?.id, 7)
  assert.equal(seen[0]?.error?.code, MCP_REFUSAL_CODE)
  assert.match(seen[0]?.error?.message ?? '', /^TR_REQUEST_TOO_LARGE: Request body of POST mcp\+stdio:\/\/s\/tools\/call\/echo is over 64 bytes/)
  assert.deepEqual(
    owner.ledger.map((e) => [e.code, e.request]),
    [['TR_REQUEST_TOO_LARGE', 'POST mcp+stdio://s/tools/call/echo']],
    'counted where the session lives',
  )
  conversation.clientClosed()
  await conversation.done
  await owner.close().catch(() => {})
})
