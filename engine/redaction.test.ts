import assert from 'node:assert/strict'
import { test } from 'node:test'
import { bodyFromBytes, type Exchange } from '../trace/index.ts'
import { REDACTED, Redactor } from './redaction.ts'

test('Redactor.exchange redacts URL, request and response headers, trailers and partial responses; bodies untouched', () => {
  const body = bodyFromBytes(new TextEncoder().encode('{"token":"kept"}')).ref
  const partial = { status: 200, statusText: 'OK', headers: [['set-cookie', 'sid=abc; Path=/']] as Array<[string, string]>, trailers: [], body }
  const x: Exchange = {
    seq: 0,
    request: { method: 'GET', url: 'https://u:pw@api.test/x?key=AIza123&q=1', headers: [['Authorization', 'Bearer sk-1']], body },
    outcome: { kind: 'error', error: { code: 'ECONNRESET', message: 'reset', phase: 'response-body', partial } },
    timing: { startMs: 0, headersMs: 1 },
  }
  const r = new Redactor().exchange(x)
  assert.equal(r.request.url, `https://u:${encodeURIComponent(REDACTED)}@api.test/x?key=${encodeURIComponent(REDACTED)}&q=1`)
  assert.deepEqual(r.request.headers, [['Authorization', REDACTED]])
  assert.equal(r.outcome.kind === 'error' && r.outcome.error.partial?.headers[0]?.[1], `sid=${REDACTED}; Path=/`)
  assert.equal(r.request.body, body)
  assert.equal(x.request.headers[0]?.[1], 'Bearer sk-1', 'the input is not changed')
  const ok = new Redactor({ headers: ['x-tenant'] }).exchange({
    ...x,
    outcome: { kind: 'response', response: { ...partial, headers: [['X-Tenant', 't1']], trailers: [['x-tenant', 't2']] } },
  })
  assert.deepEqual(ok.outcome.kind === 'response' && [ok.outcome.response.headers, ok.outcome.response.trailers], [
    [['X-Tenant', REDACTED]],
    [['x-tenant', REDACTED]],
  ])
})

test('redaction changes nothing outside the redacted paths (issue 7: the store changed 12345678901234567890 and 1.50)', () => {
  const redactor = new Redactor({ bodyPaths: ['$.secret', '$.list[*].token'] })
  const text = '{"id":12345678901234567890, "secret":"x","n":1.50,"list":[{"token":"t1","k":1e3},{"token":"t2"}]}'
  const out = new TextDecoder().decode(redactor.body(new TextEncoder().encode(text), [['content-type', 'application/json']]))
  assert.equal(out, '{"id":12345678901234567890, "secret":"[REDACTED]","n":1.50,"list":[{"token":"[REDACTED]","k":1e3},{"token":"[REDACTED]"}]}')
  // The bytes outside the redacted values are exactly the original's.
  const outside = (s: string) => s.replace(/"(x|t1|t2|\[REDACTED\])"/g, '""')
  assert.equal(outside(out), outside(text))
})
