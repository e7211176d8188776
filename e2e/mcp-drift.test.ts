/**
 * `tr-proxy drift` understands MCP. Over stdio (a server on the real SDK, recorded through `tr-proxy mcp` by the
 * real SDK client): mcp+stdio:// URLs are never fetched; the server is re-spawned from its recorded command only
 * with --mcp-spawn (a spawn log proves it), its tools/list and its read-only calls are compared in MCP terms (a
 * tool call that writes is not re-sent without --unsafe: its file proves it); a next version of the server
 * (a renamed argument, a new tool) is reported as drift; a command recorded with a masked secret is not run until
 * the user gives it. Over Streamable HTTP (a stateful server on the real SDK, recorded through install()): the
 * recorded initialize opens a fresh session and the messages after it go in it: no answer is an error.
 */
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import type { DriftedExchange, DriftReport } from '../engine/index.ts'
import { install } from '../interceptor/index.ts'
import { openStore } from '../store/index.ts'
import { connectWrapped, fixtureServer, markedServer, spawnsIn, TR_PROXY, tempDir } from './support/mcp-harness.ts'
import { startWeatherServer, umbrellaAgent } from './support/mcp-http-server.ts'
import { run } from './support/proxy-harness.ts'

/** `tr-proxy --store STORE drift TRACE --json ...flags` in a child process with `env` added. */
async function drift(store: string, trace: string, flags: string[], env: Record<string, string> = {}) {
  const r = await run(process.execPath, [TR_PROXY, '--store', store, 'drift', trace, '--json', ...flags], { ...process.env, ...env }, 120_000)
  let report: DriftReport | undefined
  try {
    report = JSON.parse(r.stdout) as DriftReport
  } catch {
    assert.fail(`drift printed no report (exit ${r.code}): ${r.stdout}\n${r.stderr}`)
  }
  const rows = report.traces[0]?.exchanges ?? []
  const row = (url: string) => rows.find((e) => e.exchange.startsWith(`POST ${url} `)) as DriftedExchange
  return { ...r, report, rows, row }
}

/** Records one agent run through `tr-proxy mcp -- <server>`: tools, the forecast (reads), a note (writes). */
async function recordStdio(store: string, trace: string, server: string[], notes: string): Promise<void> {
  const w = await connectWrapped({ store, mode: 'record', trace, name: 'weather', server, env: { NOTES_FILE: notes } })
  await w.client.listTools()
  await w.client.callTool({ name: 'forecast', arguments: { city: 'Oslo' } })
  await w.client.callTool({ name: 'save_note', arguments: { text: 'recorded' } })
  await w.client.close()
  assert.equal(await w.exited, 0, w.stderr())
}

const URL_OF = (tail: string) => `mcp+stdio://weather/${tail}`

test('stdio: never fetched; re-spawned only when asked; tools/list and read-only calls compared; a new server version drifts', async (t) => {
  const dir = tempDir(t)
  const store = join(dir, 'store')
  const log = join(dir, 'spawns')
  const notes = join(dir, 'notes.txt')
  await recordStdio(store, 'wx', markedServer(log, fixtureServer('weather-server.mjs')), notes)
  assert.equal(spawnsIn(log).length, 1)

  // No flag: nothing runs, nothing is fetched, every MCP message says how to have it re-sent.
  const plain = await drift(store, 'wx', [], { NOTES_FILE: notes })
  assert.equal(plain.code, 0, plain.stderr)
  assert.equal(spawnsIn(log).length, 1, 'the recorded command did not run')
  assert.deepEqual(
    plain.rows.filter((e) => e.status !== 'skipped').map((e) => e.exchange),
    [],
    'no MCP stdio message was sent anywhere',
  )
  assert.match(plain.row(URL_OF('tools/list')).reason ?? '', /pass --mcp-spawn to run its recorded command \(.*weather-server\.mjs\)/)

  // --mcp-spawn, the same server: the handshake, tools/list and the read-only call are the same; the write is not re-sent.
  const same = await drift(store, 'wx', ['--mcp-spawn'], { NOTES_FILE: notes })
  assert.equal(same.code, 0, same.stdout + same.stderr)
  assert.match(same.stderr, /drift: re-spawning MCP server "weather": .*weather-server\.mjs/)
  assert.equal(spawnsIn(log).length, 2, 'the server was re-spawned once')
  for (const tail of ['initialize', 'tools/list', 'tools/call/forecast']) {
    const row = same.row(URL_OF(tail))
    assert.deepEqual({ status: row.status, compared: row.compared, changes: row.changes }, { status: 'same', compared: 'mcp', changes: [] }, tail)
  }
  assert.equal(same.row(URL_OF('tools/call/save_note')).status, 'skipped')
  assert.match(same.row(URL_OF('tools/call/save_note')).reason ?? '', /tool "save_note" is not known to only read: pass --unsafe/)
  assert.deepEqual(readFileSync(notes, 'utf8').split('\n').filter(Boolean), ['recorded'], 'the tool that writes was not called again')

  // The next version: forecast's argument renamed, a tool added. Drift says so in MCP terms, and exits 1.
  const next = await drift(store, 'wx', ['--mcp-spawn'], { NOTES_FILE: notes, WEATHER_API_VERSION: '2' })
  assert.equal(next.code, 1, next.stdout + next.stderr)
  const list = next.row(URL_OF('tools/list'))
  assert.equal(list.status, 'drift')
  assert.ok(
    list.changes.some((c) => c.kind === 'tool_added' && c.tool === 'alerts'),
    JSON.stringify(list.changes),
  )
  assert.ok(
    list.changes.some((c) => c.kind === 'schema_changed' && c.tool === 'forecast' && /^inputSchema\.properties/.test(c.path ?? '')),
    JSON.stringify(list.changes),
  )
  assert.equal(next.row(URL_OF('tools/call/forecast')).status, 'drift', 'the recorded arguments no longer fit')
})

test('stdio: a command recorded with a masked secret is not run with [REDACTED]; the user gives it with --mcp-command', async (t) => {
  const dir = tempDir(t)
  const store = join(dir, 'store')
  const log = join(dir, 'spawns')
  const notes = join(dir, 'notes.txt')
  const server = markedServer(log, fixtureServer('weather-server.mjs'), '--api-key', 'sk-drift-secret-0a1b2c3d')
  await recordStdio(store, 'keyed', server, notes)
  const masked = await drift(store, 'keyed', ['--mcp-spawn'])
  assert.equal(spawnsIn(log).length, 1, 'not run with the masked value')
  assert.match(
    masked.row(URL_OF('tools/list')).reason ?? '',
    /secret-looking values masked .*--api-key \[REDACTED\].* give its command with --mcp-command weather=ENV_VAR/,
  )
  const given = await drift(store, 'keyed', ['--mcp-command', 'weather=WEATHER_MCP_COMMAND'], { WEATHER_MCP_COMMAND: JSON.stringify(server) })
  assert.equal(given.code, 0, given.stdout + given.stderr)
  assert.equal(spawnsIn(log).length, 2)
  assert.equal(given.row(URL_OF('tools/list')).status, 'same')
  assert.match(
    given.stderr,
    /drift: re-spawning MCP server "weather": .*weather-server\.mjs --api-key \[REDACTED\]\n/,
    'the whole command is announced, masked',
  )
  assert.doesNotMatch(given.stdout + given.stderr, /sk-drift-secret/, 'the secret given is never printed')
})

test('Streamable HTTP: drift opens a fresh session and re-sends in it: every message answered, none with the dead session id', async (t) => {
  const dir = tempDir(t)
  const storeDir = join(dir, 'store')
  const server = await startWeatherServer()
  t.after(() => server.close())
  const s = await openStore(storeDir)
  const rec = await install({ mode: 'record', trace: 'http', store: s, config: false })
  await umbrellaAgent(server.url).finally(() => rec.close())
  await s.close()
  const before = { sessions: server.sessions(), errors: server.errors() }

  const r = await drift(storeDir, 'http', [])
  assert.equal(r.code, 0, r.stdout + r.stderr)
  const sent = r.rows.filter((e) => e.status !== 'skipped')
  assert.deepEqual(
    sent.map((e) => [e.status, e.compared]),
    Array(4).fill(['same', 'mcp']),
    'initialize, notifications/initialized, tools/list and the read-only forecast call re-sent and the same',
  )
  const stream = r.rows.find((e) => e.exchange.startsWith('GET '))
  assert.match(stream?.reason ?? '', /session stream .* not re-opened/)
  assert.deepEqual({ sessions: server.sessions() - before.sessions, errors: server.errors() - before.errors }, { sessions: 1, errors: 0 })
})
