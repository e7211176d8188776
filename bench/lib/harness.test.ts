import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { formatTable, judged, type Metric } from './harness.ts'
import { summarizeProfile } from './profile.ts'

const base: Metric = { id: 'x', metric: 'replay vs peer', ours: 0, unit: 'ms' }

test('a ratio is the median of the per-round ratios, oriented as ratioOf says', () => {
  // Round 3 ran while the machine was busy: a ratio of medians (300/100 = 3) would be wrong, the rounds say 2.
  const rounds = { ours: [200, 210, 900], peer: [100, 105, 100] }
  const slower = judged({ ...base, ours: 210, peer: { name: 'p', value: 100 }, ratio: 2.1, ratioOf: 'ours/peer', rounds })
  assert.equal(slower.ratio, 2)
  assert.equal(slower.ratioOfMedians, 2.1)
  const faster = judged({ ...base, ours: 210, peer: { name: 'p', value: 100 }, ratio: 0.48, ratioOf: 'peer/ours', rounds })
  assert.equal(faster.ratio, 0.5)
})

test('a row passes only when its target and every condition hold', () => {
  const min = { kind: 'min' as const, value: 1, text: '>= 1.0x' }
  assert.equal(judged({ ...base, ratio: 1.2, target: min }).pass, true)
  assert.equal(judged({ ...base, ratio: 0.9, target: min }).pass, false)
  assert.equal(judged({ ...base, ratio: 1.2, target: min, conditions: [{ text: 'every chunk its own read', ok: false }] }).pass, false)
  // An absolute target is on `ours`, even when the row also has a ratio to a peer.
  const max = { kind: 'max' as const, value: 100, text: '<= 100 ms', on: 'ours' as const }
  assert.equal(judged({ ...base, ours: 90, ratio: 3, target: max }).pass, true)
  assert.equal(judged({ ...base, ours: 120, ratio: 0.5, target: max }).pass, false)
  assert.equal(judged({ ...base, ratio: 3 }).pass, undefined)
})

test('the table has a column per field and says which targets were missed', () => {
  const table = formatTable([
    judged({
      ...base,
      ours: 120,
      unit: 'ms',
      peer: { name: 'SnapshotAgent', value: 60 },
      ratio: 2,
      ratioText: 'x SnapshotAgent',
      target: { kind: 'max', value: 100, text: '<= 100 ms', on: 'ours' },
    }),
  ])
  const [head, , row] = table.split('\n')
  assert.match(head as string, /^metric\s+ours\s+peer \/ limit\s+ratio\s+target\s+result$/)
  assert.match(row as string, /replay vs peer\s+120 ms\s+SnapshotAgent 60.0\s+2.00x SnapshotAgent\s+<= 100 ms\s+MISSED/)
})

test('a profile summary counts self time by function and by area, without idle time or the profiler itself', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tr-bench-prof-test-'))
  try {
    const root = fileURLToPath(new URL('../..', import.meta.url))
    const frame = (id: number, functionName: string, url: string) => ({ id, callFrame: { functionName, url, lineNumber: 9 } })
    const profile = {
      nodes: [
        frame(1, '(root)', ''),
        frame(2, '(garbage collector)', ''),
        frame(3, 'handle', `file://${root}engine/session.ts`),
        frame(4, 'dispatch', `file://${root}node_modules/undici/lib/agent.js`),
        frame(5, '(idle)', ''),
        frame(6, 'post', 'node:inspector'),
      ],
      samples: [3, 3, 3, 2, 4, 5, 5, 5, 6],
      timeDeltas: [1000, 1000, 1000, 2000, 1000, 50000, 50000, 50000, 9000],
    }
    const file = join(dir, 'x.cpuprofile')
    writeFileSync(file, JSON.stringify(profile))
    const s = summarizeProfile('test', file)
    assert.equal(s.totalMs, 6)
    assert.deepEqual(
      s.functions.map((f) => [f.name, f.where, f.selfMs]),
      [
        ['handle', 'engine/session.ts:10', 3],
        ['(garbage collector)', '', 2],
        ['dispatch', 'undici/lib/agent.js:10', 1],
      ],
    )
    assert.deepEqual(
      s.areas.map((a) => [a.area, Math.round(a.pct)]),
      [
        ['engine/', 50],
        ['(garbage collector)', 33],
        ['undici', 17],
      ],
    )
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})
