/**
 * MCP over stdio with real parts: the real `@modelcontextprotocol/sdk` client spawns `tr-proxy mcp -- <server>`
 * (as an MCP client config would), the servers are real npm servers (filesystem, everything) or a small server
 * on the real SDK. Record with the server running, then strict replay: the server never starts (its spawn log
 * stays as it was and what it would write is absent), and the client sees the same things in the same order.
 */
import assert from 'node:assert/strict'
import { existsSync, mkdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { pathToFileURL } from 'node:url'
import { CreateMessageRequestSchema, ListRootsRequestSchema } from '@modelcontextprotocol/sdk/types.js'
import { connectWrapped, fixtureServer, markedServer, npmServer, spawnsIn, tempDir } from './support/mcp-harness.ts'

test('filesystem server: record, then strict replay without starting it: same tools, same results, the file not written', async (t) => {
  const dir = tempDir(t)
  const store = join(dir, 'store')
  const files = join(dir, 'files')
  mkdirSync(files)
  const log = join(dir, 'spawns')
  const server = markedServer(log, npmServer('server-filesystem'), files)
  const note = join(files, 'note.txt')
  const rootsAsked: string[] = []
  const run = async (mode: 'record' | 'replay') => {
    const w = await connectWrapped({
      store,
      mode,
      trace: 'fs',
      name: 'filesystem',
      server,
      client: { capabilities: { roots: { listChanged: true } } },
      // The server asks the client for its roots right after initialization: a server-to-client request.
      setup: (c) =>
        c.setRequestHandler(ListRootsRequestSchema, async () => {
          rootsAsked.push(mode)
          return { roots: [{ uri: pathToFileURL(files).href, name: 'files' }] }
        }),
    })
    const tools = await w.client.listTools()
    const wrote = await w.client.callTool({ name: 'write_file', arguments: { path: note, content: 'hello from the agent' } })
    const read = await w.client.callTool({ name: 'read_text_file', arguments: { path: note } })
    await w.client.close()
    return { tools: tools.tools.map((x) => x.name), wrote, read, exit: await w.exited }
  }
  const recorded = await run('record')
  assert.equal(spawnsIn(log).length, 1, 'the server ran once while recording')
  assert.match(JSON.stringify(recorded.read), /hello from the agent/)
  rmSync(note)
  const replayed = await run('replay')
  assert.deepEqual(replayed, recorded)
  assert.equal(spawnsIn(log).length, 1, 'strict replay never started the server')
  assert.equal(existsSync(note), false, 'the file the server would write is absent')
  assert.deepEqual(rootsAsked, ['record', 'replay'], 'the recorded roots/list request was replayed to the client')
})

test('a request the recorded run did not make gets a JSON-RPC error naming TR_REPLAY_MISS at once, and the run fails', async (t) => {
  const dir = tempDir(t)
  const store = join(dir, 'store')
  const log = join(dir, 'spawns')
  const server = markedServer(log, npmServer('server-everything'))
  const rec = await connectWrapped({ store, mode: 'record', trace: 'miss', name: 'everything', server })
  const echoed = await rec.client.callTool({ name: 'echo', arguments: { message: 'one' } })
  await rec.client.close()
  assert.equal(await rec.exited, 0)

  const rep = await connectWrapped({ store, mode: 'replay', trace: 'miss', name: 'everything', server })
  assert.deepEqual(await rep.client.callTool({ name: 'echo', arguments: { message: 'one' } }), echoed)
  await assert.rejects(rep.client.callTool({ name: 'echo', arguments: { message: 'two' } }), (err: Error & { code?: number }) => {
    assert.equal(err.code, -32099)
    assert.match(err.message, /TR_REPLAY_MISS: Failed to replay "POST mcp\+stdio:\/\/everything\/tools\/call\/echo"/)
    return true
  })
  await rep.client.close()
  assert.equal(await rep.exited, 69, 'the wrapper fails the run (TR_REPLAY_INCOMPLETE) even though the app went on')
  assert.match(rep.stderr(), /TR_REPLAY_MISS/)
  assert.equal(spawnsIn(log).length, 1)
})

test('progress notifications and a sampling request replay in the recorded order', async (t) => {
  const dir = tempDir(t)
  const store = join(dir, 'store')
  const log = join(dir, 'spawns')
  const server = markedServer(log, npmServer('server-everything'))
  const run = async (mode: 'record' | 'replay') => {
    const seen: string[] = []
    const w = await connectWrapped({
      store,
      mode,
      trace: 'order',
      name: 'everything',
      server,
      client: { capabilities: { sampling: {} } },
      setup: (c) =>
        c.setRequestHandler(CreateMessageRequestSchema, async (req) => {
          const first = req.params.messages[0]?.content
          seen.push(`sampling asked: ${first && 'text' in first ? first.text : '?'}`)
          return { model: 'test-model', role: 'assistant', content: { type: 'text', text: 'sampled answer' } }
        }),
    })
    const from = w.wire.length
    const long = await w.client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 0.2, steps: 2 } }, undefined, {
      onprogress: () => {},
    })
    seen.push(`result ${JSON.stringify(long.content)}`)
    const sampled = await w.client.callTool({ name: 'trigger-sampling-request', arguments: { prompt: 'hello', maxTokens: 10 } })
    seen.push(`result ${JSON.stringify(sampled.content).slice(0, 120)}`)
    await w.client.close()
    await w.exited
    return { seen, wire: w.wire.slice(from).filter((x) => /^(notifications\/progress|sampling\/|answer)/.test(x)) }
  }
  const recorded = await run('record')
  assert.deepEqual(recorded.wire, ['notifications/progress 1', 'notifications/progress 2', 'answer 1', 'sampling/createMessage', 'answer 2'])
  assert.ok(recorded.seen.some((s) => s.startsWith('sampling asked:')))
  const replayed = await run('replay')
  assert.deepEqual(replayed, recorded)
  assert.equal(spawnsIn(log).length, 1)
})

test('a server that crashes mid-request replays as the same crash: the request fails, stderr and exit code as recorded', async (t) => {
  const dir = tempDir(t)
  const store = join(dir, 'store')
  const log = join(dir, 'spawns')
  const server = markedServer(log, fixtureServer('crash-server.mjs'))
  const run = async (mode: 'record' | 'replay') => {
    const w = await connectWrapped({ store, mode, trace: 'crash', name: 'crashy', server })
    const echo = await w.client.callTool({ name: 'echo', arguments: { text: 'hi' } })
    const crash = await w.client.callTool({ name: 'crash', arguments: {} }).then(
      () => 'answered',
      (err: Error & { code?: number }) => `failed ${err.code}`,
    )
    const exit = await w.exited
    await w.client.close()
    return { echo, crash, exit, stderr: w.stderr().includes('crashy: giving up') }
  }
  const recorded = await run('record')
  assert.equal(recorded.exit, 3)
  assert.equal(recorded.crash, 'failed -32000')
  assert.equal(recorded.stderr, true)
  const replayed = await run('replay')
  assert.deepEqual(replayed, recorded)
  assert.equal(spawnsIn(log).length, 1)
})
