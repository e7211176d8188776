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
