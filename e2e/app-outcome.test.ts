/**
 * The application's outcome: a run of `tr-proxy record|replay -- <command>` keeps the command, its exit code
 * and the redacted tail of its stdout and stderr in the trace's meta, shown by `show`, carried through
 * export/import and into promoted cases; a fork keeps the command but not an outcome it never had.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { openStore, readTraceFile } from 'tool-replay/store'
import { OUTPUT_TAIL_BYTES } from '../trace/index.ts'
import { tempDir } from './support/proxy-harness.ts'
import { createTestPki, HELLO, startUpstream, type TestUpstream } from './support/proxy-upstream.ts'

const BIN = fileURLToPath(new URL('../bin/tr-proxy.js', import.meta.url))
const SECRET = 'sk-proj-outcome-e2e-0123456789abcdef'
const ENV_SECRET = 'hunter2-but-longer-than-eight'

let pki: Awaited<ReturnType<typeof createTestPki>>
let up: TestUpstream
const work = tempDir('tr-app-outcome-')
const store = join(work, 'store')

before(async () => {
  pki = await createTestPki(['api.test'])
  up = await startUpstream(pki.certs['api.test'])
})
after(async () => {
  await up?.close()
})

async function cli(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'], cwd: work })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (c: Buffer) => (stdout += c))
  child.stderr.on('data', (c: Buffer) => (stderr += c))
  const [code] = await once(child, 'exit')
  return { code: code as number | null, stdout, stderr }
}

const proxyArgs = () => ['--store', store, '--resolve', `api.test=127.0.0.1:${up.port}`, '--upstream-ca', pki.caPath]
// Fetches through the proxy, prints what it got and a secret to stdout, a long stream and the env secret to stderr, exits 3.
const APP = [
  'const r = await fetch("https://api.test/hello")',
  'process.stdout.write(await r.text())',
  `console.log("key ${SECRET}")`,
  'process.stderr.write("x".repeat(20000) + "\\n")',
  'console.error("env " + process.env.MY_API_TOKEN)',
  'process.exitCode = 3',
].join(';')

test('record -- command keeps the command, exit code and redacted output tails; show prints them', async () => {
  const rec = await cli(['record', ...proxyArgs(), '--trace', 'app', '--', process.execPath, '--input-type=module', '-e', APP], { MY_API_TOKEN: ENV_SECRET })
  assert.equal(rec.code, 3, rec.stderr)
  // Passed through as it came: the user's terminal still sees everything.
  assert.equal(rec.stdout, `${HELLO}key ${SECRET}\n`)
  assert.ok(rec.stderr.includes(`env ${ENV_SECRET}`))

  const s = await openStore(store)
  const trace = await s.readTrace('app').finally(() => s.close())
  const app = trace.meta.app
  assert.ok(app?.exit, 'the trace has the app outcome')
  // The command line is redacted too: the secret in the script's text does not reach the trace.
  assert.deepEqual(app.command.slice(1), ['--input-type=module', '-e', APP.replace(SECRET, '[REDACTED]')])
  assert.equal(app.cwd, work)
  assert.equal(app.exit.code, 3)
  assert.equal(app.exit.stdout.text, `${HELLO}key [REDACTED]\n`)
  assert.equal(app.exit.stdout.bytes, Buffer.byteLength(rec.stdout))
  assert.ok(app.exit.stderr.bytes > 20000)
  assert.ok(Buffer.byteLength(app.exit.stderr.text) <= OUTPUT_TAIL_BYTES, 'the tail is bounded')
  assert.ok(app.exit.stderr.text.endsWith('env [REDACTED]\n'), app.exit.stderr.text.slice(-80))
  // No copy of either secret anywhere in the store's export of the trace.
  const exported = await cli(['export', 'app', '--store', store, '--out', join(work, 'app.trace.json')])
  assert.equal(exported.code, 0, exported.stderr)
  const file = readFileSync(join(work, 'app.trace.json'), 'utf8')
  assert.ok(!file.includes(SECRET) && !file.includes(ENV_SECRET))
  const scan = await cli(['scan', join(work, 'app.trace.json')])
  assert.equal(scan.code, 0, scan.stdout + scan.stderr)

  const shown = await cli(['show', 'app', '--store', store])
  assert.equal(shown.code, 0, shown.stderr)
  assert.match(shown.stdout, /^app: .* → exit 3$/m)
  assert.match(shown.stdout, /^ {2}stdout: \d+ bytes$/m)
  assert.match(shown.stdout, /^ {4}key \[REDACTED\]$/m)
  assert.match(shown.stdout, /^ {2}stderr: last \d+ of \d+ bytes$/m)
})

test('replay --record-as keeps the replayed run outcome; export/import carries it; fork keeps only the command', async () => {
  const rep = await cli(['replay', ...proxyArgs(), '--trace', 'app', '--record-as', 'app-again', '--', process.execPath, '--input-type=module', '-e', APP])
  assert.equal(rep.code, 3, rep.stderr)
  const imported = await cli(['import', join(work, 'app.trace.json'), '--store', store, '--as', 'app-imported'])
  assert.equal(imported.code, 0, imported.stdout + imported.stderr)
  const fork = await cli(['fork', 'app', '--to', 'app-fork', '--patch', '#0 status=500', '--store', store])
  assert.equal(fork.code, 0, fork.stderr)
  const s = await openStore(store)
  try {
    const again = await s.readTrace('app-again')
    assert.equal(again.meta.app?.exit?.code, 3)
    assert.equal(again.meta.app?.exit?.stdout.text, `${HELLO}key [REDACTED]\n`)
    const original = await s.readTrace('app')
    const back = await s.readTrace('app-imported')
    assert.deepEqual(back.meta.app, original.meta.app)
    const branch = await s.readTrace('app-fork')
    assert.deepEqual(branch.meta.app, { command: original.meta.app?.command, cwd: work })
  } finally {
    await s.close()
  }
  const shown = await cli(['show', 'app-fork', '--store', store])
  assert.match(shown.stdout, /^app: .* → not run against this trace yet/m)
})

test('a trace file whose meta.app breaks a rule is refused naming the field', async () => {
  const text = readFileSync(join(work, 'app.trace.json'), 'utf8')
  const doc = JSON.parse(text)
  doc.meta.app.exit.code = 300
  const bad = join(work, 'bad.trace.json')
  writeFileSync(bad, JSON.stringify(doc))
  const r = await cli(['import', bad, '--store', store, '--as', 'bad', '--json'])
  const out = JSON.parse(r.stdout)
  assert.equal(out.error.code, 'TR_TRACE_FILE_INVALID')
  assert.match(out.error.message, /meta\.app\.exit\.code must be an integer 0-255, not 300/)
})

test('emit-test keeps the app outcome in the case trace, without the machine directory', async () => {
  const cases = join(work, 'cases')
  const r = await cli([
    'emit-test',
    'app',
    '--store',
    store,
    '--out',
    cases,
    '--name',
    'app-case',
    '--no-verify',
    '--expect-exit-code',
    '3',
    '--',
    process.execPath,
    '--input-type=module',
    '-e',
    APP,
  ])
  assert.equal(r.code, 0, r.stderr)
  const file = readdirSync(join(cases, 'app-case')).find((n) => n.endsWith('.trace.json')) as string
  const t = await readTraceFile(join(cases, 'app-case', file))
  assert.equal(t.meta.app?.exit?.code, 3)
  assert.equal(t.meta.app?.cwd, undefined)
})
