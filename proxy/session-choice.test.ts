import assert from 'node:assert/strict'
import { test } from 'node:test'
import { ErrorCodes } from '../trace/index.ts'
import { assertSessionName, basicCredentialUser, SESSION_HEADER, sessionNameFrom, takeSessionChoice } from './session-choice.ts'

const basic = (credentials: string) => `Basic ${Buffer.from(credentials).toString('base64')}`

test('the session header wins over proxy credentials, and is taken out of the request', () => {
  const req = { rawHeaders: ['Host', 'a.test', 'X-Tool-Replay-Session', ' checkout ', 'Proxy-Authorization', basic('other:'), 'accept', '*/*'] }
  assert.equal(takeSessionChoice(req), 'checkout')
  assert.deepEqual(req.rawHeaders, ['Host', 'a.test', 'Proxy-Authorization', basic('other:'), 'accept', '*/*'])
  // Taken once: asking again finds only the credentials.
  assert.equal(takeSessionChoice(req), 'other')
})

test('proxy credentials name the session (user part; password ignored); no choice without either', () => {
  assert.equal(takeSessionChoice({ rawHeaders: ['proxy-authorization', basic('worker-1:ignored')] }), 'worker-1')
  assert.equal(takeSessionChoice({ rawHeaders: ['proxy-authorization', basic('worker-1')] }), 'worker-1')
  assert.equal(takeSessionChoice({ rawHeaders: ['proxy-authorization', 'Bearer abc'] }), undefined)
  assert.equal(takeSessionChoice({ rawHeaders: ['proxy-authorization', basic(':only-password')] }), undefined)
  assert.equal(takeSessionChoice({ rawHeaders: ['host', 'a.test'] }), undefined)
  // Every copy of the header goes, the first one chooses.
  const twice = { rawHeaders: [SESSION_HEADER, 'a', SESSION_HEADER, 'b'] }
  assert.equal(takeSessionChoice(twice), 'a')
  assert.deepEqual(twice.rawHeaders, [])
})

test('basicCredentialUser: what clients send for http://NAME@host:port', () => {
  // curl, undici ProxyAgent and Python requests all send base64("NAME:") for a URL without a password.
  assert.equal(basicCredentialUser(`Basic ${Buffer.from('w3:').toString('base64')}`), 'w3')
  assert.equal(basicCredentialUser('basic   dzM6'), 'w3')
  assert.equal(basicCredentialUser('Digest x'), undefined)
})

test('session names: URL-safe, checked with a message that says what to use', () => {
  for (const ok of ['checkout', 'a', 'worker-1', 'e2e.crm_2']) assertSessionName(ok)
  for (const bad of ['', '-x', 'a b', 'a:b', 'a/b', 'x'.repeat(129), 7]) {
    assert.throws(
      () => assertSessionName(bad),
      (err: Error & { code?: string }) => err.code === ErrorCodes.INVALID_OPTION && /Invalid session name .*http:\/\/NAME:x@host:port/.test(err.message),
    )
  }
  assert.equal(sessionNameFrom('group:checkout.test'), 'group-checkout.test')
  assert.equal(sessionNameFrom('..//'), 'session')
  assertSessionName(sessionNameFrom(`é${'x'.repeat(300)}`))
})
