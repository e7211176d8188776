import assert from 'node:assert/strict'
import { test } from 'node:test'
import { buildTrace, type TraceItem } from '../e2e/fixtures/fixture-trace.ts'
import { maskedCommandLine, parseCommandLine } from '../trace/index.ts'
import { planDrift } from './drift-plan.ts'
import { McpHttpSessions } from './mcp-drift-plan.ts'

const NDJSON: Array<[string, string]> = [['content-type', 'application/x-ndjson']]
const line = (v: unknown) => `${JSON.stringify(v)}\n`
const TOOLS = {
  tools: [
    { name: 'forecast', annotations: { readOnlyHint: true }, inputSchema: {} },
    { name: 'save_note', inputSchema: {} },
    { name: 'get_alerts', inputSchema: {} },
  ],
}

function stdio(path: string, kind: string, body: unknown, answer: unknown, headers: Array<[string, string]> = []): TraceItem {
  return {
    method: 'POST',
    url: `mcp+stdio://weather/${path}`,
    requestHeaders: [['mcp-message', kind], ...(kind === 'request' ? ([['mcp-id', '1']] as Array<[string, string]>) : []), ...headers],
    ...(body !== undefined ? { requestBody: JSON.stringify(body) } : {}),
    headers: NDJSON,
    chunks: answer === undefined ? [''] : [line({ jsonrpc: '2.0', id: 1, result: answer })],
  }
}

const trace = (command: string[]) =>
  buildTrace('wx', [
    {
      method: 'POST',
      url: 'mcp+stdio://weather/',
      requestHeaders: [
        ['mcp-message', 'launch'],
        ['mcp-command', maskedCommandLine(command)],
      ],
      headers: NDJSON,
      body: '',
    },
    stdio('tools/list', 'request', undefined, TOOLS),
    stdio('tools/call/forecast', 'request', { name: 'forecast', arguments: { city: 'Oslo' }, _meta: { progressToken: '(progress token)' } }, { content: [] }, [
      ['mcp-progress-token', '7'],
    ]),
    stdio('tools/call/save_note', 'request', { name: 'save_note', arguments: { text: 'x' } }, { content: [] }),
    stdio('tools/call/get_alerts', 'request', { name: 'get_alerts', arguments: {} }, { content: [] }),
  ])

test('a masked command line reads back into its arguments (quoted ones, non-ASCII, the mask kept)', () => {
  const argv = ['node', '/srv/my server.js', '--api-key', 'sk-1', 'TOKEN=abc', 'café']
  assert.deepEqual(parseCommandLine(maskedCommandLine(argv)), ['node', '/srv/my server.js', '--api-key', '[REDACTED]', 'TOKEN=[REDACTED]', 'café'])
})

test('stdio: nothing re-spawned unless asked; then the read-only tools (marked, or named) go and the others need --unsafe', () => {
  const t = trace(['node', 'server.js'])
  assert.ok(planDrift(t).every((p) => !p.send))
  const plan = planDrift(t, { mcp: { spawn: true, readOnlyTools: ['get_*'] } })
  assert.deepEqual(
    plan.map((p) => [p.label.split(' ')[1], p.send, p.kind]),
    [
      ['mcp+stdio://weather/', false, 'safe'],
      ['mcp+stdio://weather/tools/list', true, 'safe'],
      ['mcp+stdio://weather/tools/call/forecast', true, 'safe'],
      ['mcp+stdio://weather/tools/call/save_note', false, 'unsafe'],
      ['mcp+stdio://weather/tools/call/get_alerts', true, 'safe'],
    ],
  )
  const call = plan[2]
  assert.ok(call?.send && call.mcp?.transport === 'stdio')
  assert.deepEqual(call.mcp.command, ['node', 'server.js'])
  assert.deepEqual(call.mcp.message, {
    jsonrpc: '2.0',
    method: 'tools/call',
    id: 0,
    params: { name: 'forecast', arguments: { city: 'Oslo' }, _meta: { progressToken: 7 } },
  })
  assert.equal(planDrift(t, { unsafe: true, mcp: { spawn: true } })[3]?.send, true)
  // Masked: not run, unless the command is given.
  const keyed = trace(['node', 'server.js', '--api-key', 'sk-1'])
  const refused = planDrift(keyed, { mcp: { spawn: true } })[1]
  assert.ok(refused && !refused.send)
  assert.match(refused.reason, /secret-looking values masked \(node server\.js --api-key \[REDACTED\]\)/)
  assert.equal(planDrift(keyed, { mcp: { commands: new Map([['weather', ['node', 'server.js', '--api-key', 'sk-1']]]) } })[1]?.send, true)
})

test('Streamable HTTP: initialize opens a fresh session; the messages after it carry its id, never the recorded one', () => {
  const sessions = new McpHttpSessions()
  const init = { transport: 'http', session: 'http://h/mcp', role: 'initialize' } as const
  const member = { transport: 'http', session: 'http://h/mcp', role: 'member' } as const
  const request = { method: 'POST', url: 'http://h/mcp', headers: [['mcp-session-id', 'dead'] as [string, string]], body: null }
  assert.deepEqual(sessions.prepare(init, request).headers, [])
  sessions.answered(init, { status: 200, statusText: 'OK', headers: [['mcp-session-id', 'fresh']] })
  assert.deepEqual(sessions.prepare(member, request).headers, [['mcp-session-id', 'fresh']])
})
