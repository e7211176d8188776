/**
 * Promoted tests are offline under node --test and jest. A scratch project installs the packed package (npm
 * pack of a build), records the CRM story against a CRM-style upstream that counts connections and requests,
 * forks it, and emits cases (a TypeScript runner module, a JavaScript one, a command case, and one whose
 * expectation is wrong so the run must fail). Each framework runs its generated tests with the upstream
 * still up and counting: the count must not move. jest runs in its ESM mode (NODE_OPTIONS=
 * --experimental-vm-modules); its test environment gets a fetch from another realm, so verifyCase runs the
 * runner in a child Node process, and a plain `install()` there refuses instead of going live.
 * vitest: promoted-vitest.test.ts.
 */
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { caseTest, type PromotedProject, promotedProject, statuses } from './support/promoted-project.ts'

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

let p: PromotedProject

// A build (cached by content), a pack, an npm install, a recording and eight emitted cases.
before(async () => {
  p = await promotedProject(['node', 'jest'], { 'jest-probe/install.test.mjs': JEST_INSTALL_PROBE })
})
after(() => p?.close())

test('node --test runs the generated tests offline', async () => {
  const before = p.seen()
  const r = await p.run(['--test', '--test-reporter=tap', 'cases/node/**/*.test.mjs'])
  p.offline(before, 'node --test')
  assert.equal(r.code, 1, r.out)
  for (const name of ['node-ts-runner', 'node-js-runner', 'node-command']) assert.match(r.out, new RegExp(`^ok \\d+ - ${caseTest(name)}$`, 'm'), r.out)
  assert.match(r.out, /^not ok \d+ - tool-replay case node-wrong$/m)
  assert.match(r.out, /TR_CASE_REGRESSION/)
})

test('jest (ESM mode) runs the generated tests offline, and install() there refuses', async (t) => {
  if (p.missing.includes('jest')) return t.skip('jest is not installed')
  const before = p.seen()
  const r = await p.run(
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
  p.offline(before, 'jest')
  assert.equal(r.code, 1, r.out)
  const results = statuses(JSON.parse(readFileSync(join(p.dir, 'jest-cases.json'), 'utf8')))
  assert.deepEqual(
    results.passed.sort(),
    ['install() refuses where it cannot capture fetch', ...['jest-command', 'jest-js-runner', 'jest-ts-runner'].map(caseTest)].sort(),
  )
  assert.deepEqual(results.failed, [caseTest('jest-wrong')])
  assert.match(results.messages, /TR_CASE_REGRESSION|behavioural regression/)
})
