/**
 * Faults through the interceptor, one test per fault kind: Node's built-in fetch against a real local API
 * with the interceptor installed globally and `faults` given to install(), recorded into a real LevelDB
 * store. Each test checks what the app saw (status, body, the error's code, the events it read), what the
 * API really received and committed, and the fault record in the trace (the app's view next to the
 * upstream's). Then: strict replay of a faulted run with zero upstream connections (and with the API
 * stopped), determinism of seeded schedules, and assertDone() failing on a rule that never fired.
 */
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { type InterceptorSession, install } from 'tool-replay/interceptor'
import { openStore, type TraceStore } from 'tool-replay/store'
import { bodyBytes, type Exchange, forkTrace, parseJson, type Trace } from 'tool-replay/trace'
import { EVENTS, type FaultUpstream, QUOTE, startFaultUpstream } from './support/fault-upstream.ts'

let dir: string
let store: TraceStore
let api: FaultUpstream
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tr-faults-interceptor-'))
  store = await openStore(join(dir, 'store'))
  api = await startFaultUpstream()
})
after(async () => {
  await api.close()
  await store.close()
  await rm(dir, { recursive: true, force: true })
})

/** What the app saw of one request. */
interface Seen {
  status?: number
  body?: string
  /** The failure's code (fetch's `cause.code`), when the request or its body failed. */
  error?: string
  /** The body as the app read it, one entry per read. */
  reads: string[]
  ms: number
}

async function see(path: string, init: RequestInit = {}, base = api.url): Promise<Seen> {
  const t0 = performance.now()
  const seen: Seen = { reads: [], ms: 0 }
  try {
    const res = await fetch(`${base}${path}`, init)
    seen.status = res.status
    const reader = (res.body as ReadableStream<Uint8Array>).getReader()
    const decoder = new TextDecoder()
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      seen.reads.push(decoder.decode(value))
    }
    seen.body = seen.reads.join('')
  } catch (err) {
    const e = err as { cause?: { code?: string }; code?: string; name?: string }
    seen.error = e.cause?.code ?? e.code ?? e.name
    if (seen.reads.length > 0) seen.body = seen.reads.join('')
  }
  seen.ms = performance.now() - t0
  return seen
}

const ship = (key?: string): RequestInit => ({
  method: 'POST',
  headers: { 'content-type': 'application/json', ...(key ? { 'idempotency-key': key } : {}) },
  body: '{"orderId":"o-1"}',
})

/** Records one run with these rules; returns the session (closed) and the trace as stored. */
async function recordWith(
  name: string,
  rules: unknown[],
  run: () => Promise<void>,
  seed: string | number = 11,
): Promise<{ tr: InterceptorSession; trace: Trace }> {
  const tr = await install({ mode: 'record', trace: name, store, faults: { seed, rules } })
  try {
    await run()
  } finally {
    await tr.close()
  }
  return { tr, trace: await store.readTrace(name) }
}

function text(trace: Trace, x: Exchange['outcome'] | null | undefined): string | undefined {
  if (!x) return undefined
  const ref = x.kind === 'response' ? x.response.body : x.error.partial?.body
  return ref ? new TextDecoder().decode(bodyBytes(trace, ref)) : undefined
}

const statusOf = (o: Exchange['outcome'] | null | undefined) => (o ? (o.kind === 'response' ? o.response.status : o.error.code) : null)

describe('each fault kind through the interceptor (Node fetch)', () => {
  test('response_lost: the API commits, the app gets ECONNRESET; the trace keeps both sides', async () => {
    const committed = api.shipments.length
    let seen: Seen | undefined
    const { trace, tr } = await recordWith('lost', [{ id: 'lost-ack', target: { method: 'POST', url: '/shipments' }, fault: 'response_lost' }], async () => {
      seen = await see('/shipments', ship())
    })
    assert.equal(seen?.error, 'ECONNRESET')
    assert.equal(seen?.status, undefined, 'the app never saw a status')
    assert.equal(api.shipments.length, committed + 1, 'the API committed the shipment')
    const x = trace.exchanges[0] as Exchange
    assert.equal(statusOf(x.outcome), 'ECONNRESET')
    assert.equal(x.fault?.kind, 'response_lost')
    assert.equal(x.fault?.phase, 'after-response')
    assert.equal(statusOf(x.fault?.upstream), 201)
    assert.equal((parseJson(text(trace, x.fault?.upstream) as string) as { shipment: { id: string } }).shipment.id, api.shipments.at(-1))
    assert.deepEqual(
      tr.faults?.coverage().map((c) => [c.rule, c.triggered]),
      [['lost-ack', 1]],
    )
  })

  test('timeout: nothing is forwarded; the app waits ms, then fetch fails with ETIMEDOUT', async () => {
    const before = api.requests.length
    let seen: Seen | undefined
    const { trace } = await recordWith('timeout', [{ id: 'hang', target: { url: '/quote' }, fault: 'timeout', options: { ms: 300 } }], async () => {
      seen = await see('/quote')
    })
    assert.equal(seen?.error, 'ETIMEDOUT')
    assert.ok((seen?.ms ?? 0) >= 290, `waited ${seen?.ms} ms`)
    assert.equal(api.requests.length, before, 'never forwarded')
    const x = trace.exchanges[0] as Exchange
    assert.equal(x.fault?.upstream, null)
    assert.ok(x.timing.headersMs >= 290, 'the trace keeps the wait')
  })

  test('rate_limit: a 429 with retry-after and retry-after-ms, never forwarded; the next call goes through', async () => {
    const before = api.requests.length
    const seen: Seen[] = []
    const { trace } = await recordWith(
      'rate-limit',
      [{ id: 'rl', target: { url: '/quote' }, fault: 'rate_limit', first: 1, options: { retryAfterMs: 1500 } }],
      async () => {
        const res = await fetch(`${api.url}/quote`)
        seen.push({
          status: res.status,
          body: await res.text(),
          reads: [],
          ms: 0,
          error: `${res.headers.get('retry-after')}/${res.headers.get('retry-after-ms')}`,
        })
        seen.push(await see('/quote'))
      },
    )
    assert.equal(seen[0]?.status, 429)
    assert.equal(seen[0]?.error, '2/1500', 'retry-after in whole seconds (rounded up) and retry-after-ms exact')
    assert.deepEqual(parseJson(seen[0]?.body as string), { error: { status: 429, message: 'Too Many Requests' } })
    assert.equal(seen[1]?.status, 200)
    assert.equal(seen[1]?.body, QUOTE)
    assert.equal(api.requests.length, before + 1, 'only the second call reached the API')
    assert.deepEqual(
      trace.exchanges.map((x) => [statusOf(x.outcome), x.fault?.rule ?? null]),
      [
        [429, 'rl'],
        [200, null],
      ],
    )
  })

  test('server_error: a provider-shaped 503 (OpenAI shape by host option), never forwarded', async () => {
    const before = api.requests.length
    let seen: Seen | undefined
    await recordWith(
      'server-error',
      [{ id: 'boom', target: { url: '/quote' }, fault: 'server_error', options: { status: 503, provider: 'openai' } }],
      async () => {
        seen = await see('/quote')
      },
    )
    assert.equal(seen?.status, 503)
    assert.equal((parseJson(seen?.body as string) as { error: { type: string } }).error.type, 'server_error')
    assert.equal(api.requests.length, before)
  })

  test('latency: the answer arrives later (fixed ms), forwarded once and unchanged', async () => {
    const before = api.requests.length
    let seen: Seen | undefined
    const { trace } = await recordWith('latency', [{ id: 'slow', target: { url: '/quote' }, fault: 'latency', options: { ms: 250 } }], async () => {
      seen = await see('/quote')
    })
    assert.equal(seen?.status, 200)
    assert.equal(seen?.body, QUOTE)
    assert.ok((seen?.ms ?? 0) >= 245, `took ${seen?.ms} ms`)
    assert.equal(api.requests.length, before + 1)
    const x = trace.exchanges[0] as Exchange
    assert.equal(x.fault?.kind, 'latency')
    assert.ok(x.timing.headersMs >= 245, 'the recorded head time includes the latency')
  })

  test('schema_drift: the app gets the API JSON with a renamed field; the trace keeps the original', async () => {
    let seen: Seen | undefined
    const { trace } = await recordWith(
      'drift',
      [{ id: 'drift', target: { url: '/quote' }, fault: 'schema_drift', options: { changes: [{ op: 'rename', path: '$.quote.id', to: 'quote_id' }] } }],
      async () => {
        seen = await see('/quote')
      },
    )
    assert.equal(seen?.status, 200)
    assert.deepEqual(parseJson(seen?.body as string), { quote: { quote_id: 'q-1', price: '4.90' } })
    const x = trace.exchanges[0] as Exchange
    assert.deepEqual(parseJson(text(trace, x.outcome) as string), { quote: { quote_id: 'q-1', price: '4.90' } })
    assert.equal(text(trace, x.fault?.upstream), QUOTE)
  })

  test('blackout: refused connections (ECONNREFUSED), or a provider-shaped 503; nothing reaches the API', async () => {
    const before = api.requests.length
    const seen: Seen[] = []
    await recordWith(
      'blackout',
      [
        { id: 'down', target: { url: '/quote' }, fault: 'blackout' },
        { id: 'down-503', target: { url: '/other' }, fault: 'blackout', options: { mode: '503' } },
      ],
      async () => {
        seen.push(await see('/quote'), await see('/quote'), await see('/other'))
      },
    )
    assert.deepEqual(
      seen.map((s) => s.error ?? s.status),
      ['ECONNREFUSED', 'ECONNREFUSED', 503],
    )
    assert.equal(api.requests.length, before)
  })

  test('stream_cut: the app reads 2 whole events, then a clean end; the API streamed all 5', async () => {
    let seen: Seen | undefined
    const { trace } = await recordWith(
      'stream-cut',
      [{ id: 'cut', target: { url: '/events' }, fault: 'stream_cut', options: { afterEvents: 2 } }],
      async () => {
        seen = await see('/events')
      },
    )
    assert.equal(seen?.error, undefined, 'a clean end')
    assert.equal(seen?.body, EVENTS.slice(0, 2).join(''))
    const x = trace.exchanges[0] as Exchange
    assert.equal(text(trace, x.outcome), EVENTS.slice(0, 2).join(''))
    assert.equal(text(trace, x.fault?.upstream), EVENTS.join(''), 'the upstream was read to its end')
  })

  test('stream_error: the app reads 1 event, then the body breaks off with ECONNRESET', async () => {
    let seen: Seen | undefined
    const { trace } = await recordWith(
      'stream-error',
      [{ id: 'reset', target: { url: '/events' }, fault: 'stream_error', options: { afterEvents: 1 } }],
      async () => {
        seen = await see('/events')
      },
    )
    assert.equal(seen?.status, 200)
    assert.equal(seen?.body, EVENTS[0])
    assert.equal(seen?.error, 'ECONNRESET')
    const x = trace.exchanges[0] as Exchange
    assert.equal(statusOf(x.outcome), 'ECONNRESET')
    assert.equal(x.outcome.kind === 'error' && x.outcome.error.phase, 'response-body')
    assert.equal(text(trace, x.outcome), EVENTS[0])
  })
})

describe('a faulted run, replayed strictly', () => {
  const rules = [
    { id: 'lost-ack', target: { method: 'POST', url: '/shipments' }, fault: 'response_lost', calls: [1] },
    { id: 'rl', target: { url: '/quote' }, fault: 'rate_limit', first: 1 },
    { id: 'cut', target: { url: '/events' }, fault: 'stream_cut', options: { afterEvents: 3 } },
    { id: 'reset', target: { url: '/other' }, fault: 'timeout', options: { ms: 50 } },
  ]
  // An app with unchecked retries: it retries the lost shipment and the rate-limited quote once.
  const app = async (base: string): Promise<Seen[]> => {
    const out: Seen[] = []
    for (const path of ['/shipments', '/shipments']) out.push(await see(path, ship(), base))
    for (const path of ['/quote', '/quote', '/events', '/other']) out.push(await see(path, {}, base))
    return out.map(({ ms: _ms, ...s }) => ({ ...s, ms: 0 }))
  }

  test('gives the app exactly what it was given, offline (zero connections; then with the API stopped)', async () => {
    const own = await startFaultUpstream()
    let live: Seen[] = []
    const { trace } = await recordWith('faulted-run', rules, async () => {
      live = await app(own.url)
    })
    assert.deepEqual(
      live.map((s) => s.error ?? s.status),
      ['ECONNRESET', 201, 429, 200, 200, 'ETIMEDOUT'],
    )
    assert.equal(trace.meta.labels?.faultsSeed, '11')
    assert.deepEqual(own.shipments, ['s-1', 's-2'], 'the lost shipment was committed, and so was the retry')
    const connections = own.connections
    const rep = await install({ mode: 'replay', trace: 'faulted-run', store, faults: { rules } })
    let replayed: Seen[]
    try {
      replayed = await app(own.url)
      rep.assertDone()
    } finally {
      await rep.close()
    }
    assert.deepEqual(replayed, live)
    assert.equal(own.connections, connections, 'strict replay opened no connection')
    assert.deepEqual(own.shipments, ['s-1', 's-2'], 'and committed nothing')
    // The faults file given to replay is checked against the faults the trace holds.
    assert.deepEqual(
      rep.faults?.coverage().map((c) => [c.rule, c.triggered]),
      rules.map((r) => [r.id, 1]),
    )
    assert.equal(rep.faults?.seed, '11', 'the seed the trace was recorded with')

    await own.close()
    const offline = await install({ mode: 'replay', trace: 'faulted-run', store })
    try {
      assert.deepEqual(await app(own.url), live, 'the same with the API stopped')
      offline.assertDone()
    } finally {
      await offline.close()
    }
  })
})

describe('a fault forked into a clean recording', () => {
  test('#0 fault=rate_limit@80: offline, the app gets the 429, waits, and its retry gets the recorded answer', async () => {
    const own = await startFaultUpstream()
    const rec = await install({ mode: 'record', trace: 'clean-quote', store })
    await see('/quote', {}, own.url)
    await rec.close()
    const branch = forkTrace(await store.readTrace('clean-quote'), { name: 'quote-429', sourceDigest: 'test', patches: ['#0 fault=rate_limit@80'] })
    await store.putTrace(branch)
    const connections = own.connections
    const rep = await install({ mode: 'replay', trace: 'quote-429', store })
    const seen: Array<number | string | undefined> = []
    try {
      // An app that honours Retry-After once.
      const first = await fetch(`${own.url}/quote`)
      seen.push(first.status, first.headers.get('retry-after-ms') ?? undefined)
      await first.arrayBuffer()
      await new Promise((resolve) => setTimeout(resolve, Number(first.headers.get('retry-after-ms'))))
      const second = await see('/quote', {}, own.url)
      seen.push(second.status, second.body)
      rep.assertDone()
    } finally {
      await rep.close()
      await own.close()
    }
    assert.deepEqual(seen, [429, '80', 200, QUOTE])
    assert.equal(own.connections, connections, 'offline')
  })
})

describe('seeded schedules', () => {
  const rule = (seed: number) => ({ seed, rules: [{ id: 'flaky', target: { url: '/quote' }, fault: 'server_error', probability: 0.5 }] })
  /** Which of 16 quote calls were faulted, with or without unrelated traffic between them. */
  async function schedule(name: string, seed: number, noise: boolean): Promise<number[]> {
    const tr = await install({ mode: 'passthrough', trace: name, store, faults: rule(seed) })
    const faulted: number[] = []
    try {
      for (let i = 1; i <= 16; i++) {
        if (noise) await see(`/noise-${i}`)
        const s = await see('/quote')
        if (s.status === 500) faulted.push(i)
      }
    } finally {
      await tr.close()
    }
    return faulted
  }

  test('same seed, same schedule; unrelated traffic does not shift it; another seed changes it', async () => {
    const a = await schedule('sched-a', 5, false)
    assert.ok(a.length > 0 && a.length < 16, `a mixed schedule: ${a}`)
    assert.deepEqual(await schedule('sched-b', 5, false), a)
    assert.deepEqual(await schedule('sched-c', 5, true), a, 'noise on other URLs leaves the schedule alone')
    assert.notDeepEqual(await schedule('sched-d', 6, false), a)
  })
})

describe('coverage', () => {
  test('assertDone() throws TR_FAULT_NOT_FIRED naming the rule, why, and the seed', async () => {
    const tr = await install({
      mode: 'passthrough',
      trace: 'unfired',
      store,
      faults: {
        seed: 3,
        rules: [
          { id: 'typo', target: { url: '/qoute' }, fault: 'rate_limit' },
          { id: 'maybe', target: { url: '/x' }, fault: 'timeout', optional: true },
        ],
      },
    })
    try {
      await see('/quote')
      assert.throws(
        () => tr.assertDone(),
        (err: Error & { code?: string }) =>
          err.code === 'TR_FAULT_NOT_FIRED' &&
          /"typo" \(rate_limit on \* \/qoute\): its target \* \/qoute matched no request/.test(err.message) &&
          /seed 3/.test(err.message) &&
          !/maybe/.test(err.message),
      )
    } finally {
      await tr.close()
    }
  })
})
