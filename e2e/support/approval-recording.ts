/**
 * The approval-agent example (examples/approval-agent) recorded as a user does it for the inspector's browser
 * tests: its fakes started, `tr-proxy record --trace NAME -- node examples/approval-agent/decide.ts` through
 * the proxy, and the CLI run from the repository root with this Node first on PATH (the command says `node`).
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { type FakeServices, startFakeServices } from '../../examples/approval-agent/fake-services.ts'

/** The repository root (the recorded command's directory). */
export const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const BIN = join(ROOT, 'bin/tr-proxy.js')

/** PATH with this Node's directory first, for `node` in recorded commands. */
export const NODE_PATH = `${dirname(process.execPath)}:${process.env.PATH ?? ''}`

/** Runs tr-proxy in the repository root. */
export async function cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [BIN, ...args], {
    cwd: ROOT,
    env: { ...process.env, PATH: NODE_PATH, OPENAI_API_KEY: 'sk-proj-dummy-inspector-walkthrough-1234' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (c: Buffer) => (stdout += c))
  child.stderr.on('data', (c: Buffer) => (stderr += c))
  const [code] = await once(child, 'exit')
  return { code: code as number | null, stdout, stderr }
}

/** Starts the fakes and records trace `name` into `store`; the fakes stay up (close them after). */
export async function recordApproval(store: string, name = 'approval'): Promise<FakeServices> {
  const fakes = await startFakeServices()
  const rec = await cli([
    'record',
    '--store',
    store,
    '--trace',
    name,
    '--resolve',
    `api.openai.test=127.0.0.1:${fakes.ports.model}`,
    '--resolve',
    `refunds.test=127.0.0.1:${fakes.ports.refunds}`,
    '--upstream-ca',
    join(ROOT, 'examples/approval-agent/fixtures/fakes-cert.pem'),
    '--',
    'node',
    'examples/approval-agent/decide.ts',
  ])
  assert.equal(rec.code, 0, rec.stderr)
  assert.match(rec.stdout, /decision: approved \$89\.99 for order A-1042/)
  return fakes
}
