import assert from 'node:assert/strict'
import { test } from 'node:test'
import { scanDocument } from './secret-scan.ts'
import { redactText, secretEnvValues } from './text-redaction.ts'

test('redactText replaces every shape the secret scan finds, so a scan of the result finds nothing', () => {
  const secrets = [
    'sk-proj-abcdefghijklmnop1234',
    'sk-ant-api03-abcdefghijklmnopqrst',
    'AKIAABCDEFGHIJKLMNOP',
    `ghp_${'a'.repeat(36)}`,
    `AIza${'b'.repeat(35)}`,
    'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abc',
  ]
  const text = `${secrets.map((s) => `value ${s} end`).join('\n')}\nAuthorization: Bearer abcdefghijklmnop\n-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\nhttps://user:pa55word@db.test/x`
  assert.ok(scanDocument('before', text).length >= secrets.length)
  const out = redactText(text)
  for (const s of secrets) assert.ok(!out.includes(s), s)
  assert.ok(out.includes('Bearer [REDACTED]'))
  assert.ok(!out.includes('MIIE') && !out.includes('pa55word'))
  assert.ok(out.includes('https://user:[REDACTED]@db.test/x'))
  assert.deepEqual(scanDocument('after', out), [])
})

test('values of credential-looking environment variables are redacted whatever their shape; short or ordinary ones are not', () => {
  const env = { MY_API_TOKEN: 'hunter2-but-longer', DB_PASSWORD: 'correct horse battery', HOME: '/root/some/long/path', PIN_KEY: 'short' }
  const values = secretEnvValues(env)
  assert.deepEqual(values, ['correct horse battery', 'hunter2-but-longer'])
  assert.equal(
    redactText('token=hunter2-but-longer; pw=correct horse battery; home=/root/some/long/path', values),
    'token=[REDACTED]; pw=[REDACTED]; home=/root/some/long/path',
  )
})
