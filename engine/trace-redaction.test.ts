import assert from 'node:assert/strict'
import { test } from 'node:test'
import { gzipSync } from 'node:zlib'
import { type BodyRef, bodyBytes, bodyFromBytes, ErrorCodes, type Exchange, type HeaderPairs, type RecordedResponse, type Trace } from '../trace/index.ts'
import { REDACTED, Redactor } from './redaction.ts'
import { redactTrace } from './trace-redaction.ts'

const SECRET = 'SECRET-planted-7f6e5d'
const dec = new TextDecoder()

function keeper(bodies: Map<string, Uint8Array>) {
  return (bytes: Uint8Array | string): BodyRef => {
    const b = bodyFromBytes(typeof bytes === 'string' ? new TextEncoder().encode(bytes) : bytes)
    bodies.set(b.ref.digest, b.bytes)
    return b.ref
  }
}

const json: HeaderPairs = [['content-type', 'application/json']]
const response = (body: BodyRef, headers: HeaderPairs = json, trailers: HeaderPairs = []): RecordedResponse => ({
  status: 200,
  statusText: 'OK',
  headers,
  trailers,
  body,
})

/** Every body, header and URL of a trace as text, to search for what must not be there. */
function everything(t: Trace): string {
  return [JSON.stringify(t.exchanges), ...[...t.bodies.values()].map((b) => dec.decode(b))].join('\n')
}

test('every place of a trace is redacted: URL, headers, trailers, request, response, partial and upstream bodies, gzip too', () => {
  const bodies = new Map<string, Uint8Array>()
  const keep = keeper(bodies)
  const repeated = `{"password":"x","password":"${SECRET}"}`
  const x0: Exchange = {
    seq: 0,
    request: {
      method: 'POST',
      url: `https://u:${SECRET}@api.test/x?key=${SECRET}&q=1`,
      headers: [
        ['Authorization', `Bearer ${SECRET}`],
        ['content-type', 'application/json'],
        ['content-encoding', 'gzip'],
      ],
      body: keep(gzipSync(repeated)),
    },
    outcome: { kind: 'response', response: response(keep(repeated), [...json, ['set-cookie', `sid=${SECRET}; Path=/`]], [['x-api-key', SECRET]]) },
    timing: { startMs: 0, headersMs: 1 },
  }
  const x1: Exchange = {
    seq: 1,
    request: { method: 'GET', url: 'https://api.test/y', headers: [], body: null },
    outcome: { kind: 'error', error: { code: 'ECONNRESET', message: 'reset', phase: 'response-body', partial: response(keep(`{"password":"${SECRET}`)) } },
    timing: { startMs: 2, headersMs: 1 },
    fault: {
      rule: 'r',
      kind: 'response_lost',
      phase: 'after-response',
      seed: 's',
      call: 1,
      upstream: { kind: 'response', response: response(keep(String.raw`{"pa\u0073sword":"${SECRET}"}`)) },
    },
  }
  const source: Trace = { meta: { name: 't', format: 1 }, exchanges: [x0, x1], bodies }
  const before = everything(source)
  const { trace, changed } = redactTrace(source, new Redactor({ bodyPaths: ['$.password'] }))
  assert.equal(changed, 2)
  assert.equal(everything(trace).includes(SECRET), false, 'no secret is left anywhere, unredacted bodies included')
  assert.equal(everything(source), before, 'the input is not changed')
  const [r0, r1] = trace.exchanges as [Exchange, Exchange]
  assert.equal(r0.request.url, `https://u:${encodeURIComponent(REDACTED)}@api.test/x?key=${encodeURIComponent(REDACTED)}&q=1`)
  assert.deepEqual(
    r0.request.headers,
    [
      ['Authorization', REDACTED],
      ['content-type', 'application/json'],
    ],
    'stored decoded: content-encoding dropped',
  )
  assert.equal(dec.decode(bodyBytes(trace, r0.request.body as BodyRef)), '{"password":"[REDACTED]","password":"[REDACTED]"}')
  assert.ok(r1.fault?.upstream?.kind === 'response')
  assert.equal(dec.decode(bodyBytes(trace, r1.fault.upstream.response.body)), String.raw`{"pa\u0073sword":"[REDACTED]"}`)
  assert.equal(trace.bodies.size, new Set(trace.exchanges.flatMap(refs).map((r) => r.digest)).size, 'only referenced bodies are kept')
})

test('a trace with nothing to redact comes back with the same exchanges', () => {
  const bodies = new Map<string, Uint8Array>()
  const x: Exchange = {
    seq: 0,
    request: { method: 'GET', url: 'https://api.test/x', headers: [], body: null },
    outcome: { kind: 'response', response: response(keeper(bodies)('{"ok":true}')) },
    timing: { startMs: 0, headersMs: 1 },
  }
  const { trace, changed } = redactTrace({ meta: { name: 't', format: 1 }, exchanges: [x], bodies }, new Redactor({ bodyPaths: ['$.password'] }))
  assert.equal(changed, 0)
  assert.equal(trace.exchanges[0], x)
})

test('a body too big to decode and redact is refused with TR_BODY_NOT_REDACTED naming the exchange', () => {
  const bodies = new Map<string, Uint8Array>()
  const big = gzipSync(`{"password":"${SECRET}","pad":"${' '.repeat(4096)}"}`)
  const x: Exchange = {
    seq: 0,
    request: { method: 'GET', url: 'https://api.test/x', headers: [], body: null },
    outcome: { kind: 'response', response: response(keeper(bodies)(big), [...json, ['content-encoding', 'gzip']]) },
    timing: { startMs: 0, headersMs: 1 },
  }
  assert.throws(() => redactTrace({ meta: { name: 'big', format: 1 }, exchanges: [x], bodies }, new Redactor({ bodyPaths: ['$.password'] }), 1024), {
    code: ErrorCodes.BODY_NOT_REDACTED,
    message: /Failed to redact trace "big": the response body of exchange #0 decodes \(content-encoding gzip\) to more than 1024 bytes/,
  })
})

function refs(x: Exchange): BodyRef[] {
  const out: BodyRef[] = []
  if (x.request.body) out.push(x.request.body)
  for (const o of [x.outcome, x.fault?.upstream]) {
    if (o?.kind === 'response') out.push(o.response.body)
    else if (o?.error.partial) out.push(o.error.partial.body)
  }
  return out
}

test('a trace redacted once is not changed again (an import or a fork of a recording)', () => {
  const bodies = new Map<string, Uint8Array>()
  const keep = keeper(bodies)
  const x: Exchange = {
    seq: 0,
    request: {
      method: 'POST',
      url: `https://u:${SECRET}@api.test/x?key=${SECRET}&q=1`,
      headers: [
        ['authorization', `Bearer ${SECRET}`],
        ['cookie', `sid=${SECRET}`],
      ],
      body: keep(`{"password":"${SECRET}"}`),
    },
    outcome: { kind: 'response', response: response(keep('{}'), [...json, ['set-cookie', `sid=${SECRET}; Path=/`]]) },
    timing: { startMs: 0, headersMs: 1 },
  }
  const redactor = new Redactor({ bodyPaths: ['$.password'] })
  const once = redactTrace({ meta: { name: 't', format: 1 }, exchanges: [x], bodies }, redactor)
  assert.equal(once.changed, 1)
  const twice = redactTrace(once.trace, redactor)
  assert.equal(twice.changed, 0)
  assert.equal(twice.trace.exchanges[0], once.trace.exchanges[0])
})

test('a WebSocket session keeps every message payload, and its JSON text messages pass the body paths as the recorder does', async () => {
  const { realtimeTrace, weatherConversation } = await import('../e2e/fixtures/realtime-session.ts')
  const events = weatherConversation()
  events.splice(1, 0, ['client', { type: 'session.update', session: { api_key: SECRET } }])
  const t = realtimeTrace('rt', [events])
  const plain = redactTrace(t, new Redactor())
  const x = plain.trace.exchanges[0] as Exchange
  assert.equal(plain.changed, 0)
  assert.equal(x.websocket?.messages.length, events.length)
  for (const m of x.websocket?.messages ?? []) assert.deepEqual(bodyBytes(plain.trace, m.body), bodyBytes(t, m.body))
  const redacted = redactTrace(t, new Redactor({ bodyPaths: ['$.session.api_key'] }))
  assert.equal(redacted.changed, 1)
  assert.ok(!everything(redacted.trace).includes(SECRET))
  const m = (redacted.trace.exchanges[0] as Exchange).websocket?.messages[1]
  assert.equal(dec.decode(bodyBytes(redacted.trace, m?.body as BodyRef)), `{"type":"session.update","session":{"api_key":"${REDACTED}"}}`)
})
