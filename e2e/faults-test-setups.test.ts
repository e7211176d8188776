/**
 * The ready-made test setups with TOOL_REPLAY_FAULTS, run the way users run them (node --test with
 * `--import tool-replay/node-test`, and real vitest with `setupFiles`) in child processes: the seed is
 * printed with the command that reruns it; the file fails at teardown when a declared contract broke
 * (an app whose unchecked retry commits twice) or a rule never fired; a corrected app passes; and strict
 * replay of the faulted recording passes offline.
 */
import assert from 'node:assert/strict'
import { execFile, spawn } from 'node:child_process'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { startFaultUpstream } from './support/fault-upstream.ts'

const repoRoot = fileURLToPath(new URL('..', import.meta.url))

/** An app's test: it ships order o-1 and, if that fails, sends it once more; IDEMPOTENT=1 sends a key. */
const APP_TEST = `
import { test } from 'node:test'
import assert from 'node:assert/strict'
test('ships the order', async () => {
  const headers = { 'content-type': 'application/json', ...(process.env.IDEMPOTENT === '1' ? { 'idempotency-key': 'o-1' } : {}) }
  const send = () => fetch(process.env.APP_URL + '/shipments', { method: 'POST', headers, body: '{"orderId":"o-1"}' })
  const res = await send().catch(() => send())
  assert.ok(res.ok)
})
`

const FAULTS = `seed: 42
rules:
  - { id: lost-ack, target: { method: POST, url: /shipments }, fault: response_lost, calls: [1] }
effects:
  - { target: { method: POST, url: /shipments }, id: $.shipment.id, group: $.orderId, name: shipment }
contracts: [no-duplicate-effects]
`

function node(args: string[], env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    // This file itself runs under node --test: drop the marker that would make the child skip its files.
    const { NODE_TEST_CONTEXT: _, ...parentEnv } = process.env
    const child = spawn(process.execPath, ['--conditions=tool-replay-source', ...args], {
      cwd: repoRoot,
      env: { ...parentEnv, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let out = ''
    child.stdout.on('data', (c: Buffer) => (out += c.toString()))
    child.stderr.on('data', (c: Buffer) => (out += c.toString()))
    child.on('close', (code) => resolve({ code, out }))
  })
}

test('node --test --import tool-replay/node-test with TOOL_REPLAY_FAULTS: seed printed, broken contract and unfired rule fail the file', async (t) => {
  const api = await startFaultUpstream()
  const dir = await mkdtemp(join(tmpdir(), 'tr-faults-node-test-'))
  t.after(async () => {
    await api.close()
    await rm(dir, { recursive: true, force: true })
  })
  const testFile = join(dir, 'shipping.test.mjs')
  await writeFile(testFile, APP_TEST)
  await writeFile(join(dir, 'faults.yaml'), FAULTS)
  await writeFile(join(dir, 'typo.yaml'), 'rules:\n  - { id: typo, target: { url: /shipment }, fault: rate_limit }\n')
  const base = { APP_URL: api.url, TOOL_REPLAY_STORE: join(dir, 'store'), TOOL_REPLAY_FAULTS: join(dir, 'faults.yaml') }
  const args = ['--test', '--import', 'tool-replay/node-test', testFile]

  const broken = await node(args, { ...base, TOOL_REPLAY_MODE: 'record', TOOL_REPLAY_TRACE: 'unchecked' })
  assert.equal(broken.code, 1, broken.out)
  assert.match(broken.out, /tool-replay: faults seed 42 \(from the faults file\); rerun: TOOL_REPLAY_FAULTS_SEED=42 \S*node /)
  assert.match(broken.out, /TR_CONTRACT_VIOLATED: Trace "unchecked:shipping" breaks 1 behaviour contract/)
  assert.match(broken.out, /#0 POST \/shipments and #1 POST \/shipments committed shipment s-1 and s-2 for one call/)
  assert.match(broken.out, /Faults seed 42; rerun: TOOL_REPLAY_FAULTS_SEED=42 /)
  assert.deepEqual(api.shipments, ['s-1', 's-2'])

  const fixed = await node(args, { ...base, TOOL_REPLAY_MODE: 'record', TOOL_REPLAY_TRACE: 'idempotent', IDEMPOTENT: '1' })
  assert.equal(fixed.code, 0, fixed.out)
  assert.deepEqual(api.shipments, ['s-1', 's-2', 's-3'], 'one more shipment, committed once')

  const seeded = await node(args, { ...base, TOOL_REPLAY_MODE: 'record', TOOL_REPLAY_TRACE: 'seeded', IDEMPOTENT: '1', TOOL_REPLAY_FAULTS_SEED: '7' })
  assert.equal(seeded.code, 0, seeded.out)
  assert.match(seeded.out, /faults seed 7 \(from TOOL_REPLAY_FAULTS_SEED\)/)

  const requests = api.requests.length
  const replayed = await node(args, { ...base, TOOL_REPLAY_TRACE: 'idempotent', IDEMPOTENT: '1' })
  assert.equal(replayed.code, 0, replayed.out)
  assert.equal(api.requests.length, requests, 'strict replay reached no server')

  const typo = await node(args, { ...base, TOOL_REPLAY_MODE: 'record', TOOL_REPLAY_TRACE: 'typo', IDEMPOTENT: '1', TOOL_REPLAY_FAULTS: join(dir, 'typo.yaml') })
  assert.equal(typo.code, 1, typo.out)
  assert.match(
    typo.out,
    /TR_FAULT_NOT_FIRED: 1 fault rule\(s\) never fired.*"typo" \(rate_limit on \* \/shipment\): its target \* \/shipment matched no request/,
  )
})

function vitestBin(): string | undefined {
  try {
    return join(dirname(createRequire(import.meta.url).resolve('vitest/package.json')), 'vitest.mjs')
  } catch {
    return undefined
  }
}
const vitest = vitestBin()

test('vitest setupFiles with TOOL_REPLAY_FAULTS: a rule that never fired fails the file at teardown', {
  skip: vitest ? false : 'vitest is not installed',
}, async (t) => {
  const api = await startFaultUpstream()
  const dir = await mkdtemp(join(tmpdir(), 'tr-faults-vitest-'))
  t.after(async () => {
    await api.close()
    await rm(dir, { recursive: true, force: true })
  })
  await writeFile(join(dir, 'shipping.test.mjs'), APP_TEST.replace("import { test } from 'node:test'", "import { test } from 'vitest'"))
  await writeFile(join(dir, 'faults.yaml'), FAULTS)
  await writeFile(join(dir, 'typo.yaml'), 'rules:\n  - { id: typo, target: { url: /shipment }, fault: rate_limit }\n')
  await writeFile(
    join(dir, 'vitest.config.mjs'),
    `export default { test: { setupFiles: [${JSON.stringify(join(repoRoot, 'setup', 'vitest.ts'))}], include: ['*.test.mjs'] } }\n`,
  )
  const { NODE_TEST_CONTEXT: _, ...parentEnv } = process.env
  const env = { ...parentEnv, APP_URL: api.url, TOOL_REPLAY_STORE: join(dir, 'store'), TOOL_REPLAY_MODE: 'record', NO_COLOR: '1' }
  const run = (extra: Record<string, string>) =>
    new Promise<{ code: number; out: string }>((resolve) => {
      execFile(process.execPath, [vitest as string, 'run'], { cwd: dir, env: { ...env, ...extra } }, (err, stdout, stderr) =>
        resolve({ code: err ? Number((err as { code?: unknown }).code ?? 1) : 0, out: `${stdout}${stderr}` }),
      )
    })
  const passing = await run({ TOOL_REPLAY_FAULTS: join(dir, 'faults.yaml'), IDEMPOTENT: '1' })
  assert.equal(passing.code, 0, passing.out)
  assert.match(passing.out, /faults seed 42 \(from the faults file\)/)
  const typo = await run({ TOOL_REPLAY_FAULTS: join(dir, 'typo.yaml'), IDEMPOTENT: '1' })
  assert.equal(typo.code, 1, typo.out)
  assert.match(typo.out, /TR_FAULT_NOT_FIRED/)
})
