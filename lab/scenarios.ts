/**
 * The lab's scenarios: one fault each, as a faults file (YAML, written out verbatim by `--out`), the
 * recovery the passing policy shows, and how the lab words a wrong answer.
 */

/** One scenario of the lab. */
export interface Scenario {
  name: string
  /** One line: what goes wrong. */
  story: string
  /** The faults file: seed, rules, effects, contracts. */
  faults: string
  /** The summary of a passing policy, given its run. */
  pass: (run: { virtualMs: number; faultHeldMs: number }) => string
}

// Every scenario checks the same contracts on what the agent did.
const CHECKS = `effects:
  - { target: { method: POST, url: /shipments }, id: $.shipment.id, name: shipment }
contracts:
  - no-duplicate-effects
  - honours-retry-after
  - { bounded-retries: 3 }
  - all-rules-fired
`

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`

const scenario = (name: string, story: string, rules: string, pass: Scenario['pass']): Scenario => ({
  name,
  story,
  faults: `# Tool Replay lab scenario "${name}": ${story}\nseed: 42\nrules:\n${rules}${CHECKS}`,
  pass,
})

export const SCENARIOS: readonly Scenario[] = [
  scenario(
    'lost_ack',
    'the shipment is created, then its acknowledgement is lost',
    `  - id: lost-ack
    target: { method: POST, url: /shipments }
    fault: response_lost
    calls: [1]
`,
    () => 'idempotent recovery',
  ),
  scenario(
    'rate_limit',
    'a quota of 1 request per 2 s window answers 429 with Retry-After',
    `  - id: quota
    target: { url: "/**" }
    fault: rate_limit
    quota: { limit: 1, windowMs: 2000 }
`,
    () => 'honoured Retry-After',
  ),
  scenario(
    'schema_drift',
    'the first shipment answer renames $.shipment.id to shipment_id',
    `  - id: renamed-id
    target: { method: POST, url: /shipments }
    fault: schema_drift
    calls: [1]
    options:
      changes: [{ op: rename, path: $.shipment.id, to: shipment_id }]
`,
    () => 'rejected the drifted answer, recovered',
  ),
  scenario(
    'timeout',
    'the first shipment request hangs for 30 s, then the connection fails',
    `  - id: hang
    target: { method: POST, url: /shipments }
    fault: timeout
    calls: [1]
    options: { ms: 30000 }
`,
    (run) => `timed out, recovered in ${seconds(run.virtualMs)}`,
  ),
  scenario(
    'latency',
    'the shipment is created, then its answer is held 1.5-4 s (seeded)',
    `  - id: slow-ack
    target: { method: POST, url: /shipments }
    fault: latency
    calls: [1]
    options: { minMs: 1500, maxMs: 4000, phase: after-response }
`,
    (run) => `waited out ${seconds(run.faultHeldMs)} of latency`,
  ),
  scenario(
    'blackout',
    'the API refuses every connection for the first 3 s',
    `  - id: outage
    target: { url: "/**" }
    fault: blackout
    window: { fromMs: 0, toMs: 3000 }
`,
    (run) => `rode out the outage, done at ${seconds(run.virtualMs)}`,
  ),
  scenario(
    'stream_cut',
    'the rates stream ends cleanly after its first event',
    `  - id: short-rates
    target: { method: GET, url: /rates }
    fault: stream_cut
    calls: [1]
    options: { afterEvents: 1 }
`,
    () => 'detected the truncated stream, recovered',
  ),
]

/** Scenario names, in the order `--scenario all` runs them. */
export const SCENARIO_NAMES: readonly string[] = SCENARIOS.map((s) => s.name)
