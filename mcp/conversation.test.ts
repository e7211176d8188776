import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { CaptureSession } from '../capture/index.ts'
import { CLIENT_ABORT_CODE, type ExchangeRecorder, openSession } from '../engine/index.ts'
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

/** Waits (bounded) until `ok()` holds. */
async function until(ok: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 400 && !ok(); i++) await new Promise((r) => setTimeout(r, 5))
  assert.ok(ok(), `timed out waiting for ${what}`)
}

/** A server the test drives by hand: it only notes what it was written, and exits when its input closes. */
function manualServer(c: () => McpConversation): { end: ServerEnd; written: string[] } {
  const written: string[] = []
  const end: ServerEnd = {
    write: (line) => void written.push(String((JSON.parse(line) as Msg).method)),
    closeInput: () => queueMicrotask(() => c().serverExit(0, null)),
    kill: () => {},
  }
  return { end, written }
}

/**
 * A session that forwards every message to a recorder whose commit the test holds: `commit(url)` lets the
 * exchange of `url` be committed, `recorded(url)` is what its recorder got so far.
 */
function heldSession(): { session: CaptureSession; commit(url: string): void; recorded(url: string): string[] } {
  const commits = new Map<string, { promise: Promise<void>; resolve: () => void }>()
  const logs = new Map<string, string[]>()
  const held = (url: string) => {
    let c = commits.get(url)
    if (!c) {
      let resolve = () => {}
      const promise = new Promise<void>((r) => (resolve = r))
      c = { promise, resolve }
      commits.set(url, c)
    }
    return c
  }
  const recorderFor = (url: string): ExchangeRecorder => {
    const log: string[] = []
    logs.set(url, log)
    return {
      recording: true,
      responseStart: () => void log.push('head'),
      responseData: (chunk) => void log.push(new TextDecoder().decode(chunk).trim()),
      responseEnd: () => {
        log.push('end')
        return held(url).promise
      },
      fail: (e) => {
        log.push(`fail ${e.code}`)
        return held(url).promise
      },
    }
  }
  const session: CaptureSession = {
    arrival: () => ({ turn: (fn) => fn(), progress() {}, release() {} }),
    handle: (captured) => ({ kind: 'forward', recorder: recorderFor(captured.url) }),
    refuse() {},
  }
  return { session, commit: (url) => held(url).resolve(), recorded: (url) => logs.get(url) ?? [] }
}

test('durability: an answer that completes its exchange reaches the client only once the exchange is committed, and what the server wrote next waits for it', async () => {
  const held = heldSession()
  const seen: string[] = []
  let conversation: McpConversation | undefined
  const server = manualServer(() => conversation as McpConversation)
  conversation = new McpConversation({
    session: held.session,
    server: 's',
    command: ['s'],
    log: () => {},
    client: {
      send: (line) => {
        const m = JSON.parse(line) as Msg
        seen.push(m.method ? String(m.method) : `answer ${String(m.id)}`)
      },
      stderr: () => {},
      exit: () => {},
    },
    start: async () => server.end,
  })
  await conversation.launch()
  const A = 'mcp+stdio://s/tools/call/a'
  // Two requests in flight: when the first is answered, the latest message is the second, so the answer ends
  // the first one's transcript (its exchange is complete).
  conversation.fromClient(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'a', arguments: {} } }))
  conversation.fromClient(JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'b', arguments: {} } }))
  await until(() => server.written.length === 2, 'both requests at the server')
  conversation.serverLine(JSON.stringify({ jsonrpc: '2.0', id: 1, result: { content: [] } }))
  conversation.serverLine(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'after 1' } }))
  await new Promise((r) => setTimeout(r, 30))
  assert.deepEqual(held.recorded(A), ['head', '{"jsonrpc":"2.0","id":1,"result":{"content":[]}}', 'end'], 'the answer is recorded and its exchange ended')
  assert.deepEqual(seen, [], 'nothing reached the client before the commit: not the answer, not the line the server wrote after it')
  held.commit(A)
  await until(() => seen.length === 2, 'the answer and the notification after the commit')
  assert.deepEqual(seen, ['answer 1', 'notifications/message'], 'in the order the server wrote them')
  conversation.serverLine(JSON.stringify({ jsonrpc: '2.0', id: 2, result: { content: [] } }))
  await until(() => seen.length === 3, 'the answer to the latest request, which keeps its transcript open')
  for (const url of ['mcp+stdio://s/', 'mcp+stdio://s/tools/call/b']) held.commit(url)
  conversation.clientClosed()
  await conversation.done
})

test('a client that goes away mid-conversation: its unanswered request is recorded as the client abort, an answer within the drain as the answer', async () => {
  const store = createMemoryStore()
  const session = await openSession({ mode: 'record', trace: 'gone', store })
  const seen: string[] = []
  let conversation: McpConversation | undefined
  const server = manualServer(() => conversation as McpConversation)
  conversation = new McpConversation({
    session,
    server: 's',
    command: ['s'],
    log: () => {},
    client: { send: (line) => void seen.push(line), stderr: () => {}, exit: () => {} },
    start: async () => server.end,
  })
  await conversation.launch()
  conversation.fromClient(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'slow', arguments: {} } }))
  conversation.fromClient(JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'never', arguments: {} } }))
  await until(() => server.written.length === 2, 'both requests at the server')
  // The client goes away (its pipe broke, it signalled the wrapper, the app closed its transport).
  conversation.clientGone()
  conversation.clientClosed()
  // The server still answers the first one (within the drain), then exits when its input closes.
  conversation.serverLine(JSON.stringify({ jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text: 'late' }] } }))
  await conversation.done
  const summary = await session.close()
  assert.equal(summary.recorded, 3)
  assert.deepEqual(seen, [], 'nothing goes to a client that went away')
  const trace = await store.readTrace('gone')
  const outcome = (url: string) => trace.exchanges.find((x) => x.request.url === url)?.outcome
  assert.deepEqual(transcript(trace, 'mcp+stdio://s/tools/call/slow'), ['answer'])
  const never = outcome('mcp+stdio://s/tools/call/never')
  assert.equal(never?.kind, 'error')
  assert.equal(never.kind === 'error' && never.error.code, CLIENT_ABORT_CODE, 'recorded as the client abort, as for HTTP')
  assert.equal(never.kind === 'error' && never.error.phase, 'response-body')
  await store.close()
})
