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

test('SigV4: the signature, session token, date and a body digest are redacted; a payload mode is kept', () => {
  const r = new Redactor()
  const signed: Array<[string, string]> = [
    ['Authorization', 'AWS4-HMAC-SHA256 Credential=ASIAEXAMPLE/20250101/us-east-1/bedrock/aws4_request, SignedHeaders=host, Signature=abc'],
    ['X-Amz-Security-Token', 'IQoJb3JpZ2luX2VjEXAMPLE'],
    ['X-Amz-Date', '20250101T000000Z'],
    ['x-amz-content-sha256', 'd270059894f4c87afbc64a39479af6f61ddc2ec667ca6121941f48e21423cb5d'],
    ['amz-sdk-request', 'attempt=1; max=3'],
  ]
  assert.deepEqual(
    r.headers(signed).map(([, v]) => v),
    [REDACTED, REDACTED, REDACTED, REDACTED, 'attempt=1; max=3'],
  )
  assert.deepEqual(r.headers([['x-amz-content-sha256', 'UNSIGNED-PAYLOAD']]), [['x-amz-content-sha256', 'UNSIGNED-PAYLOAD']])
})
