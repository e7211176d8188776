/**
 * Faults through node:http capture: the same engine decisions as for fetch (e2e/faults-interceptor.test.ts),
 * carried out for `http.request` against a real local API, recorded into a real LevelDB store. Per fault
 * kind: what the app saw (status, body, the error's code), what the API really received and committed, and
 * the fault record in the trace. Then strict replay of a faulted node:http run with zero connections, and
 * fetch and node:http faulted in one run.
 */
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import http from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { install } from 'tool-replay/interceptor'
import { openStore, type TraceStore } from 'tool-replay/store'
import { bodyBytes, type Exchange, parseJson, type Trace } from 'tool-replay/trace'
import { EVENTS, type FaultUpstream, QUOTE, startFaultUpstream } from './support/fault-upstream.ts'
import { type NodeHttpResult, nodeHttpCall } from './support/node-http-client.ts'

let dir: string
let store: TraceStore
let api: FaultUpstream
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tr-node-http-faults-'))
  store = await openStore(join(dir, 'store'))
  api = await startFaultUpstream()
})
after(async () => {
  await api.close()
  await store.close()
  await rm(dir, { recursive: true, force: true })
})

/** What the app saw, in one comparable value: the error's code, else status and body. */
const seen = (r: NodeHttpResult) => (r.error ? { status: r.status, body: r.body, error: r.error.code } : { status: r.status, body: r.body })
const call = async (path: string, base = api.url) => {
  const t0 = performance.now()
  const r = await nodeHttpCall(
    `${base}${path}`,
    path === '/shipments' ? { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"orderId":"o-1"}' } : {},
  )
  return { ...seen(r), ms: performance.now() - t0 }
}

async function recordWith(name: string, rules: unknown[], run: () => Promise<void>): Promise<Trace> {
  const tr = await install({ mode: 'record', trace: name, store, faults: { seed: 11, rules } })
  try {
    await run()
    tr.assertDone()
  } finally {
    await tr.close()
  }
  return store.readTrace(name)
}

function text(trace: Trace, x: Exchange['outcome'] | null | undefined): string | undefined {
  if (!x) return undefined
  const ref = x.kind === 'response' ? x.response.body : x.error.partial?.body
  return ref ? new TextDecoder().decode(bodyBytes(trace, ref)) : undefined
}
const statusOf = (o: Exchange['outcome'] | null | undefined) => (o ? (o.kind === 'response' ? o.response.status : o.error.code) : null)

test('every fault kind on node:http: what the app saw, what the API got, what the trace keeps', async () => {
  const rules = [
    { id: 'lost', target: { method: 'POST', url: '/shipments' }, fault: 'response_lost' },
    { id: 'hang', target: { url: '/hang' }, fault: 'timeout', options: { ms: 200 } },
    { id: 'rl', target: { url: '/quote' }, fault: 'rate_limit', first: 1, options: { retryAfterMs: 1500 } },
    { id: 'boom', target: { url: '/boom' }, fault: 'server_error', options: { status: 503, provider: 'openai' } },
    { id: 'slow', target: { url: '/slow' }, fault: 'latency', options: { ms: 200 } },
    { id: 'drift', target: { url: '/drift' }, fault: 'schema_drift', options: { changes: [{ op: 'rename', path: '$.path', to: 'route' }] } },
    { id: 'down', target: { url: '/down' }, fault: 'blackout' },
    { id: 'cut', target: { url: '/events-cut' }, fault: 'stream_cut', options: { afterEvents: 2 } },
    { id: 'reset', target: { url: '/events-reset' }, fault: 'stream_error', options: { afterEvents: 1 } },
  ]
  const paths = ['/shipments', '/hang', '/quote', '/quote', '/boom', '/slow', '/drift', '/down', '/events-cut', '/events-reset']
  const requests = api.requests.length
  const shipments = api.shipments.length
  const got: Array<Awaited<ReturnType<typeof call>>> = []
  const trace = await recordWith('kinds', rules, async () => {
    for (const path of paths) got.push(await call(path))
  })
  const [lost, hang, limited, quote, boom, slow, drift, down, cut, reset] = got
  assert.equal(lost?.error, 'ECONNRESET')
  assert.equal(lost?.status, undefined, 'the app never saw a status')
  assert.equal(api.shipments.length, shipments + 1, 'the API committed the shipment')
  assert.equal(hang?.error, 'ETIMEDOUT')
  assert.ok((hang?.ms ?? 0) >= 190, `the app waited (${hang?.ms} ms)`)
  assert.equal(limited?.status, 429)
  assert.deepEqual([quote?.status, quote?.body], [200, QUOTE], 'the next call goes through')
  assert.equal(boom?.status, 503)
  assert.equal((parseJson(boom?.body as string) as { error: { type: string } }).error.type, 'server_error')
  assert.deepEqual([slow?.status, slow?.error], [200, undefined])
  assert.ok((slow?.ms ?? 0) >= 190, `latency (${slow?.ms} ms)`)
  assert.deepEqual(parseJson(drift?.body as string), { route: '/drift' })
  assert.equal(down?.error, 'ECONNREFUSED')
  assert.deepEqual([cut?.status, cut?.body, cut?.error], [200, EVENTS.slice(0, 2).join(''), undefined], 'a clean end after 2 events')
  assert.deepEqual([reset?.status, reset?.body, reset?.error], [200, EVENTS[0], 'ECONNRESET'], 'one event, then a reset')
  assert.deepEqual(
    api.requests.slice(requests),
    ['POST /shipments', 'GET /quote', 'GET /slow', 'GET /drift', 'GET /events-cut', 'GET /events-reset'],
    'before-forward faults never reached the API; the others did, once',
  )
  const x = trace.exchanges
  assert.deepEqual(
    x.map((e) => [statusOf(e.outcome), e.fault?.kind ?? null, e.fault ? statusOf(e.fault.upstream) : null]),
    [
      ['ECONNRESET', 'response_lost', 201],
      ['ETIMEDOUT', 'timeout', null],
      [429, 'rate_limit', null],
      [200, null, null],
      [503, 'server_error', null],
      [200, 'latency', 200],
      [200, 'schema_drift', 200],
      ['ECONNREFUSED', 'blackout', null],
      [200, 'stream_cut', 200],
      ['ECONNRESET', 'stream_error', 200],
    ],
  )
  assert.equal(text(trace, x[6]?.fault?.upstream), JSON.stringify({ path: '/drift' }), 'the trace keeps what the API really sent')
  assert.equal(text(trace, x[8]?.fault?.upstream), EVENTS.join(''), 'the upstream was read to its end')
})

test('a faulted node:http run, with fetch in it, replays strictly offline as the app saw it', async () => {
  const own = await startFaultUpstream()
  const rules = [
    { id: 'lost', target: { method: 'POST', url: '/shipments' }, fault: 'response_lost', calls: [1] },
    { id: 'rl', target: { url: '/quote' }, fault: 'rate_limit', first: 1 },
    { id: 'cut', target: { url: '/events' }, fault: 'stream_cut', options: { afterEvents: 3 } },
  ]
  // An app with unchecked retries, part node:http, part fetch.
  const app = async () => {
    const out: unknown[] = []
    for (const path of ['/shipments', '/shipments', '/quote']) out.push(await call(path, own.url))
    const res = await fetch(`${own.url}/quote`)
    out.push({ status: res.status, body: await res.text() })
    out.push(await call('/events', own.url))
    return out.map((o) => ({ ...(o as object), ms: 0 }))
  }
  let live: unknown[] = []
  await recordWith('faulted-run', rules, async () => {
    live = await app()
  })
  assert.deepEqual(
    live.map((s) => (s as { error?: string; status?: number }).error ?? (s as { status?: number }).status),
    ['ECONNRESET', 201, 429, 200, 200],
  )
  const connections = own.connections
  const rep = await install({ mode: 'replay', trace: 'faulted-run', store, faults: { rules } })
  try {
    assert.deepEqual(await app(), live)
    rep.assertDone()
  } finally {
    await rep.close()
  }
  assert.equal(own.connections, connections, 'strict replay opened no connection')
  assert.deepEqual(own.shipments, ['s-1', 's-2'], 'and committed nothing more')
  await own.close()
})

test('a fault wait ends when the node:http app gives up: its request timeout destroys it, the trace holds its abort', async () => {
  const rules = [{ id: 'hang', target: { url: '/hang' }, fault: 'timeout', options: { ms: 60_000 } }]
  const requestsBefore = api.requests.length
  const t0 = performance.now()
  let r: NodeHttpResult | undefined
  const trace = await recordWith('gave-up', rules, async () => {
    r = await new Promise<NodeHttpResult>((resolve) => {
      const req = http.get(`${api.url}/hang`, { timeout: 100 })
      req.on('timeout', () => req.destroy(Object.assign(new Error('gave up'), { code: 'APP_TIMEOUT' })))
      req.on('error', (err: Error & { code?: string }) => resolve({ body: '', reads: 0, error: { on: 'request', code: err.code, message: err.message } }))
    })
  })
  assert.equal(r?.error?.code, 'APP_TIMEOUT', "the app's own timeout")
  // The recording closed with the abort in it (below), so the wait ended with the app; the bound is only a
  // generous guard against waiting the 60 s out.
  assert.ok(performance.now() - t0 < 30_000, 'the session did not wait the 60 s out')
  assert.deepEqual(api.requests.slice(requestsBefore), [], 'a timeout fault never reaches the upstream, and nothing retried')
  assert.deepEqual(
    trace.exchanges.map((x) => [statusOf(x.outcome), x.fault?.rule]),
    [['UND_ERR_ABORTED', 'hang']],
  )
})
