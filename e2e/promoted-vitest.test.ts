/**
 * Promoted tests are offline under vitest, from a scratch project that installs the packed package (see
 * promoted-tests.test.ts for the story); and `setupFiles: ['tool-replay/vitest']` works by its package name:
 * record once, then replay with the CRM-style upstream up and counting.
 */
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { caseTest, type PromotedProject, promotedProject, statuses } from './support/promoted-project.ts'

const APP_TEST = `import { expect, test } from 'vitest'
test('the app asks the CRM', async () => {
  const res = await fetch(process.env.CRM_URL + '/customers/7')
  expect((await res.json()).active).toBe(true)
})
`

let p: PromotedProject

before(async () => {
  p = await promotedProject(['vitest'], {
    'api/orders.test.mjs': APP_TEST,
    'vitest.cases.config.mjs': `export default { test: { include: ['cases/vitest/**/*.test.mjs'] } }\n`,
    'vitest.setup.config.mjs': `export default { test: { include: ['api/*.test.mjs'], setupFiles: ['tool-replay/vitest'] } }\n`,
  })
})
after(() => p?.close())

test('vitest runs the generated tests offline', async (t) => {
  if (p.missing.includes('vitest')) return t.skip('vitest is not installed')
  const before = p.seen()
  const r = await p.run(['node_modules/vitest/vitest.mjs', 'run', '--config', 'vitest.cases.config.mjs', '--reporter=json', '--outputFile=vitest-cases.json'])
  p.offline(before, 'vitest')
  assert.equal(r.code, 1, r.out)
  const results = statuses(JSON.parse(readFileSync(join(p.dir, 'vitest-cases.json'), 'utf8')))
  assert.deepEqual(results.passed.sort(), ['vitest-command', 'vitest-js-runner', 'vitest-ts-runner'].map(caseTest))
  assert.deepEqual(results.failed, [caseTest('vitest-wrong')])
  assert.match(results.messages, /TR_CASE_REGRESSION|behavioural regression/)
})

test("vitest setupFiles: ['tool-replay/vitest'] from the installed package records once, then replays offline", async (t) => {
  if (p.missing.includes('vitest')) return t.skip('vitest is not installed')
  const vitest = (extra: Record<string, string>) => p.run(['node_modules/vitest/vitest.mjs', 'run', '--config', 'vitest.setup.config.mjs'], extra)
  const before = p.seen()
  const recorded = await vitest({ TOOL_REPLAY_MODE: 'record' })
  assert.equal(recorded.code, 0, recorded.out)
  assert.equal(p.crm.requests(), before.requests + 1, 'recording went live once')
  const afterRecording = p.seen()
  const replayed = await vitest({})
  assert.equal(replayed.code, 0, replayed.out)
  p.offline(afterRecording, 'vitest setup replay')
})
