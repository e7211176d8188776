import assert from 'node:assert/strict'
import { test } from 'node:test'
import { buildTrace, chatTurn, type TraceItem } from '../../e2e/fixtures/fixture-trace.ts'
import type { Exchange } from '../exchange.ts'
import { forkTrace } from '../patch.ts'
import { assertValidTrace } from '../validate.ts'
import { diffTracesLlm, formatLlmDiffText } from './llm-diff.ts'
import { mcpHttpServerName, mcpView } from './mcp.ts'
import { formatTimeline, llmTimeline } from './timeline.ts'

const NDJSON: Array<[string, string]> = [['content-type', 'application/x-ndjson']]
const line = (v: unknown) => `${JSON.stringify(v)}\n`

/** A tools/call over stdio, as `tr-proxy mcp` records it: params as body, the transcript as response. */
function stdioCall(tool: string, args: unknown, text: string, extra: string[] = []): TraceItem {
  return {
    method: 'POST',
    url: `mcp+stdio://filesystem/tools/call/${tool}`,
    requestHeaders: [
      ['content-type', 'application/json'],
      ['mcp-message', 'request'],
      ['mcp-id', '4'],
    ],
    requestBody: JSON.stringify({ name: tool, arguments: args }),
    headers: NDJSON,
    chunks: [...extra, line({ jsonrpc: '2.0', id: 4, result: { content: [{ type: 'text', text }] } })],
  }
}

/** The same over Streamable HTTP: the JSON-RPC message as body, an event stream as answer. */
function httpCall(tool: string, args: unknown, text: string): TraceItem {
  return {
    method: 'POST',
    url: 'http://127.0.0.1:3000/mcp',
    requestHeaders: [['content-type', 'application/json']],
    requestBody: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: tool, arguments: args } }),
    headers: [['content-type', 'text/event-stream']],
    chunks: [
      `event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'working' } })}\n\n`,
      `event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: 2, result: { content: [{ type: 'text', text }] } })}\n\n`,
    ],
  }
}

function agentWithTools(name: string): ReturnType<typeof buildTrace> {
  const model = chatTurn({
    messages: [{ role: 'user', content: 'Save the note' }],
    content: null,
    toolCalls: [{ id: 'call_1', name: 'write_file', arguments: '{"path":"note.txt"}' }],
    finish: 'tool_calls',
  })
  return buildTrace(name, [
    model,
    stdioCall('write_file', { path: 'note.txt', content: 'hi' }, 'Successfully wrote to note.txt', [
      line({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 4, progress: 1 } }),
      line({ 'tool-replay': 'stderr', text: 'writing\n' }),
    ]),
    httpCall('search', { q: 'rain' }, 'Oslo: rain'),
  ])
}

test('MCP over stdio and over Streamable HTTP read in tool terms; the trace is valid', () => {
  const trace = agentWithTools('a')
  assertValidTrace(trace)
  const stdio = mcpView(trace, trace.exchanges[1] as never)
  assert.equal(stdio?.transport, 'stdio')
  assert.equal(stdio?.tool, 'write_file')
  assert.deepEqual(stdio?.arguments, { path: 'note.txt', content: 'hi' })
  assert.deepEqual(stdio?.content, ['Successfully wrote to note.txt'])
  assert.deepEqual(stdio?.notifications, ['notifications/progress'])
  assert.equal(stdio?.stderr, 'writing\n')
  const http = mcpView(trace, trace.exchanges[2] as never)
  assert.equal(http?.transport, 'http')
  assert.equal(http?.server, '127.0.0.1', 'named from its URL: the port a run gave it left out')
  assert.deepEqual(http?.content, ['Oslo: rain'])
  assert.deepEqual(http?.notifications, ['notifications/message'])
  const text = formatTimeline('a', llmTimeline(trace))
  assert.match(text, /^trace "a": 3 exchanges, 1 model turn, 2 MCP messages$/m)
  assert.match(text, /^#0 model \S+ → tool_call write_file \{"path":"note\.txt"\}/m)
  assert.match(text, /^#1 mcp filesystem tools\/call write_file \{"path":"note\.txt","content":"hi"\} → "Successfully wrote to note\.txt" \(1 notification\)$/m)
  assert.match(text, /^#2 mcp 127\.0\.0\.1 tools\/call search \{"q":"rain"\} → "Oslo: rain" \(1 notification\)$/m)
})

test('fork by meaning on MCP answers (stdio and HTTP): the diff names the tool and the field; the branch stays valid', () => {
  const a = agentWithTools('a')
  const b = forkTrace(a, {
    name: 'b',
    sourceDigest: 'x',
    patches: ['#1 mcp.isError=true', '#1 mcp.result.content[0].text="disk full"', '#2 mcp.result.content[0].text="Oslo: sun"'],
  })
  assertValidTrace(b)
  const v = mcpView(b, b.exchanges[1] as never)
  assert.equal(v?.isError, true)
  assert.deepEqual(v?.content, ['disk full'])
  // The notification and stderr lines and the stream's first event are untouched.
  assert.deepEqual(v?.notifications, ['notifications/progress'])
  assert.deepEqual(mcpView(b, b.exchanges[2] as never)?.content, ['Oslo: sun'])
  const d = diffTracesLlm(a, b)
  assert.equal(d.first?.turn, 'tool')
  assert.equal(d.first?.summary, '#1 mcp filesystem tools/call write_file isError: false → true')
  assert.deepEqual(
    d.differences.map((x) => x.summary),
    ['#1 mcp filesystem tools/call write_file isError: false → true', '#2 mcp 127.0.0.1 tools/call search result content[0]: "Oslo: rain" → "Oslo: sun"'],
  )
  assert.match(formatLlmDiffText(d), /result content\[0\]: "Successfully wrote to note\.txt" → "disk full"/)
})

test('an mcp.* patch on something that is not an MCP answer is refused up front', () => {
  const a = agentWithTools('a')
  assert.throws(() => forkTrace(a, { name: 'b', sourceDigest: 'x', patches: ['#0 mcp.isError=true'] }), {
    code: 'TR_INVALID_PATCH',
    message: /is not an MCP message/,
  })
  assert.throws(() => forkTrace(a, { name: 'b', sourceDigest: 'x', patches: ['#1 mcp.isError="yes"'] }), {
    code: 'TR_INVALID_PATCH',
    message: /takes true or false/,
  })
  assert.throws(() => forkTrace(a, { name: 'b', sourceDigest: 'x', patches: ['#1 mcp.error.message="x"'] }), {
    code: 'TR_INVALID_PATCH',
    message: /answered with a result, so error\.\* does not exist/,
  })
})

test('Streamable HTTP: the server named from its URL; the session GET stream and DELETE are MCP turns; a stream the client closed is no failure', () => {
  assert.equal(mcpHttpServerName('http://127.0.0.1:41503/mcp'), '127.0.0.1')
  assert.equal(mcpHttpServerName('https://gw.test/github/mcp/'), 'gw.test/github')
  assert.equal(mcpHttpServerName('https://mcp.example.com/'), 'mcp.example.com')
  const session: Array<[string, string]> = [
    ['mcp-session-id', 'f0e1'],
    ['mcp-protocol-version', '2025-11-25'],
  ]
  const trace = buildTrace('s', [
    {
      method: 'GET',
      url: 'http://127.0.0.1:41503/mcp',
      requestHeaders: [['accept', 'text/event-stream'], ...session],
      headers: [['content-type', 'text/event-stream']],
      chunks: [`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' })}\n\n`],
    },
    { method: 'DELETE', url: 'http://127.0.0.1:41503/mcp', requestHeaders: session, status: 200, body: '' },
    // A GET of an event stream without MCP's headers is not MCP.
    {
      method: 'GET',
      url: 'http://127.0.0.1:41503/events',
      requestHeaders: [['accept', 'text/event-stream']],
      headers: [['content-type', 'text/event-stream']],
    },
  ])
  // Recorded as the client left it: the stream was open when the client closed it.
  const [get, del, other] = trace.exchanges as [Exchange, Exchange, Exchange]
  const open = get.outcome.kind === 'response' ? get.outcome.response : undefined
  const aborted: Exchange = {
    ...get,
    outcome: { kind: 'error', error: { code: 'UND_ERR_ABORTED', message: 'aborted', phase: 'response-body', partial: open } } as Exchange['outcome'],
  }
  const stream = mcpView(trace, aborted)
  assert.deepEqual(
    { kind: stream?.kind, server: stream?.server, notifications: stream?.notifications, failure: stream?.failure },
    { kind: 'stream', server: '127.0.0.1', notifications: ['notifications/tools/list_changed'], failure: undefined },
  )
  assert.equal(mcpView(trace, del)?.kind, 'end')
  assert.equal(mcpView(trace, other), undefined)
  const text = formatTimeline('s', llmTimeline({ ...trace, exchanges: [aborted, del] }))
  assert.match(text, /^#0 mcp 127\.0\.0\.1 server stream → open until the client closed it \(1 notification\)$/m)
  assert.doesNotMatch(text, /UND_ERR_ABORTED/)
})
