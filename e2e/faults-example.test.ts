/**
 * The faulted run of docs/faults.md through the proxy (examples/faults), command by command as the page shows them, their
 * output compared with every line the page says they print (`…` where it marks a cut), as a user runs it:
 * the shipping API as its own process, `tr-proxy record --faults` around the unchecked client (exit 75,
 * two shipments committed for one order: commit evidence names the duplicate) and the idempotent one
 * (exit 0, one shipment), strict replay with the API stopped (the same reset and answer, exit 0),
 * `tr-proxy check` on both traces (75, 0), and the fork that adds a 429.
 */
import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { readFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { tempDir } from './support/proxy-harness.ts'
import { outputMatches, readmeCommands } from './support/readme-commands.ts'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const FAULTS = 'examples/faults/lost-ack.faults.yaml'

function run(cmd: string, args: string[]): Promise<{ code: number | null; out: string; err: string }> {
  const child = spawn(cmd, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  child.stdout.on('data', (c: Buffer) => (out += c))
  child.stderr.on('data', (c: Buffer) => (err += c))
  return once(child, 'exit').then(([code]) => ({ code: code as number | null, out, err }))
}

async function freePort(): Promise<number> {
  const server = createServer()
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const port = (server.address() as { port: number }).port
  await new Promise((resolve) => server.close(resolve))
  return port
}

/** The walkthrough of examples/faults in docs/faults.md: its commands and the lines it says they print. */
function walkthrough(): ReturnType<typeof readmeCommands> {
  const page = readFileSync(join(ROOT, 'docs', 'faults.md'), 'utf8')
  const section = page.slice(page.indexOf('## A faulted run through the proxy'), page.indexOf('## Faults in tests'))
  return readmeCommands(section)
}

function withoutCi(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const { CI: _ci, ...rest } = env
  return rest
}

/** Runs one line of the walkthrough as a user would, in bash with stderr merged into stdout in order, on `port` for 4010. */
async function sh(line: string, port: number, store: string): Promise<string[]> {
  const child = spawn('bash', ['-c', `exec 2>&1; ${line.replaceAll('4010', String(port))}`], {
    cwd: ROOT,
    // As in a user's terminal: in CI an unsealed strict replay ends with a hint to add --sealed.
    env: { ...withoutCi(process.env), TOOL_REPLAY_STORE: store },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  let out = ''
  child.stdout.on('data', (c: Buffer) => (out += c))
  await once(child, 'exit')
  return out
    .replace(/\n$/, '')
    .split('\n')
    .filter((l) => !/^\(node:\d+\) /.test(l) && !l.startsWith('(Use `node --trace-warnings'))
}

test('the examples/faults walkthrough in docs/faults.md, command by command: unchecked retries commit twice (exit 75), idempotent ones once, replay offline', {
  timeout: 240_000,
}, async () => {
  const store = join(tempDir('tr-faults-example-'), 'store')
  const port = await freePort()
  const commands = walkthrough()
  assert.deepEqual(
    commands.map((c) => c.command.split(' ').slice(0, 3).join(' ').trim()),
    [
      'node --conditions=tool-replay-source examples/faults/shipping-api.ts',
      'node bin/tr-proxy.js record',
      'node bin/tr-proxy.js record',
      'kill %1',
      'node bin/tr-proxy.js replay',
      'node bin/tr-proxy.js show',
    ],
  )
  let server: ChildProcess | undefined
  let ledger = ''
  try {
    for (const { command, expected } of commands) {
      if (command.includes('shipping-api.ts')) {
        // The API runs here, as its own process, so this test can read what it commits and stop it.
        server = spawn(process.execPath, ['--conditions=tool-replay-source', 'examples/faults/shipping-api.ts', String(port)], {
          cwd: ROOT,
          stdio: ['ignore', 'pipe', 'inherit'],
        })
        server.stdout?.on('data', (c: Buffer) => (ledger += c))
        while (!ledger.includes('shipping API on')) await new Promise((resolve) => setTimeout(resolve, 20))
        continue
      }
      if (command.startsWith('kill ')) {
        await new Promise((resolve) => setTimeout(resolve, 100))
        assert.deepEqual(
          ledger.split('\n').filter((l) => l.startsWith('api committed')),
          ['api committed shipment s-1 for order o-1', 'api committed shipment s-2 for order o-1', 'api committed shipment s-3 for order o-1'],
        )
        server?.kill('SIGTERM')
        if (server) await once(server, 'exit')
        server = undefined
        continue
      }
      const actual = await sh(command, port, store)
      const want = expected.map((l) => l.replaceAll('4010', String(port)))
      assert.ok(outputMatches(want, actual), `${command}\ndocs/faults.md:\n${want.join('\n')}\nactual:\n${actual.join('\n')}`)
    }
  } finally {
    server?.kill('SIGTERM')
  }
  // Beyond the page: `tr-proxy check` on both traces, and a fork that adds a 429.
  const tr = (...args: string[]) => run(process.execPath, ['bin/tr-proxy.js', '--store', store, ...args])
  const checkUnchecked = await tr('check', 'ship-unchecked', '--contracts', FAULTS)
  assert.equal(checkUnchecked.code, 75, checkUnchecked.out)
  assert.match(checkUnchecked.out, /the app never got the answer of #0 \(fault rule lost-ack\)/)
  assert.equal((await tr('check', 'ship-idempotent', '--contracts', FAULTS)).code, 0)
  assert.equal((await tr('fork', 'ship-idempotent', '--to', 'ship-429', '--patch', '#1 fault=rate_limit@500', '--patch', '#0 fault=none')).code, 0)
  const forked = await tr('show', 'ship-429')
  assert.match(forked.out, /#1 POST \S+ → 429 Too Many Requests .*\[fault rate_limit, rule patch-[0-9a-f]{12}; not forwarded\]/)
  assert.match(forked.out, /#2 POST \S+ → 200 OK/)
})
