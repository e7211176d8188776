/**
 * The fault lab end to end: a real shipping API on loopback, the bundled agent on undici's real fetch, the
 * engine's seeded decisions carried out by the interceptor (install() with faults, on the lab's clock),
 * the trace checked by the contracts. The
 * trace's commit evidence is compared with the API's own ledger, so "2 shipments" is what the API committed.
 */
import assert from 'node:assert/strict'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { runCli } from 'tool-replay/cli'
import { parseFaults } from 'tool-replay/faults'
import { install } from 'tool-replay/interceptor'
import { createMemoryStore, exportTrace } from 'tool-replay/store'
import { fetch } from 'undici'
// The lab is private to the CLI (`tr-proxy demo`), not a package subpath: imported from the checkout.
import { type LabRun, runLab, SCENARIO_NAMES, shipOrder, startShippingApi, VirtualClock } from '../lab/index.ts'

/** Each scenario's verdicts for no retries, unchecked retries, idempotent retries. */
const EXPECTED: Record<string, Array<[string, number, number, RegExp]>> = {
  lost_ack: [
    ['FAIL', 2, 1, /^no confirmation$/],
    ['FAIL', 3, 2, /^duplicate effect$/],
    ['PASS', 3, 1, /^idempotent recovery$/],
  ],
  rate_limit: [
    ['FAIL', 2, 0, /^no confirmation$/],
    ['FAIL', 4, 0, /^retried before Retry-After$/],
    ['PASS', 3, 1, /^honoured Retry-After$/],
  ],
  schema_drift: [
    ['FAIL', 2, 1, /^accepted a drifted answer \(confirmed shipment undefined\)$/],
    ['FAIL', 2, 1, /^accepted a drifted answer/],
    ['PASS', 3, 1, /^rejected the drifted answer, recovered$/],
  ],
  timeout: [
    ['FAIL', 2, 0, /^no confirmation$/],
    ['PASS', 3, 1, /^timed out, recovered in 1\.1 s$/],
    ['PASS', 3, 1, /^timed out, recovered in 6\.0 s$/],
  ],
  latency: [
    ['PASS', 2, 1, /^waited out \d\.\d s of latency$/],
    ['FAIL', 3, 2, /^duplicate effect$/],
    ['PASS', 2, 1, /^waited out \d\.\d s of latency$/],
  ],
  blackout: [
    ['FAIL', 1, 0, /^no confirmation$/],
    ['FAIL', 3, 0, /^no confirmation$/],
    ['PASS', 4, 1, /^rode out the outage, done at 3\.0 s$/],
  ],
  stream_cut: [
    ['FAIL', 2, 1, /^accepted a truncated stream \(chose r-ground from 1 of 3 rates\)$/],
    ['FAIL', 2, 1, /^accepted a truncated stream/],
    ['PASS', 3, 1, /^detected the truncated stream, recovered$/],
  ],
}

const runs = new Map<string, LabRun>()
const run = async (scenario: string) => {
  let r = runs.get(scenario)
  if (!r) {
    r = await runLab({ scenario })
    runs.set(scenario, r)
  }
  return r
}

describe('lab scenarios under three recovery policies', () => {
  for (const scenario of SCENARIO_NAMES) {
    test(`${scenario}: verdicts, and the trace's commit evidence equals what the API committed`, async () => {
      const r = await run(scenario)
      assert.equal(r.seed, '42')
      const expected = EXPECTED[scenario] ?? []
      assert.equal(r.runs.length, expected.length)
      r.runs.forEach((p, i) => {
        const [verdict, calls, shipments, summary] = expected[i] as [string, number, number, RegExp]
        assert.deepEqual([p.verdict, p.calls, p.shipments], [verdict, calls, shipments], `${scenario} / ${p.label}: ${p.summary}`)
        assert.match(p.summary, summary)
        assert.equal(p.committed.length, p.shipments, `${scenario} / ${p.label}: evidence ${p.shipments}, API ${p.committed.length}`)
        // The rule fired in every run: no run passes because its fault silently did nothing.
        assert.ok(
          p.report.coverage.every((c) => c.triggered > 0),
          `${scenario} / ${p.label}`,
        )
      })
    })
  }

  test('lost_ack: the trace keeps what the upstream did (201) next to what the app got (a reset)', async () => {
    const unchecked = (await run('lost_ack')).runs[1]
    const lost = unchecked?.trace.exchanges[1]
    assert.equal(lost?.outcome.kind === 'error' && lost.outcome.error.code, 'ECONNRESET')
    assert.deepEqual(
      [lost?.fault?.rule, lost?.fault?.kind, lost?.fault?.phase, lost?.fault?.seed, lost?.fault?.call],
      ['lost-ack', 'response_lost', 'after-response', '42', 1],
    )
    assert.equal(lost?.fault?.upstream?.kind === 'response' && lost.fault.upstream.response.status, 201)
    assert.deepEqual(unchecked?.committed, ['s-1', 's-2'])
    assert.match(unchecked?.report.results[0]?.summary ?? '', /^#1 POST \/shipments and #2 POST \/shipments committed shipment s-1 and s-2 for one call/)
  })

  test('faults that act before forwarding never reach the API; the retry-after wait is exact on the lab clock', async () => {
    const blackout = (await run('blackout')).runs
    assert.deepEqual(
      blackout.map((p) => p.apiRequests),
      [0, 0, 2],
    )
    const timeout = (await run('timeout')).runs
    assert.deepEqual(
      timeout.map((p) => p.apiRequests),
      [1, 2, 2],
    )
    const [, unchecked, idempotent] = (await run('rate_limit')).runs
    assert.deepEqual(
      idempotent?.trace.exchanges.map((x) => x.timing.startMs),
      [0, 0, 2000],
    )
    assert.match(
      unchecked?.report.results.find((c) => c.kind === 'honours-retry-after')?.summary ?? '',
      /#2 POST \/shipments was sent 100 ms after #1 POST \/shipments got 429 asking to wait 2 s \(retry-after-ms: 2000\)/,
    )
  })

  test('the same seed gives the same run; another seed changes the seeded latency', async () => {
    // Everything but the API's port, the Date header and the file digest (which covers both) is the same.
    const strip = (r: LabRun) =>
      r.runs.map((p) =>
        exportTrace(p.trace)
          .text.replace(/127\.0\.0\.1:\d+/g, 'api')
          .replace(/\["date", "[^"]*"\]/gi, '["date", "-"]')
          .replace(/^ {2}"digest": "[0-9a-f]+",$/m, ''),
      )
    const a = await runLab({ scenario: 'latency' })
    const b = await runLab({ scenario: 'latency' })
    assert.deepEqual(strip(b), strip(a))
    const c = await runLab({ scenario: 'latency', seed: '7' })
    assert.equal(c.seed, '7')
    assert.match(c.rerun, /--seed 7$/)
    const held = (r: LabRun) => r.runs[0]?.trace.exchanges[1]?.timing.headersMs
    assert.notEqual(held(c), held(a))
  })

  test('adding unrelated traffic leaves the target rule schedule unchanged', async () => {
    // A probabilistic lost-ack on POST /shipments, and an agent run with extra GET /rates calls in front.
    const config = parseFaults('rules:\n  - { id: flaky, target: { method: POST, url: /shipments }, fault: response_lost, probability: 0.5 }\n')
    const faultedCalls = async (extraRates: number) => {
      const api = await startShippingApi()
      const clock = new VirtualClock()
      const store = createMemoryStore()
      const tr = await install({ mode: 'record', trace: 't', store, global: false, faults: config, faultsSeed: '11', faultsClock: clock })
      const dispatcher = tr.dispatcher
      try {
        for (let i = 0; i < 6; i++) {
          for (let j = 0; j < extraRates; j++) await (await fetch(`${api.url}/rates`, { dispatcher })).text()
          await shipOrder({ baseUrl: api.url, orderId: `o-${i}`, policy: 'none', dispatcher, clock })
        }
      } finally {
        await tr.close()
        await api.close()
      }
      return (await store.readTrace('t')).exchanges.filter((x) => x.fault).map((x) => x.fault?.call)
    }
    const alone = await faultedCalls(0)
    assert.ok(alone.length > 0 && alone.length < 6, `${alone}`)
    assert.deepEqual(await faultedCalls(3), alone)
  })

  test('tr-proxy demo prints one line per policy and writes traces that tr-proxy check judges the same way', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'tr-lab-'))
    try {
      const out: string[] = []
      const io = { out: (t: string) => out.push(t), err: (t: string) => out.push(t) }
      assert.equal(await runCli(['demo', '--scenario', 'lost_ack', '--policy', 'all', '--out', dir], io), 0)
      assert.equal(
        out.join('\n'),
        [
          'lost_ack: the shipment is created, then its acknowledgement is lost',
          'faults seed 42 (from the faults file)',
          'FAIL  no retries          2 calls · 1 shipment  · no confirmation',
          'FAIL  unchecked retries   3 calls · 2 shipments · duplicate effect',
          'PASS  idempotent retries  3 calls · 1 shipment  · idempotent recovery',
          'rerun: tr-proxy demo --scenario lost_ack --policy all --seed 42',
        ].join('\n'),
      )
      const faults = join(dir, 'lost_ack.faults.yaml')
      assert.match(await readFile(faults, 'utf8'), /fault: response_lost/)
      const quiet = { out: () => {}, err: () => {} }
      assert.equal(await runCli(['check', join(dir, 'lost_ack-unchecked.trace.json'), '--contracts', faults], quiet), 75)
      assert.equal(await runCli(['check', join(dir, 'lost_ack-idempotent.trace.json'), '--contracts', faults], quiet), 0)
      const json: string[] = []
      assert.equal(
        await runCli(['demo', '--scenario', 'all', '--policy', 'idempotent', '--seed', '5', '--json'], { out: (t) => json.push(t), err: () => {} }),
        0,
      )
      const parsed = JSON.parse(json.join(''))
      assert.deepEqual(
        parsed.scenarios.map((s: { scenario: string }) => s.scenario),
        [...SCENARIO_NAMES],
      )
      assert.ok(
        parsed.scenarios.every(
          (s: { seed: string; policies: Array<{ verdict: string }> }) => s.seed === '5' && s.policies.length === 1 && s.policies[0]?.verdict === 'PASS',
        ),
      )
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })
})
