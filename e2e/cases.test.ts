/**
 * Regression cases: emit (staged, verified, published atomically) and verify's distinct failures:
 * integrity (71) before anything runs, replay contract (69), application error (73), regression (72).
 */
import assert from 'node:assert/strict'
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { runInNewContext } from 'node:vm'
import { bodyFromBytes, ToolReplayError, type Trace } from 'tool-replay/trace'
import { emitCase, verifyCase } from '../cases/index.ts'
import { runCli } from '../cli/main.ts'

let dir: string
const CRM = 'https://crm.test/customers/42'

function crmTrace(name: string): Trace {
  const body = bodyFromBytes(new TextEncoder().encode('{"active":false}'))
  return {
    meta: { name, format: 1 },
    exchanges: [
      {
        seq: 0,
        request: { method: 'GET', url: CRM, headers: [], body: null },
        outcome: {
          kind: 'response',
          response: { status: 200, statusText: 'OK', headers: [['content-type', 'application/json']], body: body.ref, trailers: [] },
        },
        timing: { startMs: 0, headersMs: 1 },
      },
    ],
    bodies: new Map([[body.ref.digest, body.bytes]]),
  }
}

const RUNNERS = `
const decide = async () => ((await (await fetch('${CRM}')).json()).active === true ? 'approved' : 'rejected')
export const ok = decide
export async function none() { return 'rejected' }
export async function extra() { await decide(); await fetch('https://crm.test/customers/43'); return 'rejected' }
export async function boom() { await decide(); throw new Error('boom: the app fell over') }
export async function object() { return { decision: await decide(), score: 1 } }
`

before(() => {
  dir = mkdtempSync(join(tmpdir(), 'tr-cases-'))
  mkdirSync(join(dir, 'app'))
  writeFileSync(join(dir, 'app/runners.mjs'), RUNNERS)
})
after(() => rmSync(dir, { recursive: true, force: true }))

let n = 0
async function emit(exportName: string, expect: unknown, verify = false): Promise<string> {
  const name = `case-${++n}`
  const out = await emitCase({
    trace: crmTrace('branch'),
    out: join(dir, 'cases'),
    name,
    runner: { module: join(dir, 'app/runners.mjs'), export: exportName },
    expect: { json: expect },
    verify,
  })
  return out.dir
}

const rejectsWith = (p: Promise<unknown>, code: string, re: RegExp) =>
  assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof ToolReplayError, String(err))
    assert.equal(err.code, code, err.message)
    assert.match(err.message, re)
    return true
  })

async function verifyExit(caseDir: string): Promise<{ code: number; err: string }> {
  const err: string[] = []
  const code = await runCli(['verify', caseDir], { out: () => {}, err: (t) => err.push(t) })
  return { code, err: err.join('\n') }
}

test('a passing case: emitted verified, deterministic bytes, verify is read-only', async () => {
  const a = await emit('ok', 'rejected', true)
  const b = await emitCase({
    trace: crmTrace('other-name'),
    out: join(dir, 'again'),
    name: 'case-1',
    runner: { module: join(dir, 'app/runners.mjs'), export: 'ok' },
    expect: { json: 'rejected' },
  })
  for (const f of readdirSync(a)) assert.equal(readFileSync(join(b.dir, f), 'utf8'), readFileSync(join(a, f), 'utf8'), f)
  assert.equal((await verifyCase(a)).actual, 'rejected')
  assert.equal((await verifyExit(a)).code, 0)
})

test('emit refuses a case that does not verify, and leaves nothing behind', async () => {
  const out = join(dir, 'refused')
  await rejectsWith(
    emitCase({ trace: crmTrace('b'), out, name: 'wrong', runner: { module: join(dir, 'app/runners.mjs'), export: 'ok' }, expect: { json: 'approved' } }),
    'TR_CASE_REGRESSION',
    /Expected "approved", got "rejected"/,
  )
  assert.deepEqual(readdirSync(out), [])
})

test('emit refuses a trace holding requests strict replay never answered (a record-as miss)', async () => {
  const observed = crmTrace('observed')
  const first = observed.exchanges[0] as Trace['exchanges'][number]
  observed.exchanges.push({
    ...first,
    seq: 1,
    request: { ...first.request, url: 'https://crm.test/customers/43' },
    outcome: { kind: 'error', error: { code: 'TR_REPLAY_MISS', message: 'no recorded exchange matches', phase: 'connect' } },
  })
  const out = join(dir, 'refused-miss')
  await rejectsWith(
    emitCase({ trace: observed, out, name: 'miss', runner: { module: join(dir, 'app/runners.mjs'), export: 'extra' }, expect: { json: 'rejected' } }),
    'TR_INVALID_OPTION',
    /1 exchange\(s\) were never answered \(#1 GET https:\/\/crm\.test\/customers\/43: TR_REPLAY_MISS\)/,
  )
  assert.equal(existsSync(out), false)
})

test('regression: expected vs actual with JSON-path differences (exit 72)', async () => {
  const c = await emit('object', { decision: 'approved', score: 1 })
  await rejectsWith(verifyCase(c), 'TR_CASE_REGRESSION', /\$\.decision: "approved" → "rejected"/)
  assert.equal((await verifyExit(c)).code, 72)
})

test('replay contract: an unused or an unrecorded exchange (exit 69)', async () => {
  const unused = await emit('none', 'rejected')
  await rejectsWith(verifyCase(unused), 'TR_REPLAY_INCOMPLETE', /1 unused/)
  assert.equal((await verifyExit(unused)).code, 69)
  const extra = await emit('extra', 'rejected')
  await rejectsWith(verifyCase(extra), 'TR_REPLAY_INCOMPLETE', /GET https:\/\/crm\.test\/customers\/43/)
})

test('application error under a complete replay (exit 73)', async () => {
  const c = await emit('boom', 'rejected')
  await rejectsWith(verifyCase(c), 'TR_CASE_APP_ERROR', /boom: the app fell over/)
  assert.equal((await verifyExit(c)).code, 73)
})

test('integrity is checked before anything runs (exit 71)', async () => {
  const tamper = async (fn: (caseDir: string, manifest: { trace: { file: string }; test: { file: string } }) => void, re: RegExp) => {
    const c = await emit('boom', 'rejected') // would be TR_CASE_APP_ERROR if it ran
    fn(c, JSON.parse(readFileSync(join(c, 'manifest.json'), 'utf8')))
    await rejectsWith(verifyCase(c), 'TR_CASE_INTEGRITY', re)
    assert.equal((await verifyExit(c)).code, 71)
  }
  await tamper((c, m) => appendFileSync(join(c, m.trace.file), ' '), /trace file is \d+ bytes/)
  await tamper((c, m) => {
    const p = join(c, m.trace.file)
    writeFileSync(p, readFileSync(p, 'utf8').replace('false', 'true '))
  }, /SHA-256/)
  await tamper((c) => writeFileSync(join(c, 'extra.js'), ''), /files the manifest does not list \(extra\.js\)/)
  await tamper((c, m) => appendFileSync(join(c, m.test.file), '\n'), /test file .* was changed/)
  await tamper((c, m) => {
    const p = join(c, m.test.file)
    const text = readFileSync(p)
    rmSync(p)
    writeFileSync(join(c, '..', 'elsewhere.mjs'), text)
    symlinkSync(join(c, '..', 'elsewhere.mjs'), p)
  }, /is a symbolic link/)
  await tamper((c) => {
    const p = join(c, 'manifest.json')
    writeFileSync(p, JSON.stringify(JSON.parse(readFileSync(p, 'utf8'))))
  }, /canonical form/)
  await tamper((c) => {
    const p = join(c, 'manifest.json')
    writeFileSync(p, readFileSync(p, 'utf8').replace(/"module": "[^"]+"/, `"module": "${join(dir, 'app/runners.mjs')}"`))
  }, /run\.module must be a relative path/)
  await tamper((c) => {
    const p = join(c, 'manifest.json')
    writeFileSync(p, readFileSync(p, 'utf8').replace('"version": 1', '"version": 1,\n  "extra": true'))
  }, /extra is not a known field/)
})

test("where this realm's fetch cannot be captured (jest), verifyCase runs the runner in a child Node process", async (t) => {
  const ok = await emit('ok', 'rejected')
  const regression = await emit('object', { decision: 'approved', score: 1 })
  const boom = await emit('boom', 'rejected')
  const unused = await emit('none', 'rejected')
  const realFetch = globalThis.fetch
  // A fetch made in another realm, as jest's environments have: were the runner imported here, its requests
  // would bypass the interceptor and this stand-in would be called.
  let calledHere = 0
  const foreign = runInNewContext('(function fetch() { count(); return Promise.reject(new Error("live")) })', { count: () => calledHere++ })
  globalThis.fetch = foreign as typeof fetch
  t.after(() => {
    globalThis.fetch = realFetch
  })
  assert.equal((await verifyCase(ok)).actual, 'rejected')
  await rejectsWith(verifyCase(regression), 'TR_CASE_REGRESSION', /\$\.decision: "approved" → "rejected"/)
  await rejectsWith(verifyCase(boom), 'TR_CASE_APP_ERROR', /Error: boom: the app fell over/)
  await rejectsWith(verifyCase(unused), 'TR_REPLAY_INCOMPLETE', /1 unused/)
  assert.equal(calledHere, 0, 'no runner ran in this realm')
})
