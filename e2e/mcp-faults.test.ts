/**
 * Faults on MCP tool calls, from the same rules file as HTTP faults, with the real SDK client and real npm
 * servers: a response lost after write_file acted (the agent retries without a key: `check` flags the
 * duplicate write with no-duplicate-effects, and strict replay of the faulted run reproduces it), a tool
 * error result, a timeout, a server crash.
 */
import assert from 'node:assert/strict'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { connectWrapped, markedServer, npmServer, spawnsIn, TR_PROXY, tempDir } from './support/mcp-harness.ts'
import { run } from './support/proxy-harness.ts'

const LOST_WRITE = `seed: 7
rules:
  - id: lost-write
    target: { mcp: { tool: write_file } }
    fault: response_lost
    calls: [1]
effects:
  - target: { mcp: { tool: write_file } }
    name: file write
contracts: [no-duplicate-effects]
`

test('a lost response after write_file: the agent retries without a key, check flags the duplicate write; the faulted run replays the same', async (t) => {
  const dir = tempDir(t)
  const store = join(dir, 'store')
  const files = join(dir, 'files')
  mkdirSync(files)
  const log = join(dir, 'spawns')
  const faults = join(dir, 'faults.yaml')
  writeFileSync(faults, LOST_WRITE)
  const journal = join(files, 'journal.txt')
  writeFileSync(journal, '')
  /** The agent: append an entry by rewriting the file; on a timeout, try once more (no idempotency key). */
  const agent = async (mode: 'record' | 'replay', flags: string[]) => {
    const w = await connectWrapped({ store, mode, trace: 'lost', name: 'filesystem', server: markedServer(log, npmServer('server-filesystem'), files), flags })
    const attempts: string[] = []
    for (let attempt = 1; attempt <= 2; attempt++) {
      try {
        await w.client.callTool({ name: 'write_file', arguments: { path: journal, content: 'paid invoice 42\n' } }, undefined, { timeout: 1500 })
        attempts.push(`attempt ${attempt}: ok`)
        break
      } catch (err) {
        attempts.push(`attempt ${attempt}: ${(err as { code?: number }).code}`)
      }
    }
    await w.client.close()
    return { attempts, exit: await w.exited, stderr: w.stderr() }
  }
  const recorded = await agent('record', ['--faults', faults])
  assert.deepEqual(recorded.attempts, ['attempt 1: -32001', 'attempt 2: ok'], 'the first answer was lost (the SDK timed out), the retry went through')
  assert.equal(recorded.exit, 75, `the wrapper fails the run on the broken contract\n${recorded.stderr}`)
  assert.match(recorded.stderr, /no-duplicate-effects/)
  assert.equal(readFileSync(journal, 'utf8'), 'paid invoice 42\n')

  const check = await run(process.execPath, [TR_PROXY, 'check', '--store', store, 'lost', '--contracts', faults], process.env)
  assert.equal(check.code, 75, check.stdout + check.stderr)
  assert.match(check.stdout + check.stderr, /no-duplicate-effects/)
  assert.match(check.stdout + check.stderr, /tools\/call\/write_file/)

  const spawned = spawnsIn(log).length
  const replayed = await agent('replay', [])
  assert.deepEqual(replayed.attempts, recorded.attempts)
  assert.equal(replayed.exit, 0, replayed.stderr)
  assert.equal(spawnsIn(log).length, spawned, 'strict replay of the faulted run starts no server')
})

const MIXED = `seed: 3
rules:
  - id: echo-fails
    target: { mcp: { tool: echo } }
    fault: tool_error
    options: { text: "disk full" }
    calls: [1]
  - id: sum-hangs
    target: { mcp: { tool: get-sum } }
    fault: timeout
    options: { ms: 50 }
    calls: [1]
  - id: sum-crashes
    target: { mcp: { tool: get-sum } }
    fault: server_crash
    calls: [2]
`

test('a tool error result, a timeout and a server crash reach the SDK client as MCP shows them, and replay the same', async (t) => {
  const dir = tempDir(t)
  const store = join(dir, 'store')
  const faults = join(dir, 'faults.yaml')
  writeFileSync(faults, MIXED)
  const session = async (mode: 'record' | 'replay', flags: string[]) => {
    const w = await connectWrapped({ store, mode, trace: 'mixed', name: 'everything', server: [process.execPath, npmServer('server-everything')], flags })
    const seen: unknown[] = []
    const echo = await w.client.callTool({ name: 'echo', arguments: { message: 'hi' } })
    seen.push({ isError: echo.isError, text: (echo.content as Array<{ text: string }>)[0]?.text.slice(0, 9) })
    for (let i = 0; i < 2; i++) {
      await w.client.callTool({ name: 'get-sum', arguments: { a: 1, b: 2 } }).then(
        (r) => seen.push(r.content),
        (err: { code?: number }) => seen.push(`error ${err.code}`),
      )
    }
    const exit = await w.exited
    await w.client.close()
    return { seen, exit }
  }
  const recorded = await session('record', ['--faults', faults])
  assert.deepEqual(recorded.seen, [{ isError: true, text: 'disk full' }, 'error -32001', 'error -32000'])
  assert.equal(recorded.exit, 137, 'the server was killed (SIGKILL) and the wrapper ends the same way')
  const replayed = await session('replay', [])
  assert.deepEqual(replayed, recorded)
})
