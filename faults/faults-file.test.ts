import assert from 'node:assert/strict'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { ErrorCodes, isToolReplayError } from '../trace/index.ts'
import { faultsFromObject, parseFaults, readFaultsFile } from './faults-file.ts'

const FULL = `
seed: 12345678901234567890
rules:
  - id: lost-ack
    target: { method: POST, url: "**/shipments" }
    fault: response_lost
    calls: [1]
  - id: slow
    target: { host: api.test }
    fault: latency
    probability: 0.25
    options: { minMs: 100, maxMs: 900, phase: after-response }
  - id: quota
    target: { url: /v1/** }
    fault: rate_limit
    quota: { limit: 2, windowMs: 1000 }
  - id: drift
    target: { url: /shipments }
    fault: schema_drift
    first: 1
    key: { header: Idempotency-Key }
    options:
      changes:
        - { op: rename, path: $.shipment.id, to: shipment_id }
        - { op: type, path: "$.items[*].qty", to: string }
        - { op: add, path: $.extra, value: { big: 98765432109876543210 } }
  - id: outage
    target: { host: "*.test" }
    fault: blackout
    window: { fromMs: 1000, toMs: 3000 }
    optional: true
  - id: cut
    target: { url: /rates }
    fault: stream_cut
    limit: 1
    options: { afterEvents: 1 }
effects:
  - { target: { method: POST, url: /shipments }, id: $.shipment.id, group: $.orderId, name: shipment }
contracts:
  - no-duplicate-effects
  - { max-calls: 10 }
  - { bounded-retries: { retries: 2, target: { url: /shipments } } }
  - honours-retry-after
  - all-rules-fired
`

test('a full YAML file: every shape and option is read, with defaults, and the seed stays exact', () => {
  const c = parseFaults(FULL, { source: 'faults.yaml' })
  assert.equal(c.seed, '12345678901234567890')
  assert.deepEqual(
    c.rules.map((r) => [r.id, r.fault]),
    [
      ['lost-ack', 'response_lost'],
      ['slow', 'latency'],
      ['quota', 'rate_limit'],
      ['drift', 'schema_drift'],
      ['outage', 'blackout'],
      ['cut', 'stream_cut'],
    ],
  )
  const [lost, slow, quota, drift, outage, cut] = c.rules
  assert.deepEqual(lost?.options, { code: 'ECONNRESET' })
  assert.deepEqual(lost?.calls, [1])
  assert.deepEqual(slow?.options, { distribution: { kind: 'uniform', minMs: 100, maxMs: 900 }, phase: 'after-response' })
  assert.equal(slow?.probability, 0.25)
  assert.deepEqual(quota?.quota, { limit: 2, windowMs: 1000 })
  assert.deepEqual(drift?.key, { header: 'idempotency-key' })
  const changes = drift?.fault === 'schema_drift' ? drift.options.changes : []
  assert.equal(changes.length, 3)
  assert.equal(JSON.stringify(changes[2]), '{"op":"add","path":"$.extra","value":{"big":98765432109876543210}}')
  assert.deepEqual(outage?.options, { mode: 'refused' })
  assert.equal(outage?.optional, true)
  assert.deepEqual(outage?.window, { fromMs: 1000, toMs: 3000 })
  assert.deepEqual(cut?.options, { after: { events: 1 } })
  assert.equal(cut?.limit, 1)
  assert.equal(c.effects[0]?.name, 'shipment')
  assert.deepEqual(c.effects[0]?.id, { from: 'json', path: '$.shipment.id' })
  assert.deepEqual(
    c.contracts.map((k) => k.kind),
    ['no-duplicate-effects', 'max-calls', 'bounded-retries', 'honours-retry-after', 'all-rules-fired'],
  )
  assert.equal(c.contracts[2]?.kind === 'bounded-retries' && c.contracts[2].target?.label, '* /shipments')
})

test('JSON files are read with the JSON codec; an inline object gives the same config', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'tr-faults-'))
  try {
    const json = '{"seed": 7, "rules": [{"id": "t", "target": {"url": "/x"}, "fault": "timeout", "options": {"ms": 1.5e3}}]}'
    await writeFile(join(dir, 'f.json'), json)
    const fromFile = await readFaultsFile(join(dir, 'f.json'))
    assert.equal(fromFile.source, join(dir, 'f.json'))
    assert.deepEqual(fromFile.rules[0]?.options, { ms: 1500, code: 'ETIMEDOUT' })
    const inline = faultsFromObject({ seed: 7, rules: [{ id: 't', target: { url: '/x' }, fault: 'timeout', options: { ms: 1500 } }] })
    assert.deepEqual(inline.rules[0]?.options, fromFile.rules[0]?.options)
    assert.equal(inline.seed, '7')
    await assert.rejects(
      readFaultsFile(join(dir, 'missing.yaml')),
      (err: unknown) => isToolReplayError(err, ErrorCodes.INVALID_FAULTS) && /missing\.yaml/.test(err.message),
    )
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
})

/** Asserts TR_INVALID_FAULTS with every fragment in the message. */
function rejects(text: string, ...fragments: string[]) {
  assert.throws(
    () => parseFaults(text, { source: 'f.yaml' }),
    (err: unknown) => {
      assert.ok(isToolReplayError(err, ErrorCodes.INVALID_FAULTS), String(err))
      for (const f of fragments) assert.ok(err.message.includes(f), `${JSON.stringify(f)} not in: ${err.message}`)
      return true
    },
  )
}

const rule = (extra: string) => `rules:\n  - id: r1\n    target: { url: /x }\n${extra}`

test('invalid files are TR_INVALID_FAULTS naming the rule id and field, and saying how to fix it', () => {
  rejects(rule('    fault: gremlins\n'), 'Faults f.yaml are invalid', 'rules[0] (id "r1").fault', '"gremlins"', 'Use one of response_lost, timeout')
  rejects(rule('    fault: timeout\n    cals: [1]\n'), 'rules[0] (id "r1").cals', 'not a known field', 'Did you mean "calls"?')
  rejects(rule('    fault: timeout\n    calls: [0]\n'), 'rules[0] (id "r1").calls', 'Calls count from 1')
  rejects(rule('    fault: timeout\n    probability: 2\n'), '(id "r1").probability', 'is 2', '(0, 1]')
  rejects(rule('    fault: timeout\n    window: { fromMs: 5, toMs: 1 }\n'), '(id "r1").window', 'Make toMs greater')
  rejects(rule('    fault: stream_cut\n'), '(id "r1").options', 'afterEvents')
  rejects(rule('    fault: server_error\n    options: { status: 418 }\n'), '(id "r1").options.status', '500, 502, 503, 504, 529')
  rejects(rule('    fault: schema_drift\n    options: { changes: [{ op: rename, path: $.a }] }\n'), 'options.changes[0].to', 'new key name')
  rejects(rule('    fault: schema_drift\n    options: { changes: [{ op: remove, path: "a.b" }] }\n'), 'options.changes[0].path', 'not a JSON path')
  rejects(rule('    fault: latency\n    options: { ms: 5, minMs: 1 }\n'), 'options', 'mixes a fixed ms')
  rejects('rules:\n  - { id: a, target: { url: /x }, fault: timeout }\n  - { id: a, target: { url: /y }, fault: timeout }\n', 'rules[1].id', 'repeats "a"')
  rejects('rules:\n  - { id: a, target: { url: /x, host: h }, fault: timeout }\n', 'rules[0] (id "a").target', 'exactly one of "url" and "host"')
  rejects('rules:\n  - { id: a, target: { url: "/(/" }, fault: timeout }\n', '(id "a").target', 'not a valid regular expression')
  rejects('rules:\n  - { target: { url: /x }, fault: timeout }\n', 'rules[0].id', 'is missing')
  rejects('seed: [1]\nrules: []\n', 'seed', 'integer or a short string')
  rejects('rules:\n  - id: a\n   target: x\n', 'not valid YAML at line 3')
  rejects('rules: []\ncontracts: [no-duplicate-effects]\n', 'contracts', '"effects" is empty')
  rejects('rules: []\ncontracts: [{ max-calls: 0 }]\n', 'contracts[0].max-calls')
  rejects('rules: []\ncontracts: [be-nice]\n', 'contracts[0]', '"be-nice"', 'no-duplicate-effects')
  rejects('rules: []\neffects: [{ target: { url: /x }, id: shipment.id }]\n', 'effects[0].id', 'JSON path', 'header:location')
  rejects('rulez: []\n', '(top level).rulez', 'Did you mean "rules"?')
})

test('MCP targets: a tool (and server, method) of an MCP stdio server; MCP kinds only there, and only MCP kinds', () => {
  const config = parseFaults(`
rules:
  - { id: fails, target: { mcp: { tool: write_file } }, fault: tool_error, options: { text: disk full } }
  - { id: crash, target: { mcp: { server: fs*, tool: "*" } }, fault: server_crash }
effects:
  - { target: { mcp: { tool: write_file } }, name: file write }
contracts: [no-duplicate-effects]
`)
  const [fails, crash] = config.rules
  assert.equal(fails?.target.label, 'mcp tool write_file')
  assert.deepEqual(fails?.options, { text: 'disk full' })
  assert.equal(fails?.target.matches('POST', 'mcp+stdio://filesystem/tools/call/write_file'), true)
  assert.equal(fails?.target.matches('POST', 'mcp+stdio://filesystem/tools/call/read_file'), false)
  assert.equal(fails?.target.matches('POST', 'mcp+stdio://filesystem/reply/sampling/createMessage'), false)
  assert.equal(fails?.target.matches('POST', 'https://api.test/tools/call/write_file'), false)
  assert.equal(crash?.target.matches('POST', 'mcp+stdio://fs-home/tools/call/anything'), true)
  assert.equal(crash?.target.matches('POST', 'mcp+stdio://memory/tools/call/anything'), false)
  assert.equal(config.effects[0]?.target.matches('POST', 'mcp+stdio://filesystem/tools/call/write_file'), true)
  assert.throws(() => parseFaults('rules: [{ id: r, target: { mcp: { tool: x } }, fault: rate_limit }]'), {
    code: ErrorCodes.INVALID_FAULTS,
    message:
      /rules\[0\] \(id "r"\)\.fault is rate_limit, which does not apply to an MCP target\. On an mcp target use one of tool_error, timeout, response_lost, latency, server_crash\./,
  })
  assert.throws(() => parseFaults('rules: [{ id: r, target: { url: /x }, fault: tool_error }]'), {
    code: ErrorCodes.INVALID_FAULTS,
    message: /fault is tool_error, which only applies to MCP servers/,
  })
  assert.throws(() => parseFaults('rules: [{ id: r, target: { mcp: {} }, fault: timeout }]'), { code: ErrorCodes.INVALID_FAULTS, message: /mcp needs a tool/ })
  assert.throws(() => parseFaults('rules: [{ id: r, target: { mcp: { tool: x }, url: /y }, fault: timeout }]'), { code: ErrorCodes.INVALID_FAULTS })
})

test("a faults file's WebSocket rules (ws_close, ws_drop, ws_delay): options with defaults, each problem TR_INVALID_FAULTS naming the fix", () => {
  const c = faultsFromObject({
    rules: [
      { id: 'c', target: { url: '/v1/realtime' }, fault: 'ws_close', options: { afterMessages: 3, code: 4000 } },
      { id: 'c0', target: { url: '/v1/realtime' }, fault: 'ws_close' },
      { id: 'd', target: { url: '/v1/realtime' }, fault: 'ws_drop', options: { messages: [5, 2, 5] } },
      { id: 'l', target: { url: '/v1/realtime' }, fault: 'ws_delay', options: { fromMessage: 2, minMs: 100, maxMs: 300 } },
      { id: 'l0', target: { url: '/v1/realtime' }, fault: 'ws_delay' },
    ],
  })
  assert.deepEqual(
    c.rules.map((r) => [r.fault, r.options]),
    [
      ['ws_close', { afterMessages: 3, code: 4000 }],
      ['ws_close', { afterMessages: 1, code: 1011 }],
      ['ws_drop', { messages: [2, 5] }],
      ['ws_delay', { fromMessage: 2, distribution: { kind: 'uniform', minMs: 100, maxMs: 300 } }],
      ['ws_delay', { fromMessage: 1, distribution: { kind: 'fixed', ms: 1000 } }],
    ],
  )
  const bad = (fault: string, options: unknown, message: RegExp) =>
    assert.throws(() => faultsFromObject({ rules: [{ id: 'x', target: { url: '/v1/realtime' }, fault, options }] }), {
      code: ErrorCodes.INVALID_FAULTS,
      message,
    })
  bad('ws_close', { code: 1005 }, /options\.code is 1005, not a close code an endpoint may send\. Use 1000-1003, 1007-1014 or 3000-4999/)
  bad('ws_close', { afterMessages: 0 }, /options\.afterMessages .*Server messages count from 1/)
  bad('ws_drop', { messages: [] }, /options\.messages is empty/)
  bad('ws_drop', { at: 2 }, /at/)
  bad('ws_delay', { ms: 4_000_000 }, /at most 3600000 ms/)
  assert.throws(() => faultsFromObject({ rules: [{ id: 'x', target: { mcp: { tool: 't' } }, fault: 'ws_drop' }] }), {
    code: ErrorCodes.INVALID_FAULTS,
    message: /does not apply to an MCP target/,
  })
})
