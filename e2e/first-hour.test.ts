/**
 * The first hour of a new user, from the packed tarball: `npm pack` of a clean copy of the sources (no dist/:
 * package.json "prepare" builds it) installed into an empty project that has only the package's runtime
 * dependencies, then each way in as README's quick start shows it: `npx tr-proxy --help`, the node:test setup
 * (record, then strict replay with the API stopped), the vitest setup (vitest linked in as the project's own
 * dev dependency) and the MCP wrapper `npx tr-proxy mcp -- <server>` (record, then replay with the server's
 * file gone: it never starts). Replays are offline: the counting API sees no request after recording. On a Node
 * older than 22.19 (Debian's Node 20 here) every entry point fails at import with a message naming the fix.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { linkFrameworks, packedTarball, runProgram, scratchProject } from './support/packed-package.ts'

/** Packages a runtime install must not pull in: build and test tools, SDKs and the browser driver stay dev-only. */
const DEV_ONLY = ['typescript', 'esbuild', 'vitest', 'jest', 'playwright-core', 'openai', '@modelcontextprotocol/sdk', '@biomejs/biome', 'msw']

let dir = ''
let missing: string[] = []
let hits = 0
let api: http.Server
let apiUrl = ''

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tr-first-hour-'))
  // Only the package and its runtime dependencies, installed from the tarball; then the dev-only check, then
  // vitest linked in as the user's own dev dependency.
  await scratchProject(dir, await packedTarball(), [])
  const present = DEV_ONLY.filter((name) => existsSync(join(dir, 'node_modules', name)))
  assert.deepEqual(present, [], 'a runtime install of the tarball pulled in dev-only packages')
  missing = linkFrameworks(dir, ['vitest'])
  api = http.createServer((_req, res) => {
    hits++
    res.setHeader('content-type', 'application/json')
    res.end('{"greeting":"hello from the api"}')
  })
  await new Promise<void>((resolve) => api.listen(0, '127.0.0.1', resolve))
  apiUrl = `http://127.0.0.1:${(api.address() as AddressInfo).port}`
})

after(async () => {
  await new Promise<void>((resolve) => (api ? api.close(() => resolve()) : resolve()))
  if (dir) rmSync(dir, { recursive: true, force: true })
})

/** The environment of a user's shell in the project: no test-runner context of ours, a store inside the project. */
function userEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const { NODE_TEST_CONTEXT: _, NODE_OPTIONS: __, ...env } = process.env
  return { ...env, APP_URL: apiUrl, NO_COLOR: '1', ...extra }
}

test('`npx tr-proxy --help` runs the installed CLI', async () => {
  const r = await runProgram('npx', ['--no-install', 'tr-proxy', '--help'], { cwd: dir, env: userEnv(), timeoutMs: 60_000 })
  assert.equal(r.code, 0, r.out)
  for (const command of ['record', 'replay', 'mcp', 'import']) assert.match(r.out, new RegExp(`tr-proxy ${command}`), r.out)
})

const NODE_TEST_FILE = `
import { test } from 'node:test'
import assert from 'node:assert/strict'
test('greets', async () => {
  const res = await fetch(process.env.APP_URL + '/greeting')
  assert.equal((await res.json()).greeting, 'hello from the api')
})
`

test('node:test setup: record once, then a strict replay with the API unreachable', async () => {
  writeFileSync(join(dir, 'greeting.test.mjs'), NODE_TEST_FILE)
  const run = (mode: string) =>
    runProgram(process.execPath, ['--import', 'tool-replay/node-test', '--test', 'greeting.test.mjs'], {
      cwd: dir,
      env: userEnv({ TOOL_REPLAY_MODE: mode }),
      timeoutMs: 90_000,
    })
  const before = hits
  const recorded = await run('record')
  assert.equal(recorded.code, 0, recorded.out)
  assert.equal(hits, before + 1, 'recording reached the API once')
  const replayed = await run('replay')
  assert.equal(replayed.code, 0, replayed.out)
  assert.equal(hits, before + 1, 'the replay reached no API')
  assert.ok(existsSync(join(dir, '.tool-replay', 'store')), 'the store is in the project, at .tool-replay/store')
})

test('vitest setup (setupFiles: ["tool-replay/vitest"]): record, then a strict replay offline', async (t) => {
  if (missing.includes('vitest')) return t.skip('vitest is not installed in this checkout')
  writeFileSync(join(dir, 'greeting.vitest.test.mjs'), NODE_TEST_FILE.replace("import { test } from 'node:test'", "import { test } from 'vitest'"))
  writeFileSync(join(dir, 'vitest.config.mjs'), "export default { test: { setupFiles: ['tool-replay/vitest'], include: ['*.vitest.test.mjs'] } }\n")
  const run = (mode: string) =>
    runProgram(process.execPath, [join(dir, 'node_modules', 'vitest', 'vitest.mjs'), 'run'], {
      cwd: dir,
      env: userEnv({ TOOL_REPLAY_MODE: mode }),
      timeoutMs: 120_000,
    })
  const before = hits
  const recorded = await run('record')
  assert.equal(recorded.code, 0, recorded.out)
  assert.equal(hits, before + 1)
  const replayed = await run('replay')
  assert.equal(replayed.code, 0, replayed.out)
  assert.equal(hits, before + 1, 'the replay reached no API')
  assert.doesNotMatch(replayed.out, /Failed to load source map|could not be found|sourcemap/i, 'vitest warned about the shipped source maps')
})

/** A stdio MCP server of a few lines: answers every JSON-RPC request with its method and params. */
const ECHO_SERVER = `
import { createInterface } from 'node:readline'
for await (const line of createInterface({ input: process.stdin })) {
  const msg = JSON.parse(line)
  if (msg.id === undefined) continue
  process.stdout.write(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result: { echoed: msg.method, params: msg.params ?? null } }) + '\\n')
}
`

/** An MCP client's side: spawns the configured command, sends one request, prints the answer. */
const CLIENT = `
import { spawn } from 'node:child_process'
import { createInterface } from 'node:readline'
const [command, ...args] = JSON.parse(process.argv[2])
const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'inherit'] })
child.stdin.write(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { cursor: 'first' } }) + '\\n')
for await (const line of createInterface({ input: child.stdout })) {
  console.log(line)
  break
}
child.stdin.end()
const code = await new Promise((resolve) => child.on('exit', resolve))
console.log('wrapper exit ' + code)
`

test('MCP wrapper `npx tr-proxy mcp -- <server>`: record, then replay without the server', async () => {
  writeFileSync(join(dir, 'echo-server.mjs'), ECHO_SERVER)
  writeFileSync(join(dir, 'mcp-client.mjs'), CLIENT)
  const run = (mode: string) =>
    runProgram(
      process.execPath,
      [
        'mcp-client.mjs',
        JSON.stringify(['npx', '--no-install', 'tr-proxy', 'mcp', '--mode', mode, '--trace', 'mcp', '--name', 'echo', '--', 'node', 'echo-server.mjs']),
      ],
      { cwd: dir, env: userEnv(), timeoutMs: 60_000 },
    )
  const recorded = await run('record')
  assert.equal(recorded.code, 0, recorded.out)
  assert.match(recorded.out, /"echoed":"tools\/list"/)
  assert.match(recorded.out, /wrapper exit 0/)
  rmSync(join(dir, 'echo-server.mjs'))
  const replayed = await run('replay')
  assert.equal(replayed.code, 0, replayed.out)
  assert.match(replayed.out, /"echoed":"tools\/list"/, 'the recorded answer, replayed without the server')
  assert.match(replayed.out, /wrapper exit 0/)
  assert.ok(readdirSync(dir).includes('.tool-replay'))
})

/** A Node older than 22.19 on this machine (Debian's Node 20 here), if there is one. */
function oldNode(): string | undefined {
  for (const bin of ['/usr/bin/node', '/usr/local/bin/node']) {
    if (!existsSync(bin)) continue
    const r = spawnSync(bin, ['-p', 'process.versions.node'], { encoding: 'utf8' })
    const [major = 0, minor = 0] = r.stdout.trim().split('.').map(Number)
    if (r.status === 0 && (major < 22 || (major === 22 && minor < 19))) return bin
  }
  return undefined
}

test('on a Node older than 22.19 every library entry point fails at import, naming the version and the fix', async (t) => {
  const old = oldNode()
  if (!old) return t.skip('no Node older than 22.19 on this machine')
  const pkg = JSON.parse(readFileSync(join(dir, 'node_modules', 'tool-replay', 'package.json'), 'utf8')) as { exports: Record<string, unknown> }
  const subpaths = Object.keys(pkg.exports)
    .filter((s) => !s.endsWith('.json'))
    .map((s) => s.replace(/^\./, 'tool-replay'))
  const script = `for (const s of ${JSON.stringify(subpaths)}) { try { await import(s); console.log(s + ': loaded') } catch (e) { console.log(s + ': ' + e.message) } }`
  const r = await runProgram(old, ['--input-type=module', '-e', script], { cwd: dir, env: userEnv(), timeoutMs: 60_000 })
  const lines = r.out.trim().split('\n')
  assert.equal(lines.length, subpaths.length, r.out)
  for (const line of lines) assert.match(line, /: Tool Replay needs Node >= 22\.19 \(this is v\d+\.\d+\.\d+\): .*Node 22\.19 or later/, line)
})
