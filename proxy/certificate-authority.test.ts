import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { X509Certificate } from 'node:crypto'
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { caCertPath, loadCertificateAuthority } from './index.ts'

const dirs: string[] = []
const tmp = () => {
  const dir = mkdtempSync(join(tmpdir(), 'tr-ca-'))
  dirs.push(dir)
  return dir
}
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

test('the CA is ECDSA P-256, made once, kept in <store>/ca with the key at 0600', async () => {
  const dir = tmp()
  const [a, b] = await Promise.all([loadCertificateAuthority(dir), loadCertificateAuthority(dir)])
  assert.equal(a.certPem, b.certPem, 'concurrent first use must agree on one CA')
  assert.equal(a.certPath, caCertPath(dir))
  assert.equal(statSync(join(dir, 'ca', 'ca-key.pem')).mode & 0o777, 0o600)
  const cert = new X509Certificate(a.certPem)
  assert.ok(cert.ca)
  assert.equal(cert.publicKey.asymmetricKeyDetails?.namedCurve, 'prime256v1')
  assert.equal((await loadCertificateAuthority(dir)).certPem, a.certPem, 'reloads the same CA')
})

test('leaf certificates: SAN dNSName or iPAddress, serverAuth, signed by the CA, valid for openssl -x509_strict', async () => {
  const dir = tmp()
  const ca = await loadCertificateAuthority(dir)
  const root = new X509Certificate(ca.certPem)
  for (const host of ['api.test', '127.0.0.1', '::1', `${'a'.repeat(70)}.test`]) {
    const { cert } = await ca.issueLeaf(host)
    const leaf = new X509Certificate(cert)
    assert.ok(leaf.verify(root.publicKey), `${host}: signature`)
    assert.ok(leaf.checkIssued(root))
    assert.equal(leaf.ca, false)
    if (host.includes(':') || /^\d/.test(host)) assert.equal(leaf.checkIP(host), host)
    else assert.equal(leaf.checkHost(host), host)
    assert.deepEqual(leaf.keyUsage, ['1.3.6.1.5.5.7.3.1'])
    const file = join(dir, 'leaf.pem')
    writeFileSync(file, cert)
    const out = execFileSync('openssl', ['verify', '-x509_strict', '-purpose', 'sslserver', '-CAfile', ca.certPath, file], { encoding: 'utf8' })
    assert.match(out, /: OK/)
  }
})

test('concurrent handshakes for a new host share one pending leaf', async () => {
  const ca = await loadCertificateAuthority(tmp())
  const contexts = await Promise.all(Array.from({ length: 20 }, () => ca.secureContextFor('shared.test')))
  assert.ok(contexts.every((c) => c === contexts[0]))
  assert.equal(ca.leafCount, 1)
  assert.equal(await ca.secureContextFor('SHARED.test'), contexts[0], 'host names are case-insensitive')
})

test('an unusable CA directory is TR_PROXY_START_FAILED naming the directory', async () => {
  const file = join(tmp(), 'not-a-dir')
  writeFileSync(file, 'x')
  await assert.rejects(loadCertificateAuthority(file), (err: Error & { code?: string }) => {
    assert.equal(err.code, 'TR_PROXY_START_FAILED')
    assert.match(err.message, /Failed to load or create the proxy CA in .*not-a-dir\/ca/)
    return true
  })
})
