/**
 * The README's faulted run through the proxy (examples/faults), command by command, as a user runs it:
 * the shipping API as its own process, `tr-proxy record --faults` around the unchecked client (exit 75,
 * two shipments committed for one order: commit evidence names the duplicate) and the idempotent one
 * (exit 0, one shipment), strict replay with the API stopped (the same reset and answer, exit 0),
 * `tr-proxy check` on both traces (75, 0), and the fork that adds a 429.
 */
import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { tempDir } from './support/proxy-harness.ts'

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

test('the examples/faults walkthrough: unchecked retries commit twice (exit 75), idempotent ones once, replay offline', { timeout: 120_000 }, async () => {
  const store = join(tempDir('tr-faults-example-'), 'store')
  const port = await freePort()
  const api = `http://127.0.0.1:${port}`
  const server: ChildProcess = spawn(process.execPath, ['--conditions=tool-replay-source', 'examples/faults/shipping-api.ts', String(port)], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  let ledger = ''
  server.stdout?.on('data', (c: Buffer) => (ledger += c))
  try {
    while (!ledger.includes('shipping API on')) await new Promise((resolve) => setTimeout(resolve, 20))
    const tr = (...args: string[]) => run(process.execPath, ['bin/tr-proxy.js', '--store', store, ...args])
    const unchecked = await tr('record', '--trace', 'ship-unchecked', '--faults', FAULTS, '--', 'examples/faults/ship.sh', api)
    assert.equal(unchecked.code, 75, unchecked.err)
    assert.match(
      unchecked.err,
      /faults seed 42 \(from the faults file\); rerun: tr-proxy (--store \S+ )?record --trace ship-unchecked --faults \S+ --seed 42 -- /,
    )
    assert.match(unchecked.err, /curl: \(56\) Recv failure: Connection reset by peer/)
    assert.match(unchecked.out, /"id":"s-2"/)
    assert.match(unchecked.err, /FAIL {2}no-duplicate-effects {2}#0 POST \/shipments and #1 POST \/shipments committed shipment s-1 and s-2 for one call/)
    const idempotent = await tr('record', '--trace', 'ship-idempotent', '--faults', FAULTS, '--', 'examples/faults/ship.sh', api, 'idempotent')
    assert.equal(idempotent.code, 0, idempotent.err)
    assert.match(idempotent.out, /"id":"s-3"/)
    await new Promise((resolve) => setTimeout(resolve, 100))
    assert.deepEqual(
      ledger.split('\n').filter((l) => l.startsWith('api committed')),
      ['api committed shipment s-1 for order o-1', 'api committed shipment s-2 for order o-1', 'api committed shipment s-3 for order o-1'],
    )
  } finally {
    server.kill('SIGTERM')
    await once(server, 'exit')
  }
  const tr = (...args: string[]) => run(process.execPath, ['bin/tr-proxy.js', '--store', store, ...args])
  const replay = await tr('replay', '--trace', 'ship-idempotent', '--faults', FAULTS, '--', 'examples/faults/ship.sh', api, 'idempotent')
  assert.equal(replay.code, 0, replay.err)
  assert.match(replay.err, /curl: \(56\) Recv failure: Connection reset by peer/)
  assert.match(replay.out, /"id":"s-3"/)
  assert.match(replay.err, /faults seed 42 \(recorded in the replayed trace\)/)
  const checkUnchecked = await tr('check', 'ship-unchecked', '--contracts', FAULTS)
  assert.equal(checkUnchecked.code, 75, checkUnchecked.out)
  assert.match(checkUnchecked.out, /the app never got the answer of #0 \(fault rule lost-ack\)/)
  assert.equal((await tr('check', 'ship-idempotent', '--contracts', FAULTS)).code, 0)
  const show = await tr('show', 'ship-unchecked')
  assert.match(
    show.out,
    /#0 POST http:\/\/127\.0\.0\.1:\d+\/shipments → ECONNRESET during response-headers \[fault response_lost, rule lost-ack; upstream 201\]/,
  )
  assert.equal((await tr('fork', 'ship-idempotent', '--to', 'ship-429', '--patch', '#1 fault=rate_limit@500', '--patch', '#0 fault=none')).code, 0)
  const forked = await tr('show', 'ship-429')
  assert.match(forked.out, /#1 POST \S+ → 429 Too Many Requests .*\[fault rate_limit, rule patch-[0-9a-f]{12}; not forwarded\]/)
  assert.match(forked.out, /#2 POST \S+ → 200 OK/)
})
