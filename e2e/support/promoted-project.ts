/**
 * A scratch project for promoted-test e2e files: the packed package installed (see packed-package.ts), the
 * CRM app (TypeScript from examples/crm, plus a JavaScript copy), a CRM-style upstream that counts every
 * connection and request, and the story up to the cases: record once through the installed CLI, fork with
 * `$.active=false`, emit one case per framework and flavour through the installed library.
 */
import assert from 'node:assert/strict'
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { packedTarball, runProgram, scratchProject } from './packed-package.ts'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))

/** A CRM-style upstream: GET /customers/:id → {"active": true}, counting every connection and request. */
export interface CountingCrm {
  url: string
  connections(): number
  requests(): number
  close(): Promise<void>
}

function startCountingCrm(): Promise<CountingCrm> {
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

const emitAll = (frameworks: string[]) => `// Emits one case per framework and flavour through the installed package's library.
import { emitCase } from 'tool-replay/cases'
import { openStore } from 'tool-replay/store'
const store = await openStore('.tool-replay/store')
const trace = await store.readTrace('crm-inactive')
await store.close()
for (const framework of ${JSON.stringify(frameworks)}) {
  const out = 'cases/' + framework
  const common = { trace, out, framework }
  await emitCase({ ...common, name: framework + '-ts-runner', runner: { module: 'app/app.ts', export: 'decideCustomer42' }, expect: { json: 'rejected' } })
  await emitCase({ ...common, name: framework + '-js-runner', runner: { module: 'app/app.mjs', export: 'decideCustomer42' }, expect: { json: 'rejected' } })
  await emitCase({ ...common, name: framework + '-command', command: { argv: ['node', 'app/decide.ts', '42'] }, expect: { exitCode: 0, stdout: 'rejected\\n' } })
  // The expectation is wrong on purpose: the generated test must fail, with the regression named.
  await emitCase({ ...common, name: framework + '-wrong', runner: { module: 'app/app.mjs', export: 'decideCustomer42' }, expect: { json: 'approved' }, verify: false })
}
`

/** A prepared scratch project. */
export interface PromotedProject {
  dir: string
  crm: CountingCrm
  /** Frameworks (of those asked for) that are not installed in this checkout. */
  missing: string[]
  /** Runs `node ARGS` in the project with CRM_URL set; never rejects on a non-zero exit. */
  run(args: string[], extra?: Record<string, string>): Promise<{ code: number; out: string }>
  /** The CRM's counters now. */
  seen(): { connections: number; requests: number }
  /** Asserts the CRM saw no connection and no request since `before`. */
  offline(before: { connections: number; requests: number }, what: string): void
  close(): Promise<void>
}

/** Builds the scratch project and runs the story up to emitted cases for `frameworks`. */
export async function promotedProject(frameworks: Array<'node' | 'vitest' | 'jest'>, files: Record<string, string> = {}): Promise<PromotedProject> {
  const crm = await startCountingCrm()
  const dir = mkdtempSync(join(tmpdir(), 'tr-promoted-'))
  const missing = await scratchProject(
    dir,
    await packedTarball(),
    frameworks.filter((f) => f !== 'node'),
  )
  mkdirSync(join(dir, 'app'))
  cpSync(join(ROOT, 'examples/crm/app.ts'), join(dir, 'app/app.ts'))
  cpSync(join(ROOT, 'examples/crm/decide.ts'), join(dir, 'app/decide.ts'))
  writeFileSync(join(dir, 'app/app.mjs'), JS_RUNNER)
  writeFileSync(join(dir, 'emit-all.mjs'), emitAll(frameworks))
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(join(dir, name, '..'), { recursive: true })
    writeFileSync(join(dir, name), text)
  }
  const env = (extra: Record<string, string>): NodeJS.ProcessEnv => {
    // These files run under node --test: drop the marker that would make child runners report to us.
    const { NODE_TEST_CONTEXT: _, NODE_OPTIONS: __, TOOL_REPLAY_MODE: ___, TOOL_REPLAY_TRACE: ____, TOOL_REPLAY_STORE: _____, ...rest } = process.env
    return { ...rest, CRM_URL: crm.url, NO_COLOR: '1', CI: 'true', ...extra }
  }
  const run = (args: string[], extra: Record<string, string> = {}) => runProgram(process.execPath, args, { cwd: dir, env: env(extra) })
  const seen = () => ({ connections: crm.connections(), requests: crm.requests() })
  const project: PromotedProject = {
    dir,
    crm,
    missing,
    run,
    seen,
    offline(before, what) {
      assert.equal(crm.requests(), before.requests, `${what}: the CRM saw requests`)
      assert.equal(crm.connections(), before.connections, `${what}: the CRM saw connections`)
    },
    async close() {
      await crm.close()
      rmSync(dir, { recursive: true, force: true })
    },
  }
  const cli = (...args: string[]) => run([join(dir, 'node_modules/tool-replay/bin/tr-proxy.js'), ...args])
  const rec = await cli('record', '--trace', 'crm', '--', process.execPath, 'app/decide.ts', '42')
  assert.equal(rec.code, 0, rec.out)
  assert.match(rec.out, /^approved$/m)
  assert.equal(crm.requests(), 1, 'the recording reached the CRM once')
  const fork = await cli('fork', 'crm', '--to', 'crm-inactive', '--patch', '#0 $.active=false')
  assert.equal(fork.code, 0, fork.out)
  const emitted = await run(['emit-all.mjs'])
  assert.equal(emitted.code, 0, emitted.out)
  assert.equal(crm.requests(), 1, 'verifying the emitted cases reached no CRM')
  return project
}

/** The test name a generated case test has. */
export const caseTest = (name: string) => `tool-replay case ${name}`

/** Passed and failed test names, and every failure message, from a jest or vitest JSON report. */
export function statuses(report: { testResults: Array<{ assertionResults: Array<{ title: string; status: string; failureMessages?: string[] }> }> }) {
  const all = report.testResults.flatMap((f) => f.assertionResults)
  return {
    passed: all.filter((a) => a.status === 'passed').map((a) => a.title),
    failed: all.filter((a) => a.status === 'failed').map((a) => a.title),
    messages: all.flatMap((a) => a.failureMessages ?? []).join('\n'),
  }
}
