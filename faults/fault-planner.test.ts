import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import type { HeaderPairs } from '../trace/index.ts'
import type { FaultDecision } from './fault-decision.ts'
import { FaultPlanner } from './fault-planner.ts'
import { faultsFromObject } from './faults-file.ts'

const A = 'https://api.test/a'
const B = 'https://api.test/b'

const req = (url: string, headers: HeaderPairs = [], method = 'POST') => ({ method, url, headers })

/** What the run looks like from target A: the call numbers faulted and what each decision does. */
function scheduleOfA(planner: FaultPlanner, traffic: Array<'A' | 'B'>): string[] {
  const out: string[] = []
  traffic.forEach((t, i) => {
    const d = planner.decide(req(t === 'A' ? A : B), i)
    if (d) planner.settle(d, true)
    if (t === 'A' && d) out.push(`${d.rule}#${d.call}:${JSON.stringify(d.action)}`)
  })
  return out
}

const probabilistic = faultsFromObject({
  rules: [
    { id: 'flaky-a', target: { url: '/a' }, fault: 'latency', probability: 0.3, options: { minMs: 10, maxMs: 5000 } },
    { id: 'flaky-b', target: { url: '/b' }, fault: 'server_error', probability: 0.5 },
  ],
})

describe('determinism', () => {
  const onlyA = Array.from({ length: 200 }, () => 'A' as const)

  test('the same seed gives the same schedule', () => {
    const one = scheduleOfA(new FaultPlanner(probabilistic, { seed: '42' }), onlyA)
    const two = scheduleOfA(new FaultPlanner(probabilistic, { seed: '42' }), onlyA)
    assert.ok(one.length > 30 && one.length < 90, `${one.length} of 200 faulted at p = 0.3`)
    assert.deepEqual(two, one)
  })

  test("adding unrelated traffic (and another rule's faults) leaves the target's schedule unchanged", () => {
    const alone = scheduleOfA(new FaultPlanner(probabilistic, { seed: '42' }), onlyA)
    // 200 calls to A with 0..4 calls to B (which has its own probabilistic rule) before each, at other times.
    const mixed: Array<'A' | 'B'> = []
    for (let i = 0; i < 200; i++) {
      for (let j = 0; j < (i * 7) % 5; j++) mixed.push('B')
      mixed.push('A')
    }
    const planner = new FaultPlanner(probabilistic, { seed: '42' })
    assert.deepEqual(scheduleOfA(planner, mixed), alone)
    const b = planner.coverage.find((c) => c.rule === 'flaky-b')
    assert.ok(b && b.triggered > 50, 'B really was faulted along the way')
  })

  test('a different seed changes the schedule', () => {
    const a = scheduleOfA(new FaultPlanner(probabilistic, { seed: '42' }), onlyA)
    const b = scheduleOfA(new FaultPlanner(probabilistic, { seed: '43' }), onlyA)
    assert.notDeepEqual(b, a)
  })

  test('probability converges: the faulted fraction is within 0.015 of p over 20000 calls, for several seeds and p', () => {
    for (const p of [0.05, 0.3, 0.9]) {
      const config = faultsFromObject({ rules: [{ id: 'p', target: { url: '/a' }, fault: 'timeout', probability: p }] })
      for (const seed of ['1', '2', 'release-candidate']) {
        const planner = new FaultPlanner(config, { seed })
        let hits = 0
        for (let i = 0; i < 20_000; i++) if (planner.decide(req(A), 0)) hits++
        assert.ok(Math.abs(hits / 20_000 - p) < 0.015, `seed ${seed}, p ${p}: ${hits / 20_000}`)
      }
    }
  })

  test('with a key header, each logical call keeps its decisions whatever order concurrent calls arrive in', () => {
    const config = faultsFromObject({ rules: [{ id: 'k', target: { url: '/a' }, fault: 'timeout', key: { header: 'idempotency-key' }, probability: 0.5 }] })
    const run = (order: string[]) => {
      const planner = new FaultPlanner(config, { seed: '9' })
      const seen = new Map<string, boolean[]>()
      for (const key of order) seen.set(key, [...(seen.get(key) ?? []), planner.decide(req(A, [['Idempotency-Key', key]]), 0) !== undefined])
      return Object.fromEntries([...seen].sort())
    }
    const keys = Array.from({ length: 40 }, (_, i) => `order-${i}`)
    const forward = [...keys, ...keys, ...keys] // three attempts each
    const shuffled = [...forward].sort((x, y) => ((x.length * 31 + y.charCodeAt(6)) % 3) - 1 || x.localeCompare(y))
    assert.deepEqual(run(shuffled), run(forward))
    // Attempts of one key draw separately: a retry is not doomed to repeat its first attempt's fault.
    const outcomes = Object.values(run(forward)).map((v) => v.join())
    assert.ok(new Set(outcomes).size > 2)
  })
})

describe('schedule shapes', () => {
  const decideAll = (rules: unknown[], n: number, opts: { url?: string; at?: (i: number) => number; headers?: (i: number) => HeaderPairs } = {}) => {
    const planner = new FaultPlanner(faultsFromObject({ rules }), { seed: '1' })
    const out: Array<FaultDecision | undefined> = []
    for (let i = 0; i < n; i++) {
      const d = planner.decide(req(opts.url ?? A, opts.headers?.(i) ?? []), opts.at?.(i) ?? 0)
      if (d) planner.settle(d, true)
      out.push(d)
    }
    return { planner, calls: out.flatMap((d, i) => (d ? [i + 1] : [])), decisions: out }
  }

  test('calls, first, window and limit pick the calls they name', () => {
    assert.deepEqual(decideAll([{ id: 'c', target: { url: '/a' }, fault: 'timeout', calls: [2, 5] }], 6).calls, [2, 5])
    assert.deepEqual(decideAll([{ id: 'f', target: { url: '/a' }, fault: 'timeout', first: 2 }], 6).calls, [1, 2])
    assert.deepEqual(decideAll([{ id: 'l', target: { url: '/a' }, fault: 'timeout', limit: 3 }], 6).calls, [1, 2, 3])
    assert.deepEqual(
      decideAll([{ id: 'w', target: { url: '/a' }, fault: 'blackout', window: { fromMs: 100, toMs: 300 } }], 6, { at: (i) => i * 100 }).calls,
      [2, 3],
    )
    assert.deepEqual(decideAll([{ id: 'none', target: { url: '/a' }, fault: 'timeout', calls: [1] }], 3, { url: B }).calls, [])
  })

  test('a quota lets N calls through per window, then answers 429 asking to wait until the window ends', () => {
    const { calls, decisions } = decideAll([{ id: 'q', target: { url: '/a' }, fault: 'rate_limit', quota: { limit: 2, windowMs: 1000 } }], 8, {
      at: (i) => [0, 100, 200, 900, 1000, 1500, 1600, 2100][i] as number,
    })
    assert.deepEqual(calls, [3, 4, 7])
    const retryAfter = (d: FaultDecision | undefined) =>
      d?.action.do === 'respond' ? d.action.response.headers.filter(([k]) => k.startsWith('retry-after')).map(([k, v]) => `${k}=${v}`) : []
    assert.deepEqual(retryAfter(decisions[2]), ['retry-after=1', 'retry-after-ms=800'])
    assert.deepEqual(retryAfter(decisions[3]), ['retry-after=1', 'retry-after-ms=100'])
    assert.deepEqual(retryAfter(decisions[6]), ['retry-after=1', 'retry-after-ms=400'])
  })

  test('one fault per request: the first selected rule fires, later ones count as shadowed and keep their own call numbers', () => {
    const { planner, decisions } = decideAll(
      [
        { id: 'first', target: { url: '/a' }, fault: 'timeout', calls: [2] },
        { id: 'second', target: { url: '**' }, fault: 'server_error', calls: [2, 3] },
      ],
      3,
    )
    assert.deepEqual(
      decisions.map((d) => d && `${d.rule}#${d.call}`),
      [undefined, 'first#2', 'second#3'],
    )
    const second = planner.coverage.find((c) => c.rule === 'second')
    assert.deepEqual([second?.eligible, second?.selected, second?.triggered, second?.missed.shadowed], [3, 2, 1, 1])
  })

  test('a decision that could not apply is not triggered and does not use up the limit', () => {
    const planner = new FaultPlanner(
      faultsFromObject({ rules: [{ id: 'cut', target: { url: '/a' }, fault: 'stream_cut', limit: 1, options: { afterEvents: 2 } }] }),
      { seed: '1' },
    )
    const d1 = planner.decide(req(A), 0)
    assert.ok(d1)
    planner.settle(d1, false, 'the response is not an event stream')
    const d2 = planner.decide(req(A), 0)
    assert.equal(d2?.call, 2)
    if (d2) planner.settle(d2, true)
    assert.equal(planner.decide(req(A), 0), undefined)
    const c = planner.coverage[0]
    assert.deepEqual([c?.eligible, c?.selected, c?.triggered, c?.missed['not-applicable'], c?.missed.limit], [3, 3, 1, 1, 1])
    assert.match(c?.notes[0] ?? '', /call 1: the response is not an event stream/)
  })

  test('a keyed rule counts attempts per key; requests without the header are not eligible', () => {
    const { planner, decisions } = decideAll([{ id: 'k', target: { url: '/a' }, fault: 'response_lost', first: 1, key: { header: 'idempotency-key' } }], 5, {
      headers: (i) => (i === 4 ? [] : [['idempotency-key', i < 2 ? 'k1' : 'k2']]),
    })
    assert.deepEqual(
      decisions.map((d) => d && `${d.key}#${d.call}`),
      ['k1#1', undefined, 'k2#1', undefined, undefined],
    )
    assert.equal(planner.coverage[0]?.eligible, 4)
  })

  test('a latency drawn from a distribution is the same for the same seed and call, and stays in range', () => {
    const rules = [{ id: 'lat', target: { url: '/a' }, fault: 'latency', options: { minMs: 100, maxMs: 200 } }]
    const delays = (seed: string) => {
      const planner = new FaultPlanner(faultsFromObject({ rules }), { seed })
      return Array.from({ length: 50 }, () => {
        const d = planner.decide(req(A), 0)
        return d?.action.do === 'delay' ? d.action.delayMs : -1
      })
    }
    const a = delays('5')
    assert.deepEqual(delays('5'), a)
    assert.notDeepEqual(delays('6'), a)
    assert.ok(a.every((ms) => ms >= 100 && ms <= 200))
    assert.ok(new Set(a).size > 20)
  })
})

test('WebSocket rules select WebSocket sessions only, the others HTTP requests only; the same seed draws the same delay', () => {
  const config = faultsFromObject({
    rules: [
      { id: 'ws', target: { url: '/rt' }, fault: 'ws_delay', probability: 0.5, options: { minMs: 10, maxMs: 5000 } },
      { id: 'http', target: { url: '/rt' }, fault: 'server_error' },
    ],
  })
  const run = (seed: string) => {
    const planner = new FaultPlanner(config, { seed })
    const out: string[] = []
    for (let i = 0; i < 12; i++) {
      const d = planner.decide(req('https://api.test/rt', [], 'GET'), i, true)
      out.push(d ? `${d.rule}:${JSON.stringify(d.action)}` : '-')
    }
    assert.equal(planner.decide(req('https://api.test/rt', [], 'GET'), 12)?.rule, 'http')
    assert.deepEqual(
      planner.coverage.map((c) => [c.rule, c.eligible]),
      [
        ['ws', 12],
        ['http', 1],
      ],
    )
    return out
  }
  const a = run('7')
  assert.deepEqual(run('7'), a)
  assert.notDeepEqual(run('8'), a)
  assert.ok(a.some((d) => d.startsWith('ws:{"do":"websocket","plan":{"kind":"ws_delay","from":1,"ms":')))
  assert.ok(a.includes('-'))
})
