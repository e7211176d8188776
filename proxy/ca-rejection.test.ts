import assert from 'node:assert/strict'
import { test } from 'node:test'
import { caRejectionLine, oncePerHost, rejectionAlert } from './ca-rejection.ts'

test('rejectionAlert names the alerts of a client that does not trust the chain, and nothing else', () => {
  assert.equal(rejectionAlert({ code: 'ERR_SSL_TLSV1_ALERT_UNKNOWN_CA' }), 'unknown_ca')
  assert.equal(rejectionAlert({ code: 'ERR_SSL_SSL/TLS_ALERT_BAD_CERTIFICATE' }), 'bad_certificate')
  assert.equal(rejectionAlert({ code: 'ERR_SSL_SSLV3_ALERT_CERTIFICATE_UNKNOWN' }), 'certificate_unknown')
  assert.equal(rejectionAlert({ code: 'ECONNRESET' }), undefined)
  assert.equal(rejectionAlert({ code: 'ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION' }), undefined)
  assert.equal(rejectionAlert(undefined), undefined)
})

test('oncePerHost reports each host once, whatever its case', () => {
  const seen: string[] = []
  const report = oncePerHost((r) => seen.push(r.host))
  for (const host of ['api.test', 'API.test', 'other.test', 'api.test']) report({ host, cause: 'x' })
  assert.deepEqual(seen, ['api.test', 'other.test'])
})

test('oncePerHost stops reporting new hosts past its bound', () => {
  let count = 0
  const report = oncePerHost(() => count++)
  for (let i = 0; i < 5000; i++) report({ host: `h${i}.test`, cause: 'x' })
  assert.equal(count, 1024)
})

test('the line names the host, the cause and the fix per client', () => {
  const line = caRejectionLine({ host: 'api.test', cause: 'TLS alert unknown_ca' }, '/s/ca/ca.pem', '/s/ca/bundle.pem')
  assert.match(line, /certificate for api\.test \(TLS alert unknown_ca\)/)
  for (const fix of [
    'NODE_EXTRA_CA_CERTS=/s/ca/ca.pem',
    'REQUESTS_CA_BUNDLE=/s/ca/bundle.pem',
    'SSL_CERT_FILE=/s/ca/bundle.pem',
    'curl --cacert /s/ca/bundle.pem',
  ]) {
    assert.ok(line.includes(fix), fix)
  }
  assert.doesNotMatch(line, /\n/)
})
