import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { bodyBytes, bodyFromChunks } from './body.ts'
import { diffTraces, formatDiffText } from './diff.ts'
import type { Exchange, HeaderPairs, Trace } from './exchange.ts'
import { headerValue } from './header-pairs.ts'
import { parseJson } from './json-codec.ts'
import { forkTrace, parsePatchSpec } from './patch.ts'

const enc = new TextEncoder()
const dec = new TextDecoder()
const EVENTS = ['data: {"n":0}\n\n', 'data: {"n":1}\n\n', 'data: {"n":2}\n\n']

/** #0 POST /ship → 201, #1 GET /quote → 200, #2 GET /events → 3 events (one chunk each). */
function source(): Trace {
  const bodies = new Map<string, Uint8Array>()
  const body = (chunks: string[]) => {
    const b = bodyFromChunks(chunks.map((c, i) => ({ bytes: enc.encode(c), atMs: i * 5 })))
    bodies.set(b.ref.digest, b.bytes)
    return b.ref
  }
  const x = (seq: number, method: string, path: string, status: number, headers: HeaderPairs, chunks: string[]): Exchange => ({
    seq,
    request: { method, url: `https://api.openai.com${path}`, headers: [], body: null },
    outcome: { kind: 'response', response: { status, statusText: 'OK', headers, body: body(chunks), trailers: [] } },
    timing: { startMs: seq * 100, headersMs: 10 },
  })
  return {
    meta: { name: 'run', format: 1 },
    exchanges: [
      x(0, 'POST', '/ship', 201, [['content-type', 'application/json']], ['{"id":"s-1"}']),
      x(1, 'GET', '/quote', 200, [['content-type', 'application/json']], ['{"q":1}']),
      x(2, 'GET', '/events', 200, [['content-type', 'text/event-stream']], EVENTS),
    ],
    bodies,
  }
}

const fork = (t: Trace, ...patches: string[]) => forkTrace(t, { name: 'branch', sourceDigest: 'd', patches })
const text = (t: Trace, x: Exchange) => {
  const o = x.outcome
  const ref = o.kind === 'response' ? o.response.body : o.error.partial?.body
  return ref ? dec.decode(bodyBytes(t, ref)) : undefined
}
const outcomeOf = (x: Exchange) => (x.outcome.kind === 'response' ? x.outcome.response.status : x.outcome.error.code)

describe('fork: fault=KIND and fault=none', () => {
  test('a before-forward fault adds an attempt before the exchange, which keeps its recorded answer', () => {
    const b = fork(source(), '#1 fault=rate_limit@2500')
    assert.deepEqual(
      b.exchanges.map((x) => [x.seq, new URL(x.request.url).pathname, outcomeOf(x), x.fault?.kind ?? null]),
      [
        [0, '/ship', 201, null],
        [1, '/quote', 429, 'rate_limit'],
        [2, '/quote', 200, null],
        [3, '/events', 200, null],
      ],
    )
    const added = b.exchanges[1] as Exchange
    assert.equal(added.fault?.upstream, null)
    assert.equal(added.origin, 'patched')
    assert.ok(added.patchId && added.fault?.rule === `patch-${added.patchId}`)
    const r = added.outcome.kind === 'response' ? added.outcome.response : undefined
    assert.equal(headerValue(r?.headers ?? [], 'retry-after-ms'), '2500')
    assert.equal((parseJson(text(b, added) as string) as { error: { code: string } }).error.code, 'rate_limit_exceeded', 'the OpenAI shape, from the host')
  })

  test('response_lost and stream_error change what the app got and keep the recorded outcome as the upstream', () => {
    const b = fork(source(), '#0 fault=response_lost', '#2 fault=stream_error@1')
    const [lost, , broken] = b.exchanges as [Exchange, Exchange, Exchange]
    assert.equal(outcomeOf(lost), 'ECONNRESET')
    assert.equal(lost.fault?.upstream?.kind === 'response' && lost.fault.upstream.response.status, 201)
    assert.equal(outcomeOf(broken), 'ECONNRESET')
    assert.equal(text(b, broken), EVENTS[0])
    assert.equal(broken.outcome.kind === 'error' && broken.outcome.error.phase, 'response-body')
    const u = broken.fault?.upstream
    assert.equal(u?.kind === 'response' && dec.decode(bodyBytes(b, u.response.body)), EVENTS.join(''), 'the branch carries the upstream body')
  })

  test('stream_cut keeps the recorded chunks up to the cut; a cut past the end is refused', () => {
    const b = fork(source(), '#2 fault=stream_cut@2')
    const x = b.exchanges[2] as Exchange
    assert.equal(text(b, x), EVENTS.slice(0, 2).join(''))
    assert.deepEqual(x.outcome.kind === 'response' && x.outcome.response.body.chunks.map((c) => c.atMs), [0, 5])
    assert.throws(() => fork(source(), '#2 fault=stream_cut@3'), /its stream has 3 event\(s\), so cutting after 3 leaves nothing out/)
  })

  test('fault=none undoes a fault: the upstream outcome comes back, an attempt that never left is removed', () => {
    const faulted = fork(source(), '#0 fault=response_lost', '#1 fault=server_error@503')
    const undone = forkTrace(
      { ...faulted, meta: { name: 'faulted', format: 1 } },
      { name: 'undone', sourceDigest: 'e', patches: ['#0 fault=none', '#1 fault=none'] },
    )
    assert.deepEqual(
      undone.exchanges.map((x) => [x.seq, outcomeOf(x), x.fault ?? null]),
      [
        [0, 201, null],
        [1, 200, null],
        [2, 200, null],
      ],
    )
    assert.equal(text(undone, undone.exchanges[0] as Exchange), '{"id":"s-1"}')
  })

  test('problems are TR_INVALID_PATCH before anything is applied', () => {
    const bad = (spec: string, why: RegExp) =>
      assert.throws(
        () => fork(source(), spec),
        (e: Error & { code?: string }) => e.code === 'TR_INVALID_PATCH' && why.test(e.message),
      )
    bad('#0 fault=teleport', /unknown fault "teleport"/)
    bad('#0 fault=schema_drift', /use \$\.path=JSON|\$\.path=JSON patches/)
    bad('#0 fault=server_error@418', /server_error@418: the status must be one of/)
    bad('#0 fault=none', /it has no fault to remove/)
    bad('#0 fault=stream_cut', /cuts an event stream after whole events, and this response is application\/json/)
    bad('#0 fault=response_lost@3', /response_lost takes no number/)
    assert.equal(parsePatchSpec('#4 fault=timeout@500').action.kind, 'fault')
  })

  test('diff names the fault on the exchanges a difference touches', () => {
    const b = fork(source(), '#0 fault=response_lost')
    const d = diffTraces(source(), b)
    assert.equal(d.first?.faults?.[0]?.fault, 'response_lost')
    const out = formatDiffText(d)
    assert.match(out, /fault response_lost \(rule patch-[0-9a-f]{12}, after-response\) on b #0; upstream 201/)
  })
})
