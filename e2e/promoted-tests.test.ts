/**
 * Promoted tests are offline in every framework. A scratch project installs the packed package (npm pack of
 * a build), records the CRM story against a CRM-style upstream that counts connections and requests, forks
 * it, and emits cases for node:test, vitest and jest (a TypeScript runner module, a JavaScript one, a command
 * case, and one whose expectation is wrong so the run must fail). Each framework then runs its generated
 * tests with the upstream still up and counting: the count must not move. jest runs in its ESM mode
 * (NODE_OPTIONS=--experimental-vm-modules); its test environment gets a fetch from another realm, so
 * verifyCase runs the runner in a child Node process, and a plain `install()` there refuses instead of going
 * live. `setupFiles: ['tool-replay/vitest']` is used by its package name.
 */
import assert from 'node:assert/strict'
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { packedTarball, runProgram, scratchProject } from './support/packed-package.ts'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const FRAMEWORKS = ['node', 'vitest', 'jest'] as const

/** A CRM-style upstream: GET /customers/:id → {"active": true}, counting every connection and request. */
function startCountingCrm(): Promise<{ url: string; connections: () => number; requests: () => number; close: () => Promise<void> }> {
  let connections = 0
  let requests = 0
  const server = http.createServer((req, res) => {
    requests++
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id: req.url?.split('/').at(-1), active: true }))
  })
  server.on('connection', () => connections++)
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        connections: () => connections,
        requests: () => requests,
        close: () => {
          server.closeAllConnections()
          return new Promise<void>((r) => server.close(() => r()))
        },
      }),
    ),
  )
}

const JS_RUNNER = `// The CRM app as plain JavaScript.
export async function decideCustomer42() {
  const res = await fetch(\`\${process.env.CRM_URL}/customers/42\`)
  const customer = await res.json()
  return customer.active === true ? 'approved' : 'rejected'
}
`

const EMIT_ALL = `// Emits one case per framework and flavour through the installed package's library.
import { emitCase } from 'tool-replay/cases'
import { openStore } from 'tool-replay/store'
const store = await openStore('.tool-replay/store')
const trace = await store.readTrace('crm-inactive')
await store.close()
for (const framework of ${JSON.stringify(FRAMEWORKS)}) {
  const out = 'cases/' + framework
  const common = { trace, out, framework }
  await emitCase({ ...common, name: framework + '-ts-runner', runner: { module: 'app/app.ts', export: 'decideCustomer42' }, expect: { json: 'rejected' } })
  await emitCase({ ...common, name: framework + '-js-runner', runner: { module: 'app/app.mjs', export: 'decideCustomer42' }, expect: { json: 'rejected' } })
  await emitCase({ ...common, name: framework + '-command', command: { argv: ['node', 'app/decide.ts', '42'] }, expect: { exitCode: 0, stdout: 'rejected\\n' } })
  // The expectation is wrong on purpose: the generated test must fail, with the regression named.
  await emitCase({ ...common, name: framework + '-wrong', runner: { module: 'app/app.mjs', export: 'decideCustomer42' }, expect: { json: 'approved' }, verify: false })
}
console.log('emitted')
`

const JEST_INSTALL_PROBE = `// A plain install() in jest's environment must refuse: its fetch would never see the dispatcher.
import { install } from 'tool-replay/interceptor'
import { createMemoryStore } from 'tool-replay/store'
test('install() refuses where it cannot capture fetch', async () => {
  await expect(install({ mode: 'replay', trace: 'x', store: createMemoryStore() })).rejects.toMatchObject({
    code: 'TR_CAPTURE_UNAVAILABLE',
    message: expect.stringMatching(/another JavaScript realm/),
  })
})
`

const VITEST_APP_TEST = `import { expect, test } from 'vitest'
test('the app asks the CRM', async () => {
  const res = await fetch(process.env.CRM_URL + '/customers/7')
  expect((await res.json()).active).toBe(true)
})
`

let dir: string
let crm: Awaited<ReturnType<typeof startCountingCrm>>
let missing: string[] = []

before(async () => {
  crm = await startCountingCrm()
  dir = mkdtempSync(join(tmpdir(), 'tr-promoted-'))
  missing = await scratchProject(dir, await packedTarball(), ['vitest', 'jest'])
  mkdirSync(join(dir, 'app'))
  cpSync(join(ROOT, 'examples/crm/app.ts'), join(dir, 'app/app.ts'))
  cpSync(join(ROOT, 'examples/crm/decide.ts'), join(dir, 'app/decide.ts'))
  writeFileSync(join(dir, 'app/app.mjs'), JS_RUNNER)
  writeFileSync(join(dir, 'emit-all.mjs'), EMIT_ALL)
  mkdirSync(join(dir, 'jest-probe'))
  writeFileSync(join(dir, 'jest-probe/install.test.mjs'), JEST_INSTALL_PROBE)
  mkdirSync(join(dir, 'api'))
  writeFileSync(join(dir, 'api/orders.test.mjs'), VITEST_APP_TEST)
  writeFileSync(join(dir, 'vitest.cases.config.mjs'), `export default { test: { include: ['cases/vitest/**/*.test.mjs'] } }\n`)
  writeFileSync(join(dir, 'vitest.setup.config.mjs'), `export default { test: { include: ['api/*.test.mjs'], setupFiles: ['tool-replay/vitest'] } }\n`)
})
after(async () => {
  await crm?.close()
  if (dir) rmSync(dir, { recursive: true, force: true })
})

function env(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  // This file runs under node --test: drop the marker that would make child runners report to us.
  const { NODE_TEST_CONTEXT: _, NODE_OPTIONS: __, TOOL_REPLAY_MODE: ___, TOOL_REPLAY_TRACE: ____, TOOL_REPLAY_STORE: _____, ...rest } = process.env
  return { ...rest, CRM_URL: crm.url, NO_COLOR: '1', CI: 'true', ...extra }
}

/** Runs and never rejects on a non-zero exit: the caller asserts on the code and output. */
function run(args: string[], extra: Record<string, string> = {}): Promise<{ code: number; out: string }> {
  return runProgram(process.execPath, args, { cwd: dir, env: env(extra) })
}

const offline = (before: { connections: number; requests: number }, what: string) => {
  assert.equal(crm.requests(), before.requests, `${what}: the CRM saw requests`)
  assert.equal(crm.connections(), before.connections, `${what}: the CRM saw connections`)
}

test('promoted tests run offline under node --test, vitest and jest, from the installed package', async (t) => {
  const cli = (...args: string[]) => run([join(dir, 'node_modules/tool-replay/bin/tr-proxy.js'), ...args])

  await t.test('record once through the installed CLI, fork, emit every flavour', async () => {
    const rec = await cli('record', '--trace', 'crm', '--', process.execPath, 'app/decide.ts', '42')
    assert.equal(rec.code, 0, rec.out)
    assert.match(rec.out, /^approved$/m)
    assert.equal(crm.requests(), 1)
    const fork = await cli('fork', 'crm', '--to', 'crm-inactive', '--patch', '#0 $.active=false')
    assert.equal(fork.code, 0, fork.out)
    const emitted = await run(['emit-all.mjs'])
    assert.equal(emitted.code, 0, emitted.out)
    assert.equal(crm.requests(), 1, 'verifying the emitted cases reached no CRM')
  })

  const seen = () => ({ connections: crm.connections(), requests: crm.requests() })

  await t.test('node --test', async () => {
    const before = seen()
    const r = await run(['--test', '--test-reporter=tap', 'cases/node/**/*.test.mjs'])
    offline(before, 'node --test')
    assert.equal(r.code, 1, r.out)
    for (const name of ['node-ts-runner', 'node-js-runner', 'node-command']) assert.match(r.out, new RegExp(`^ok \\d+ - tool-replay case ${name}$`, 'm'), r.out)
    assert.match(r.out, /^not ok \d+ - tool-replay case node-wrong$/m)
    assert.match(r.out, /TR_CASE_REGRESSION/)
  })

  await t.test('vitest', { skip: missing.includes('vitest') && 'vitest is not installed' }, async () => {
    const before = seen()
    const r = await run(['node_modules/vitest/vitest.mjs', 'run', '--config', 'vitest.cases.config.mjs', '--reporter=json', '--outputFile=vitest-cases.json'])
    offline(before, 'vitest')
    assert.equal(r.code, 1, r.out)
    const results = statuses(JSON.parse(readFileSync(join(dir, 'vitest-cases.json'), 'utf8')))
    assert.deepEqual(results.passed.sort(), ['vitest-command', 'vitest-js-runner', 'vitest-ts-runner'].map(caseTest))
    assert.deepEqual(results.failed, [caseTest('vitest-wrong')])
    assert.match(results.messages, /TR_CASE_REGRESSION|behavioural regression/)
  })

  await t.test('jest (ESM mode)', { skip: missing.includes('jest') && 'jest is not installed' }, async () => {
    const before = seen()
    const r = await run(
      [
        'node_modules/jest/bin/jest.js',
        '--ci',
        '--no-watchman',
        '--json',
        '--outputFile=jest-cases.json',
        '--testMatch',
        '<rootDir>/cases/jest/**/*.test.mjs',
        '<rootDir>/jest-probe/*.test.mjs',
      ],
      { NODE_OPTIONS: '--experimental-vm-modules' },
    )
    offline(before, 'jest')
    assert.equal(r.code, 1, r.out)
    const results = statuses(JSON.parse(readFileSync(join(dir, 'jest-cases.json'), 'utf8')))
    assert.deepEqual(
      results.passed.sort(),
      ['install() refuses where it cannot capture fetch', ...['jest-command', 'jest-js-runner', 'jest-ts-runner'].map(caseTest)].sort(),
    )
    assert.deepEqual(results.failed, [caseTest('jest-wrong')])
    assert.match(results.messages, /TR_CASE_REGRESSION|behavioural regression/)
  })

  await t.test(
    "vitest setupFiles: ['tool-replay/vitest'] from the installed package",
    { skip: missing.includes('vitest') && 'vitest is not installed' },
    async () => {
      const vitest = (extra: Record<string, string>) => run(['node_modules/vitest/vitest.mjs', 'run', '--config', 'vitest.setup.config.mjs'], extra)
      const before = seen()
      const recorded = await vitest({ TOOL_REPLAY_MODE: 'record' })
      assert.equal(recorded.code, 0, recorded.out)
      assert.equal(crm.requests(), before.requests + 1, 'recording went live once')
      const afterRecording = seen()
      const replayed = await vitest({})
      assert.equal(replayed.code, 0, replayed.out)
      offline(afterRecording, 'vitest setup replay')
    },
  )
})

const caseTest = (name: string) => `tool-replay case ${name}`

/** Passed and failed test names, and every failure message, from a jest or vitest JSON report. */
function statuses(report: {
  testResults: Array<{ assertionResults: Array<{ fullName?: string; title: string; status: string; failureMessages?: string[] }> }>
}) {
  const all = report.testResults.flatMap((f) => f.assertionResults)
  return {
    passed: all.filter((a) => a.status === 'passed').map((a) => a.title),
    failed: all.filter((a) => a.status === 'failed').map((a) => a.title),
    messages: all.flatMap((a) => a.failureMessages ?? []).join('\n'),
  }
}
