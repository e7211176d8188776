import assert from 'node:assert/strict'
import { test } from 'node:test'
import { checkRequest, cookieToken, type GuardedRequest, policyFor } from './guard.ts'

const policy = policyFor('t0ken', '127.0.0.1', 4000)
const base: GuardedRequest = { method: 'GET', host: '127.0.0.1:4000', origin: undefined, queryToken: 't0ken', headerToken: undefined, cookie: undefined }
const refusedWith = (status: number) => (err: { code?: string; details?: { status?: number } }) =>
  err.code === 'TR_INSPECT_REFUSED' && err.details?.status === status

test("a GET with the token in the query, a header or the cookie, for the inspector's own host, passes", () => {
  checkRequest(base, policy)
  checkRequest({ ...base, host: 'localhost:4000' }, policy)
  checkRequest({ ...base, queryToken: null, headerToken: 't0ken' }, policy)
  checkRequest({ ...base, queryToken: null, cookie: 'a=b; tr_inspect=t0ken' }, policy)
})

test('a foreign or missing Host is refused before the token is looked at', () => {
  assert.throws(() => checkRequest({ ...base, host: 'evil.test:4000' }, policy), refusedWith(403))
  assert.throws(() => checkRequest({ ...base, host: '127.0.0.1:4001' }, policy), refusedWith(403))
  assert.throws(() => checkRequest({ ...base, host: undefined }, policy), refusedWith(403))
})

test('a wrong or missing token is refused', () => {
  assert.throws(() => checkRequest({ ...base, queryToken: 'nope' }, policy), refusedWith(401))
  assert.throws(() => checkRequest({ ...base, queryToken: null }, policy), refusedWith(401))
  assert.throws(() => checkRequest({ ...base, queryToken: 't0ke' }, policy), refusedWith(401))
})

test("a POST needs the page's own Origin and the token in the header: query or cookie are not enough", () => {
  const post = { ...base, method: 'POST', queryToken: null, origin: 'http://127.0.0.1:4000', headerToken: 't0ken' }
  checkRequest(post, policy)
  checkRequest({ ...post, origin: 'http://localhost:4000' }, policy)
  assert.throws(() => checkRequest({ ...post, origin: 'http://evil.test' }, policy), refusedWith(403))
  assert.throws(() => checkRequest({ ...post, origin: undefined }, policy), refusedWith(403))
  assert.throws(() => checkRequest({ ...post, headerToken: undefined, cookie: 'tr_inspect=t0ken', queryToken: 't0ken' }, policy), refusedWith(401))
})

test('cookieToken reads the inspector cookie only', () => {
  assert.equal(cookieToken('x=1; tr_inspect=abc=; y=2'), 'abc=')
  assert.equal(cookieToken('tr_inspectx=abc'), undefined)
  assert.equal(cookieToken(undefined), undefined)
})
