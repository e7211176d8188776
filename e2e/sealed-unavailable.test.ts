/**
 * Whether sealing works here, said before anything runs: `tr-proxy doctor` (each requirement, then a real set-up);
 * where sealing is impossible (a refused unshare, simulated with TOOL_REPLAY_SEAL_SIMULATE=refuse) the typed error,
 * never an unsealed run; an unsealed strict replay under CI=true recommends --sealed where sealing works.
 */
import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { before, describe, test } from 'node:test'
import { cannotSeal, cli, SEAL_UNAVAILABLE_EXIT, sealedWork } from './support/sealed-harness.ts'

let work: Awaited<ReturnType<typeof sealedWork>>
let skip: string | undefined

before(async () => {
  skip = await cannotSeal()
  work = await sealedWork('tr-sealed-unavailable-')
})

describe('where sealing is impossible: a typed error, never an unsealed run', { timeout: 120_000 }, () => {
  test(`a refused unshare (simulated by TOOL_REPLAY_SEAL_SIMULATE=refuse): TR_SEAL_UNAVAILABLE, exit ${SEAL_UNAVAILABLE_EXIT}, the command never ran`, async () => {
    const marker = join(work.work, 'ran-unsealed')
    const run = await cli(['record', '--store', work.store, '-t', 'refused', '--sealed', '--', 'sh', '-c', `touch ${marker}`], {
      TOOL_REPLAY_SEAL_SIMULATE: 'refuse',
    })
    assert.equal(run.code, SEAL_UNAVAILABLE_EXIT, run.stderr)
    assert.match(run.stderr, /error TR_SEAL_UNAVAILABLE: Failed to seal the command: /)
    assert.match(run.stderr, /Fix: /)
    assert.match(run.stderr, /never falls back to an unsealed one/)
    if (!cannotSeal)
      assert.match(run.stderr, /the kernel refused to create the run's namespaces \(unshare said: unshare: unshare failed: Operation not permitted/)
    assert.equal(existsSync(marker), false, 'the command ran unsealed')
    // Nothing was recorded: at most the marker every run that never started its command leaves (status partial).
    const ls = await cli(['ls', '--store', work.store, '--json'])
    const refused = (JSON.parse(ls.stdout) as { traces: Array<{ name: string; status: string; exchanges: number }> }).traces.find((x) => x.name === 'refused')
    assert.ok(refused === undefined || (refused.status === 'partial' && refused.exchanges === 0), JSON.stringify(refused))
  })
})

describe('an unsealed strict replay in CI recommends --sealed where sealing works', { timeout: 120_000 }, () => {
  test('CI=true: the summary ends with the hint; without CI, no hint', async (t) => {
    if (skip) return t.skip(skip)
    const rec = await cli(['record', '--store', work.store, '-t', 'hint', '--', 'true'])
    assert.equal(rec.code, 0, rec.stderr)
    const ci = await cli(['replay', '--store', work.store, '-t', 'hint', '--strict', '--', 'true'], { CI: 'true' })
    assert.equal(ci.code, 0, ci.stderr)
    const last = ci.stderr.trimEnd().split('\n').at(-1)
    assert.match(last ?? '', /^hint: this strict replay ran unsealed.*add --sealed \(tr-proxy replay --strict --sealed -- <command>\)\.$/)
    const local = await cli(['replay', '--store', work.store, '-t', 'hint', '--strict', '--', 'true'], { CI: '' })
    assert.doesNotMatch(local.stderr, /hint:/)
    const sealed = await cli(['replay', '--store', work.store, '-t', 'hint', '--strict', '--sealed', '--', 'true'], { CI: 'true' })
    assert.equal(sealed.code, 0, sealed.stderr)
    assert.doesNotMatch(sealed.stderr, /hint:/)
  })
})

describe('tr-proxy doctor', { timeout: 120_000 }, () => {
  test('says whether sealing works here, each requirement, and a real set-up; a refused unshare is a failure with its fix', async (t) => {
    if (skip) return t.skip(skip)
    const ok = await cli(['doctor', '--json'])
    assert.equal(ok.code, 0, ok.stderr)
    const report = JSON.parse(ok.stdout) as { ok: boolean; sealed: { checks: Array<{ name: string; ok: boolean }>; setupMs: number } }
    assert.equal(report.ok, true)
    assert.deepEqual(
      report.sealed.checks.map((c) => c.name),
      ['platform', 'unshare', 'mount', 'ip', 'nft', 'user namespaces', 'set-up'],
    )
    assert.ok(report.sealed.setupMs > 0)
    const refused = await cli(['doctor'], { TOOL_REPLAY_SEAL_SIMULATE: 'refuse' })
    assert.equal(refused.code, SEAL_UNAVAILABLE_EXIT, refused.stderr)
    assert.match(refused.stdout, /^Sealed runs \(--sealed\): do NOT work on this machine\.$/m)
    assert.match(refused.stdout, /FAIL {2}set-up +Failed to seal the command: the kernel refused/)
  })
})
