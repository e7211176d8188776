import assert from 'node:assert/strict'
import { test } from 'node:test'
import { compileTarget, TargetSyntaxError } from './fault-target.ts'

test('a path glob matches the path only; * stays in one segment, ** crosses segments', () => {
  const t = compileTarget({ method: 'POST', url: '/shipments/*' })
  assert.equal(t.matches('POST', 'http://127.0.0.1:4000/shipments/s-1'), true)
  assert.equal(t.matches('post', 'https://api.test/shipments/s-1?x=1'), true)
  assert.equal(t.matches('POST', 'https://api.test/shipments/s-1/label'), false)
  assert.equal(t.matches('GET', 'https://api.test/shipments/s-1'), false)
  assert.equal(compileTarget({ url: '/v1/**' }).matches('GET', 'https://api.test/v1/a/b/c'), true)
  assert.equal(t.label, 'POST /shipments/*')
})

test('an origin glob matches scheme, host and path; the query only when the pattern has one', () => {
  const t = compileTarget({ url: 'https://API.test/v1/*' })
  assert.equal(t.matches('GET', 'https://api.test/v1/users?page=2'), true)
  assert.equal(t.matches('GET', 'http://api.test/v1/users'), false)
  assert.equal(t.matches('GET', 'https://api.test:443/v1/users'), true)
  const any = compileTarget({ url: '**/shipments' })
  assert.equal(any.matches('POST', 'http://127.0.0.1:5555/shipments'), true)
  assert.equal(any.matches('POST', 'http://127.0.0.1:5555/shipments/x'), false)
  const q = compileTarget({ url: '/search?q=*' })
  assert.equal(q.matches('GET', 'https://a.test/search?q=cats'), true)
  assert.equal(q.matches('GET', 'https://a.test/search'), false)
})

test('a /regex/ is tested against the whole URL; a broken one is a syntax error', () => {
  const t = compileTarget({ method: ['PUT', 'PATCH'], url: '/\\/users\\/\\d+$/i' })
  assert.equal(t.matches('PATCH', 'https://a.test/USERS/42'), true)
  assert.equal(t.matches('POST', 'https://a.test/users/42'), false)
  assert.throws(() => compileTarget({ url: '/(/' }), TargetSyntaxError)
  assert.throws(() => compileTarget({ url: 'shipments' }), /must start with/)
  // A path with a trailing slash stays a path; a flag or a regex character makes it a regex.
  assert.equal(compileTarget({ url: '/v1/models/' }).matches('GET', 'https://a.test/v1/models/'), true)
  assert.equal(compileTarget({ url: '/v1/models/' }).matches('GET', 'https://a.test/x/v1/models/y'), false)
  assert.equal(compileTarget({ url: '/v1/models/i' }).matches('GET', 'https://a.test/x/V1/MODELS/y'), true)
})

test('a host matches the host name, one label per *, and the port when it names one', () => {
  assert.equal(compileTarget({ host: '*.openai.com' }).matches('GET', 'https://api.openai.com/v1/x'), true)
  assert.equal(compileTarget({ host: '*.openai.com' }).matches('GET', 'https://a.b.openai.com/v1/x'), false)
  assert.equal(compileTarget({ host: '127.0.0.1:8080' }).matches('GET', 'http://127.0.0.1:8080/'), true)
  assert.equal(compileTarget({ host: '127.0.0.1:8080' }).matches('GET', 'http://127.0.0.1:8081/'), false)
  assert.equal(compileTarget({ host: 'api.test:443' }).matches('GET', 'https://api.test/'), true)
  assert.throws(() => compileTarget({ host: 'https://api.test' }), /host name/)
})
