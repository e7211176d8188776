/**
 * An MCP client that goes away mid-conversation, with the real SDK client and a real npm server through the
 * in-process wrapper: the app closes its client while a tool call is still running. The call's exchange is
 * recorded as the client abort (UND_ERR_ABORTED, with the progress notes that came before it), as an HTTP
 * request the app aborted is; strict replay of that trace gives the app the same notes and the same end, with
 * no server started.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { openSession } from 'tool-replay/engine'
import { wrapMcpTransport } from 'tool-replay/mcp'
import { createMemoryStore } from 'tool-replay/store'
import { bodyBytes, transcriptLines, tryUtf8 } from '../trace/index.ts'
import { npmServer } from './support/mcp-harness.ts'

const CALL = 'mcp+stdio://everything/tools/call/trigger-long-running-operation'

test('the app closes its MCP client during a tool call: recorded as the client abort, and replayed the same', async (t) => {
  const store = createMemoryStore()
  t.after(() => store.close())
  const run = async (mode: 'record' | 'replay') => {
    const session = await openSession({ mode, trace: 'gone', store })
    const inner = new StdioClientTransport({ command: process.execPath, args: [npmServer('server-everything')], stderr: 'pipe' })
    const transport = wrapMcpTransport(inner, { session, name: 'everything' })
    const client = new Client({ name: 'e2e', version: '1.0.0' })
    await client.connect(transport)
    const progress: unknown[] = []
    let noted = () => {}
    const firstNote = new Promise<void>((resolve) => (noted = resolve))
    // 60 steps over 30 s: a progress note every 0.5 s, and no answer before the app gives up.
    const call = client
      .callTool({ name: 'trigger-long-running-operation', arguments: { duration: 30, steps: 60 } }, undefined, {
        timeout: 60_000,
        onprogress: (p) => {
          progress.push(p.progress)
          noted()
        },
      })
      .then(
        () => 'answered',
        (err: { code?: number }) => `rejected ${err.code}`,
      )
    await firstNote
    await client.close()
    const summary = await session.close()
    return { outcome: await call, first: progress[0], ok: summary.ok, started: transport.started }
  }

  const recorded = await run('record')
  assert.deepEqual(recorded, { outcome: 'rejected -32000', first: 1, ok: true, started: 1 })
  const trace = await store.readTrace('gone')
  const exchange = trace.exchanges.find((x) => x.request.url === CALL)
  assert.ok(exchange && exchange.outcome.kind === 'error', `${CALL} recorded as a failure`)
  const { error } = exchange.outcome
  assert.equal(error.code, 'UND_ERR_ABORTED', 'the client abort, as for HTTP')
  assert.equal(error.phase, 'response-body')
  const partial = error.partial ? (tryUtf8(bodyBytes(trace, error.partial.body)) ?? '') : ''
  const methods = transcriptLines(partial).map((l) => (l.kind === 'message' ? l.message.method : `event ${l.event.kind}`))
  assert.ok(methods.includes('notifications/progress'), `the notes that came are kept: ${methods.join(', ')}`)
  assert.ok(!methods.some((m) => m === undefined), 'and no answer')

  const replayed = await run('replay')
  assert.deepEqual(replayed, { ...recorded, started: 0 })
})
