import assert from 'node:assert/strict'
import { test } from 'node:test'
import { openSession } from '../engine/index.ts'
import { createMemoryStore } from '../store/index.ts'
import { bodyBytes, type Trace, transcriptLines, tryUtf8 } from '../trace/index.ts'
import { MCP_REFUSAL_CODE } from './client-target.ts'
import { McpConversation, type ServerEnd } from './conversation.ts'

type Msg = Record<string, unknown>

/**
 * A scripted server: answers initialize; for tools/call "ask" it sends a progress notification and a sampling
 * request, and answers the call only once the client replied; exits when its input closes.
 */
function scriptedServer(c: () => McpConversation): { end: ServerEnd; started: () => number } {
  let started = 0
  let pendingCall: unknown
  const send = (m: Msg) => queueMicrotask(() => c().serverLine(JSON.stringify(m)))
  const end: ServerEnd = {
    write: (line) => {
      const m = JSON.parse(line) as Msg
      if (m.method === 'initialize') send({ jsonrpc: '2.0', id: m.id, result: { protocolVersion: '2025-11-25', serverInfo: { name: 's', version: '1' } } })
      if (m.method === 'tools/call') {
        pendingCall = m.id
        const token = (m.params as { _meta?: { progressToken?: unknown } })._meta?.progressToken
        send({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: token, progress: 1 } })
        send({ jsonrpc: '2.0', id: 0, method: 'sampling/createMessage', params: { messages: [] } })
      }
      if (m.id === 0 && m.result !== undefined) send({ jsonrpc: '2.0', id: pendingCall, result: { content: [{ type: 'text', text: 'done' }] } })
    },
    closeInput: () => queueMicrotask(() => c().serverExit(0, null)),
    kill: () => queueMicrotask(() => c().serverExit(null, 'SIGKILL')),
  }
  return { end, started: () => started++ }
}

/** Drives one conversation: the client's messages (ids from `base`), replying to the sampling request when it comes. */
async function converse(mode: 'record' | 'replay', store: ReturnType<typeof createMemoryStore>, base: number) {
  const session = await openSession({ mode, trace: 't', store })
  const seen: Msg[] = []
  let conversation: McpConversation | undefined
  const server = scriptedServer(() => conversation as McpConversation)
  let starts = 0
  conversation = new McpConversation({
    session,
    server: 'scripted',
    command: ['node', 'server.js', '--api-key', 'sk-secret'],
    log: () => {},
    client: {
      send: (line) => {
        const m = JSON.parse(line) as Msg
        seen.push(m)
        if (m.method === 'sampling/createMessage')
          conversation?.fromClient(JSON.stringify({ jsonrpc: '2.0', id: m.id, result: { role: 'assistant', content: { type: 'text', text: 'hi' } } }))
      },
      stderr: () => {},
      exit: (code, signal) => seen.push({ exit: code ?? signal }),
    },
    start: async () => {
      starts++
      server.started()
      return server.end
    },
  })
  await conversation.launch()
  const from = (m: Msg) => conversation?.fromClient(JSON.stringify({ jsonrpc: '2.0', ...m }))
  from({ id: base, method: 'initialize', params: { protocolVersion: '2025-11-25' } })
  from({ method: 'notifications/initialized' })
  from({ id: base + 1, method: 'tools/call', params: { name: 'ask', arguments: {}, _meta: { progressToken: base + 1 } } })
  // Wait for the call's answer, then an unrecorded request, then close.
  for (let i = 0; i < 200 && !seen.some((m) => m.id === base + 1 && m.result); i++) await new Promise((r) => setTimeout(r, 5))
  if (mode === 'replay') from({ id: base + 2, method: 'tools/call', params: { name: 'never-recorded', arguments: {} } })
  await new Promise((r) => setTimeout(r, 20))
  conversation.clientClosed()
  await conversation.done
  return { seen, starts, summary: await session.close() }
}

function transcript(trace: Trace, url: string): string[] {
  const x = trace.exchanges.find((e) => e.request.url === url)
  assert.ok(x && x.outcome.kind === 'response', `${url} recorded as a response`)
  const text = tryUtf8(bodyBytes(trace, x.outcome.response.body)) ?? ''
  return transcriptLines(text).map((l) => (l.kind === 'event' ? `event ${l.event.kind}` : String(l.message.method ?? (l.message.result ? 'answer' : '?'))))
}

test('record: each client message is an exchange; the answer, the notification, the server request and the reply mark land in order', async () => {
  const store = createMemoryStore()
  const rec = await converse('record', store, 1)
  assert.equal(rec.starts, 1)
  assert.equal(rec.summary.recorded, 5)
  const trace = await store.readTrace('t')
  assert.deepEqual(
    trace.exchanges.map((x) => x.request.url),
    [
      'mcp+stdio://scripted/',
      'mcp+stdio://scripted/initialize',
      'mcp+stdio://scripted/notifications/initialized',
      'mcp+stdio://scripted/tools/call/ask',
      'mcp+stdio://scripted/reply/sampling/createMessage',
    ],
  )
  // Every exchange ended as a response (none was left open and cut when the session closed).
  assert.ok(trace.exchanges.every((x) => x.outcome.kind === 'response'))
  assert.deepEqual(transcript(trace, 'mcp+stdio://scripted/tools/call/ask'), ['notifications/progress', 'sampling/createMessage', 'event replied', 'answer'])
  assert.deepEqual(transcript(trace, 'mcp+stdio://scripted/reply/sampling/createMessage'), ['event stdin-closed', 'event exit'])
  const launch = trace.exchanges[0]
  assert.equal(launch?.request.headers.find(([k]) => k === 'mcp-command')?.[1], 'node server.js --api-key [REDACTED]')
  // The progress token (an id) is out of the body, so a run with other ids matches.
  const call = trace.exchanges[3]
  assert.match(tryUtf8(bodyBytes(trace, call?.request.body as never)) ?? '', /"progressToken":"\(progress token\)"/)
  await store.close()
})

test('replay with other ids: no server; ids and progress tokens mapped; the answer waits for the reply; a miss is a JSON-RPC error at once', async () => {
  const store = createMemoryStore()
  await converse('record', store, 1)
  const rep = await converse('replay', store, 101)
  assert.equal(rep.starts, 0, 'the server was never started')
  const order = rep.seen.map((m) => (m.exit !== undefined ? `exit ${m.exit}` : m.method ? String(m.method) : `answer ${String(m.id)}`))
  assert.deepEqual(order, ['answer 101', 'notifications/progress', 'sampling/createMessage', 'answer 102', 'answer 103', 'exit 0'])
  const progress = rep.seen.find((m) => m.method === 'notifications/progress') as { params: { progressToken: unknown } }
  assert.equal(progress.params.progressToken, 102)
  const miss = rep.seen.find((m) => m.id === 103) as { error: { code: number; message: string } }
  assert.equal(miss.error.code, MCP_REFUSAL_CODE)
  assert.match(miss.error.message, /^TR_REPLAY_MISS: Failed to replay "POST mcp\+stdio:\/\/scripted\/tools\/call\/never-recorded"/)
  assert.equal(rep.summary.ok, false)
  assert.equal(rep.summary.misses.length, 1)
  await store.close()
})
