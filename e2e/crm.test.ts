/**
 * The CRM story end to end, on the interceptor library path:
 * record once against a live (fake) CRM at https://crm.test → fork with $.active=false → replay the same
 * app strictly against the branch (it decides "rejected") while recording what it did → diff reports the
 * first divergence with attribution → promote the branch to a case expecting "rejected" → verify (library,
 * CLI, generated node:test file) → reintroduce the bug → a behavioural regression while strict replay
 * still completes. The CRM sees exactly one request, during the first recording.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { createMemoryStore, exportTrace, openStore, type TraceStore, traceDigest } from 'tool-replay/store'
import { isToolReplayError, sha256 } from 'tool-replay/trace'
import { verifyCase } from '../cases/index.ts'
import { runCli } from '../cli/main.ts'
import { type FakeCrm, startFakeCrm } from '../examples/crm/crm-server.ts'
import { withInterceptor } from '../examples/crm/session.ts'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const CASES_IMPORT = pathToFileURL(join(ROOT, 'cases/index.ts')).href

let dir: string
let storeDir: string
let store: TraceStore
let crm: FakeCrm
let app: { decideCustomer42: () => Promise<string> }

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tr-crm-'))
  storeDir = join(dir, 'store')
  store = await openStore(storeDir)
  crm = await startFakeCrm()
  // A copy of the app, so the test can reintroduce the bug without touching the repository.
  cpSync(join(ROOT, 'examples/crm/app.ts'), join(dir, 'app/app.ts'))
  cpSync(join(ROOT, 'examples/crm/decide.ts'), join(dir, 'app/decide.ts'))
  app = await import(pathToFileURL(join(dir, 'app/app.ts')).href)
})
after(async () => {
  await crm.close()
  await store.close()
  rmSync(dir, { recursive: true, force: true })
})

async function cli(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = []
  const err: string[] = []
  // --store goes before `--`: what follows belongs to the wrapped command.
  const dash = argv.indexOf('--')
  const full = dash === -1 ? [...argv, '--store', storeDir] : [...argv.slice(0, dash), '--store', storeDir, ...argv.slice(dash)]
  const code = await runCli(full, { out: (t) => out.push(t), err: (t) => err.push(t) })
  return { code, out: out.join('\n'), err: err.join('\n') }
}

/** Runs a generated test file in a fresh `node --test` (not as a child of this runner). */
function runGenerated(file: string) {
  const env = { ...process.env }
  delete env.NODE_TEST_CONTEXT
  return spawnSync(process.execPath, ['--conditions=tool-replay-source', '--test', file], { encoding: 'utf8', cwd: dir, env })
}

const hashTree = (d: string) =>
  Object.fromEntries(
    readdirSync(d)
      .sort()
      .map((n) => [n, sha256(readFileSync(join(d, n)))]),
  )

test('the CRM story', async (t) => {
  await t.test('record once against the live CRM: approved', async () => {
    const run = await withInterceptor({ mode: 'record', trace: 'crm', store, upstream: crm.agent() }, app.decideCustomer42)
    assert.equal(run.error, undefined)
    assert.equal(run.result, 'approved')
    assert.deepEqual(crm.requests, ['GET /customers/42'])
  })

  const sourceBefore = exportTrace(await store.readTrace('crm')).text

  await t.test('fork with $.active=false: the source stays byte-identical, the branch keeps lineage', async () => {
    const r = await cli('fork', 'crm', '--to', 'crm-inactive', '--patch', '#0 $.active=false')
    assert.equal(r.code, 0, r.err)
    assert.match(r.out, /Forked "crm" to "crm-inactive" \(1 exchange, 1 patch\):\n {2}[0-9a-f]{12} {2}exchange #0 {2}#0 \$\.active=false/)
    const source = await store.readTrace('crm')
    assert.equal(exportTrace(source).text, sourceBefore)
    const branch = await store.readTrace('crm-inactive')
    assert.equal(branch.meta.lineage?.sourceDigest, traceDigest(source))
    assert.equal(branch.meta.lineage?.patches[0]?.spec, '#0 $.active=false')
    assert.equal(branch.exchanges[0]?.origin, 'patched')
    assert.equal(branch.exchanges[0]?.patchId, branch.meta.lineage?.patches[0]?.id)
    const bad = await cli('fork', 'crm', '--to', 'nope', '--patch', 'GET https://crm.test/customers/43 $.active=false')
    assert.equal(bad.code, 64)
    assert.match(bad.err, /TR_INVALID_PATCH.*matches no exchange/)
  })

  await t.test('the branch replays on its own: the same app decides rejected', async () => {
    const alone = createMemoryStore()
    await alone.putTrace(await store.readTrace('crm-inactive'))
    const run = await withInterceptor({ mode: 'replay', trace: 'crm-inactive', store: alone }, app.decideCustomer42)
    assert.equal(run.result, 'rejected')
    assert.equal(run.summary.ok, true)
  })

  await t.test('strict replay against the branch, recording what the app did', async () => {
    const run = await withInterceptor({ mode: 'replay', trace: 'crm-inactive', store, recordAs: 'crm-observed' }, app.decideCustomer42)
    assert.equal(run.result, 'rejected')
    assert.equal(run.summary.ok, true)
    assert.equal((await store.readTrace('crm-observed')).exchanges.length, 1)
  })

  await t.test('diff reports the first observable divergence, attributed to the patch', async () => {
    const r = await cli('diff', 'crm', 'crm-observed')
    assert.equal(r.code, 0)
    const id = (await store.readTrace('crm-inactive')).meta.lineage?.patches[0]?.id as string
    assert.equal(
      r.out,
      [
        'diff a "crm" (1 exchange) → b "crm-observed" (1 exchange)',
        '1 difference: 1 response_changed',
        `first divergence: GET https://crm.test/customers/42 #0 response $.active: true → false [from patch ${id} on b #0]`,
        '',
        'response_changed GET https://crm.test/customers/42 #0 (a #0, b #0)',
        '  response $.active: true → false',
        `  from patch ${id} on b #0`,
      ].join('\n'),
    )
    const withSpec = await cli('diff', 'crm', 'crm-inactive')
    assert.match(withSpec.out, new RegExp(`from patch ${id} \\(#0 \\$\\.active=false\\) on b #0`))
    const json = JSON.parse((await cli('diff', 'crm', 'crm-observed', '--format', 'json')).out)
    assert.equal(json.format, 'tool-replay-diff')
    assert.equal(json.version, 1)
    assert.deepEqual(json.first.details, [{ side: 'response', field: 'body', path: '$.active', before: true, after: false }])
    assert.equal((await cli('diff', 'crm', 'crm-observed', '--exit-code')).code, 1)
    assert.equal((await cli('diff', 'crm-inactive', 'crm-observed', '--exit-code')).code, 0)
  })

  await t.test('diff options: trace files, --ignore, --no-volatile', async () => {
    const file = join(dir, 'crm.trace.json')
    assert.equal((await cli('export', 'crm', '--out', file)).code, 0)
    const r = await cli('diff', file, 'crm-inactive', '--ignore', '$.active')
    assert.equal(r.code, 0)
    assert.match(r.out, /^diff a "crm" \(1 exchange\) → b "crm-inactive" \(1 exchange\)\nno differences$/)
    assert.equal((await cli('diff', 'crm', 'crm-inactive', '--ignore-key', 'active', '--exit-code')).code, 0)
    assert.equal((await cli('diff', 'crm', 'crm-inactive', '--no-volatile', '--exit-code')).code, 1)
    const missing = await cli('diff', 'crm', 'nope')
    assert.equal(missing.code, 66)
    assert.match(missing.err, /TR_TRACE_NOT_FOUND/)
  })

  const casesDir = () => join(dir, 'cases')
  const caseDir = () => join(casesDir(), 'crm-rejected')

  await t.test('promote the branch to a case expecting rejected', async () => {
    const r = await cli(
      'emit-test',
      'crm-inactive',
      '--out',
      casesDir(),
      '--name',
      'crm-rejected',
      '--runner',
      join(dir, 'app/app.ts#decideCustomer42'),
      '--expect-json',
      '"rejected"',
      '--import-from',
      CASES_IMPORT,
    )
    assert.equal(r.code, 0, r.err)
    const files = readdirSync(caseDir()).sort()
    assert.equal(files.length, 3)
    const manifestText = readFileSync(join(caseDir(), 'manifest.json'), 'utf8')
    const manifest = JSON.parse(manifestText)
    assert.deepEqual(files, [manifest.trace.file, 'crm-rejected.test.mjs', 'manifest.json'].sort())
    assert.equal(sha256(readFileSync(join(caseDir(), manifest.trace.file))), manifest.trace.sha256)
    assert.equal(manifest.run.module, '../../app/app.ts')
    // Canonical: no timestamps, machine paths or source trace names.
    assert.doesNotMatch(manifestText, new RegExp(`${dir}|crm-inactive|crm-observed|\\d{4}-\\d{2}-\\d{2}T`))
    assert.doesNotMatch(readFileSync(join(caseDir(), manifest.trace.file), 'utf8'), /crm-inactive|"sourceName"/)
    const again = await cli(
      'emit-test',
      'crm-inactive',
      '--out',
      casesDir(),
      '--name',
      'crm-rejected',
      '--runner',
      join(dir, 'app/app.ts#decideCustomer42'),
      '--expect-json',
      '"rejected"',
    )
    assert.equal(again.code, 66)
    assert.match(again.err, /TR_CASE_EXISTS/)
    assert.deepEqual(readdirSync(casesDir()), ['crm-rejected'], 'no staging directory left behind')
  })

  await t.test('verify passes (library, CLI, generated test) and never writes into the case', async () => {
    const before = hashTree(caseDir())
    const result = await verifyCase(caseDir())
    assert.equal(result.actual, 'rejected')
    const r = await cli('verify', caseDir())
    assert.equal(r.code, 0, r.err)
    assert.match(r.out, /Case "crm-rejected" passed: 1 exchange\(s\) replayed strictly, result "rejected" as expected\./)
    const gen = runGenerated(join(caseDir(), 'crm-rejected.test.mjs'))
    assert.equal(gen.status, 0, gen.stdout + gen.stderr)
    assert.deepEqual(hashTree(caseDir()), before)
  })

  await t.test('through the proxy: the same trace replays a command, and diff sees the same divergence', async () => {
    const r = await cli('replay', '--trace', 'crm-inactive', '--record-as', 'crm-observed-proxy', '--', process.execPath, join(dir, 'app/decide.ts'), '42')
    assert.equal(r.code, 0, r.err)
    const d = await cli('diff', 'crm', 'crm-observed-proxy')
    assert.match(d.out, /first divergence: GET https:\/\/crm\.test\/customers\/42 #0 response \$\.active: true → false \[from patch [0-9a-f]{12} on b #0\]/)
    assert.equal((await cli('diff', 'crm-observed', 'crm-observed-proxy', '--exit-code')).code, 0, 'interceptor and proxy observed the same')
  })

  await t.test('a command case (stdout + exit code) verified through the proxy', async () => {
    const r = await cli(
      'emit-test',
      'crm-inactive',
      '--out',
      casesDir(),
      '--name',
      'crm-rejected-cmd',
      '--command',
      'node app/decide.ts 42',
      '--cwd',
      dir,
      // The app prints "rejected\n": one trailing newline of the output does not count.
      '--expect-stdout',
      'rejected',
      '--expect-exit-code',
      '0',
      '--import-from',
      CASES_IMPORT,
    )
    assert.equal(r.code, 0, r.err)
    const manifest = JSON.parse(readFileSync(join(casesDir(), 'crm-rejected-cmd', 'manifest.json'), 'utf8'))
    assert.deepEqual(manifest.run, { kind: 'command', command: ['node', 'app/decide.ts', '42'], cwd: '../..' })
    const v = await cli('verify', join(casesDir(), 'crm-rejected-cmd'))
    assert.equal(v.code, 0, v.err)
    // Exact bytes: --expect-stdout-file compares every byte, so the newline the app prints must be there.
    for (const [name, text, code] of [
      ['crm-rejected-exact', 'rejected\n', 0],
      ['crm-rejected-exact-no-newline', 'rejected', 72],
    ] as const) {
      const expected = join(dir, `${name}.txt`)
      writeFileSync(expected, text)
      const e = await cli(
        'emit-test',
        'crm-inactive',
        '--out',
        casesDir(),
        '--name',
        name,
        '--command',
        'node app/decide.ts 42',
        '--cwd',
        dir,
        '--expect-stdout-file',
        expected,
        '--no-verify',
        '--import-from',
        CASES_IMPORT,
      )
      assert.equal(e.code, 0, e.err)
      assert.equal((await cli('verify', join(casesDir(), name))).code, code, name)
    }
  })

  await t.test('reintroduce the bug: a behavioural regression while strict replay completes', async () => {
    const file = join(dir, 'app/app.ts')
    const fixed = readFileSync(file, 'utf8')
    const buggy = fixed.replace("customer.active === true ? 'approved' : 'rejected'", "customer.active !== undefined ? 'approved' : 'rejected'")
    assert.notEqual(buggy, fixed)
    writeFileSync(file, buggy)
    try {
      const before = hashTree(caseDir())
      const r = spawnSync(process.execPath, [join(ROOT, 'bin/tr-proxy.js'), 'verify', caseDir()], { encoding: 'utf8' })
      assert.equal(r.status, 72, r.stderr)
      assert.match(
        r.stderr,
        /error TR_CASE_REGRESSION: Case "crm-rejected" failed: behavioural regression\. Expected "rejected", got "approved" \(\$: "rejected" → "approved"\)\. Strict replay completed \(1 exchange\(s\) replayed, none missing or unused\)/,
      )
      const json = spawnSync(process.execPath, [join(ROOT, 'bin/tr-proxy.js'), 'verify', caseDir(), '--json'], { encoding: 'utf8' })
      const parsed = JSON.parse(json.stdout)
      assert.equal(parsed.error.code, 'TR_CASE_REGRESSION')
      assert.deepEqual(parsed.error.details.differences, [{ path: '$', kind: 'changed', before: 'rejected', after: 'approved' }])
      const gen = runGenerated(join(caseDir(), 'crm-rejected.test.mjs'))
      assert.notEqual(gen.status, 0)
      assert.match(gen.stdout, /TR_CASE_REGRESSION/)
      assert.deepEqual(hashTree(caseDir()), before)
      const cmd = await cli('verify', join(casesDir(), 'crm-rejected-cmd'))
      assert.equal(cmd.code, 72, cmd.err)
      assert.match(cmd.err, /TR_CASE_REGRESSION.*\$\.stdout: "rejected" → "approved"/)
    } finally {
      writeFileSync(file, fixed)
    }
  })

  await t.test('the CRM saw exactly one request, during the first recording', () => {
    assert.deepEqual(crm.requests, ['GET /customers/42'])
  })
})

test('verify failures are ToolReplayErrors with distinct codes', async () => {
  await assert.rejects(verifyCase(join(dir, 'nowhere')), (err) => isToolReplayError(err, 'TR_CASE_INTEGRITY'))
})
