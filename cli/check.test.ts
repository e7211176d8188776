import assert from 'node:assert/strict'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { type ExchangeSpec, traceOf } from '../faults/fixtures/trace-builder.ts'
import { openStore, writeTraceFile } from '../store/index.ts'
import { ErrorCodes } from '../trace/index.ts'
import { EXIT_CODES } from './exit-codes.ts'
import { runCli } from './main.ts'

const VIOLATED = EXIT_CODES[ErrorCodes.CONTRACT_VIOLATED]

function capture() {
  const out: string[] = []
  const err: string[] = []
  return { io: { out: (t: string) => out.push(t), err: (t: string) => err.push(t) }, out, err }
}

const CONTRACTS = `
seed: 42
rules:
  - id: lost-ack
    target: { method: POST, url: /shipments }
    fault: response_lost
    calls: [1]
effects:
  - { target: { method: POST, url: /shipments }, id: $.shipment.id, name: shipment }
contracts: [no-duplicate-effects, { bounded-retries: 2 }, all-rules-fired]
`

const post = (id: string, extra: Partial<ExchangeSpec> = {}): ExchangeSpec => ({
  method: 'POST',
  url: 'http://shipping.test/shipments',
  requestBody: '{"orderId":"o-1"}',
  status: 201,
  body: `{"shipment":{"id":"${id}"}}`,
  ...extra,
})
const lost = post('s-1', {
  status: undefined,
  error: 'ECONNRESET',
  fault: { rule: 'lost-ack', kind: 'response_lost', phase: 'after-response', upstreamStatus: 201, upstreamBody: '{"shipment":{"id":"s-1"}}' },
})

describe('tr-proxy check', () => {
  let dir: string
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tr-check-'))
    await writeFile(join(dir, 'faults.yaml'), CONTRACTS)
    await writeTraceFile(join(dir, 'unchecked.trace.json'), traceOf('unchecked', [lost, post('s-2')]))
    await writeTraceFile(join(dir, 'idempotent.trace.json'), traceOf('idempotent', [lost, post('s-1', { status: 200 })]))
  })
  after(() => rm(dir, { recursive: true, force: true }))

  test('a broken trace exits with the code of TR_CONTRACT_VIOLATED (75) and the violation naming the exchanges; the corrected one exits 0', async () => {
    const broken = capture()
    assert.equal(await runCli(['check', join(dir, 'unchecked.trace.json'), '--contracts', join(dir, 'faults.yaml')], broken.io), VIOLATED)
    const text = broken.out.join('\n')
    assert.match(text, /^FAIL {2}no-duplicate-effects {2}#0 POST \/shipments and #1 POST \/shipments committed shipment s-1 and s-2 for one call/m)
    assert.match(text, /^PASS {2}bounded-retries 2 /m)
    assert.match(text, /^faults seed 42 \(recorded in the trace\)$/m)
    assert.match(text, /1 of 3 contract\(s\) failed\.$/)
    const fixed = capture()
    assert.equal(await runCli(['check', join(dir, 'idempotent.trace.json'), '--contracts', join(dir, 'faults.yaml')], fixed.io), 0)
    assert.match(fixed.out.join('\n'), /All 3 contract\(s\) hold\.$/)
  })

  test('--json gives the whole report and the exit code; a trace in the store works too', async () => {
    const store = join(dir, 'store')
    const s = await openStore(store)
    await s.putTrace(traceOf('unchecked', [lost, post('s-2')]))
    await s.close()
    const c = capture()
    assert.equal(await runCli(['check', 'unchecked', '--contracts', join(dir, 'faults.yaml'), '--store', store, '--json'], c.io), VIOLATED)
    const report = JSON.parse(c.out.join(''))
    assert.equal(report.ok, false)
    assert.equal(report.exitCode, VIOLATED)
    assert.deepEqual(report.results[0].violations[0].exchanges, [0, 1])
    assert.deepEqual(
      report.effects.map((e: { id: string; seenByApp: boolean }) => [e.id, e.seenByApp]),
      [
        ['s-1', false],
        ['s-2', true],
      ],
    )
    const show = capture()
    assert.equal(await runCli(['show', 'unchecked', '--store', store], show.io), 0)
    assert.match(
      show.out.join('\n'),
      /^#0 POST http:\/\/shipping\.test\/shipments → ECONNRESET during response-headers \[fault response_lost, rule lost-ack; upstream 201\]$/m,
    )
  })

  test('without contracts, or with a bad contracts file, nothing is checked and the exit code says why', async () => {
    const none = capture()
    const saved = process.env.TOOL_REPLAY_FAULTS
    delete process.env.TOOL_REPLAY_FAULTS
    try {
      assert.equal(await runCli(['check', join(dir, 'unchecked.trace.json')], none.io), EXIT_CODES[ErrorCodes.INVALID_OPTION])
    } finally {
      if (saved !== undefined) process.env.TOOL_REPLAY_FAULTS = saved
    }
    assert.match(none.err.join('\n'), /TR_INVALID_OPTION: tr-proxy check needs contracts: pass --contracts FILE/)
    await writeFile(join(dir, 'bad.yaml'), 'rules: []\ncontracts: [be-nice]\n')
    const bad = capture()
    assert.equal(
      await runCli(['check', join(dir, 'unchecked.trace.json'), '--contracts', join(dir, 'bad.yaml')], bad.io),
      EXIT_CODES[ErrorCodes.INVALID_FAULTS],
    )
    assert.match(bad.err.join('\n'), /TR_INVALID_FAULTS: Faults .*bad\.yaml are invalid: contracts\[0\] is "be-nice"/)
  })
})
