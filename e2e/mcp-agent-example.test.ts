/**
 * The MCP agent example as its README tells it (examples/mcp-agent/README.md): every command of the walk-through,
 * exactly as shown, run by bash in a scratch checkout (the example copied, everything else linked to this
 * repository), its output compared with the lines the README says it prints and its exit status with 0. The real
 * openai SDK and the real filesystem and memory MCP servers run once, while recording; the spawn log and the
 * workspace prove the replays start no server and write nothing.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { after, before, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { normalizeOutput, outputMatches, readmeCommands } from './support/readme-commands.ts'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const EXAMPLE = 'examples/mcp-agent'
const COMMANDS = readmeCommands(readFileSync(join(ROOT, EXAMPLE, 'README.md'), 'utf8'))
let checkout: string

before(() => {
  checkout = mkdtempSync(join(tmpdir(), 'tr-mcp-agent-'))
  for (const name of readdirSync(ROOT)) {
    if (['.git', '.tool-replay', '.scratch', 'examples'].includes(name)) continue
    symlinkSync(join(ROOT, name), join(checkout, name))
  }
  mkdirSync(join(checkout, 'examples'))
  cpSync(join(ROOT, EXAMPLE), join(checkout, EXAMPLE), { recursive: true, filter: (src) => !/workspace\/(reply\.txt|memory\.jsonl)$/.test(src) })
})
after(() => {
  if (checkout) rmSync(checkout, { recursive: true, force: true })
})

/** Runs one shell line in the checkout as a user would (stderr merged into stdout); Node's own warnings dropped. */
async function sh(command: string): Promise<{ status: number | null; lines: string[] }> {
  const env = { PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ''}`, HOME: process.env.HOME ?? checkout }
  const child = spawn('bash', ['-c', `exec 2>&1; ${command}`], { cwd: checkout, env, stdio: ['ignore', 'pipe', 'inherit'], timeout: 180_000 })
  const out: Buffer[] = []
  child.stdout.on('data', (c: Buffer) => out.push(c))
  const [status] = (await once(child, 'close')) as [number | null]
  const text = Buffer.concat(out).toString('utf8')
  const lines = text === '' ? [] : text.replace(/\n$/, '').split('\n')
  return { status, lines: lines.filter((l) => !/^\(node:\d+\) /.test(l) && !l.startsWith('(Use `node --trace-warnings')) }
}

test('the MCP agent README, command by command', async (t) => {
  assert.ok(COMMANDS.length >= 12, `the README walk-through has ${COMMANDS.length} commands`)
  for (const { command, expected } of COMMANDS) {
    await t.test(command, async () => {
      const r = await sh(command)
      assert.equal(r.status, 0, `exit ${r.status}:\n${r.lines.join('\n')}`)
      assert.ok(
        outputMatches(expected, r.lines),
        `the output differs from the README.\nREADME:\n${expected.map(normalizeOutput).join('\n')}\nactual:\n${r.lines.map(normalizeOutput).join('\n')}`,
      )
    })
  }
  // After every replay, fork, emit-test and verify: still the two recording starts, and nothing written.
  assert.equal(readFileSync(join(checkout, '.tool-replay/mcp-agent-spawns'), 'utf8').trim().split('\n').length, 2)
  assert.deepEqual(readdirSync(join(checkout, EXAMPLE, 'workspace')).sort(), ['.gitignore', 'ticket.txt'])
})
