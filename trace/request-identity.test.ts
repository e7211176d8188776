import assert from 'node:assert/strict'
import { test } from 'node:test'
import { sha256 } from './digest.ts'
import { canonicalJson } from './json-codec.ts'
import { computeIdentity, describeIdentityDifferences, normalizeUrl } from './request-identity.ts'

const enc = new TextEncoder()
const req = (url: string, body: unknown = null, headers: Array<[string, string]> = []) => ({
  method: 'post',
  url,
  headers: body === null ? headers : ([['Content-Type', 'application/json'], ...headers] as Array<[string, string]>),
  body: body === null ? null : enc.encode(typeof body === 'string' ? body : JSON.stringify(body)),
})

test('URL normalization: lowercase scheme and host, default port, sorted query, no fragment', () => {
  assert.equal(normalizeUrl('HTTPS://API.Example.TEST:443/p/Q?b=2&a=1&a=0#x'), 'https://api.example.test/p/Q?a=1&a=0&b=2')
  assert.equal(normalizeUrl('http://h.test:80/'), 'http://h.test/')
  assert.equal(normalizeUrl('http://h.test:8080/?x=1&_=9', ['_']), 'http://h.test:8080/?x=1')
})

test('a URL without a query or fragment, or with a query already in order, normalizes as one with them emptied and the query sorted; every identity key is the SHA-256 of the canonical parts', () => {
  const emptied = (url: string) => {
    const u = new URL(url)
    u.hash = ''
    u.search = new URLSearchParams([...u.searchParams].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))).toString()
    return u.toString()
  }
  const urls = [
    'HTTP://H.TEST:80',
    'https://H.test:443/a/./b/../c',
    'http://h.test/%7euser/with space/é',
    'http://xn--bcher-kva.test/p',
    'http://bücher.test/p',
    'http://h.test/p?',
    'http://h.test/p#',
    'http://h.test/p?#',
    'http://h.test/p?b=2&a=1#f',
    'http://user:pw@h.test:8080/p',
    'http://h.test/p\tq',
    // Queries the fast path takes (in order, plain characters) and the ones next to them it must leave alone.
    'http://h.test/v1/users/7?fields=name',
    'http://h.test/p?a=1&a=0&b=&c.d-e_f*=x.Y-9',
    'http://h.test/p?a=1&A=0',
    'http://h.test/p?b=1&a=2',
    'http://h.test/p?a=1&b',
    'http://h.test/p?a',
    'http://h.test/p?a=1&&b=2',
    'http://h.test/p?a=%7E&b=~',
    'http://h.test/p?%7e=1',
    'http://h.test/p?a=x+y&b=x%20y',
    'http://h.test/p?a=1;b=2',
    'http://h.test/p?a=1=2',
    'http://h.test/p?=1',
    'http://h.test/p?a=é',
    'http://h.test/p?a=1#b=2',
  ]
  for (const url of urls) assert.equal(normalizeUrl(url), emptied(url), url)
  const bodies: Array<[string, Uint8Array | null]> = [
    ['application/json', enc.encode('{"z":[1,{"b":"\u00e9","a":null}],"a":1.50,"m":"\ud800"}')],
    ['application/x-www-form-urlencoded', enc.encode('b=2&a=1')],
    ['multipart/form-data; boundary=XyZ', enc.encode('--XyZ\r\n\r\nv\r\n--XyZ--')],
    ['application/octet-stream', new Uint8Array([0, 255])],
    ['text/plain', null],
  ]
  for (const [type, body] of bodies) {
    const { key, parts } = computeIdentity({
      method: 'Post',
      url: 'http://h.test/p?q="1"',
      headers: [
        ['Content-Type', type],
        ['X-Weird', 'é"\\'],
      ],
      body,
    })
    assert.equal(key, sha256(canonicalJson(parts)), type)
  }
})

test('JSON bodies are canonicalized: key order and whitespace do not matter', () => {
  const a = computeIdentity(req('https://a.test/x', '{"b":1,"a":[1,2]}'))
  const b = computeIdentity(req('https://a.test/x', '{ "a": [1, 2],\n "b": 1 }'))
  assert.equal(a.key, b.key)
  assert.notEqual(a.key, computeIdentity(req('https://a.test/x', '{"b":1,"a":[2,1]}')).key)
})

test('only content-type takes part by default; volatile headers never do', () => {
  const base = computeIdentity(req('https://a.test/x', { q: 1 }))
  const noisy = computeIdentity(
    req('https://a.test/x', { q: 1 }, [
      ['x-stainless-retry-count', '3'],
      ['traceparent', 'abc'],
      ['idempotency-key', 'k'],
      ['x-custom', '1'],
    ]),
  )
  assert.equal(base.key, noisy.key)
  const included = computeIdentity(
    req('https://a.test/x', { q: 1 }, [
      ['x-custom', '1'],
      ['user-agent', 'u'],
    ]),
    { includeHeaders: ['content-type', 'x-custom', 'user-agent'] },
  )
  assert.deepEqual(included.parts.headers, [
    ['content-type', 'application/json'],
    ['x-custom', '1'],
  ])
})

test('custom identity functions win', () => {
  const a = computeIdentity(req('https://a.test/x?v=1'), { custom: (r) => new URL(r.url).pathname })
  const b = computeIdentity(req('https://a.test/x?v=2'), { custom: (r) => new URL(r.url).pathname })
  assert.equal(a.key, b.key)
})

test('differences name path, query key, body JSON path and header', () => {
  const a = computeIdentity(req('https://a.test/x?page=1', { m: [{ c: 'hi' }] }, [['x-t', 'a']]), { includeHeaders: ['content-type', 'x-t'] })
  const b = computeIdentity(req('https://a.test/y?page=2&extra=1', { m: [{ c: 'ho' }] }, [['x-t', 'b']]), { includeHeaders: ['content-type', 'x-t'] })
  assert.deepEqual(describeIdentityDifferences(a.parts, b.parts, 10), [
    'path /x → /y',
    'query key "extra" added (1)',
    'query key "page": 1 → 2',
    'header x-t: a → b',
    'body $.m[0].c: "hi" → "ho"',
  ])
})

test('long values that share a beginning are shown from just before their first difference', () => {
  const prompt = 'Compute ((12 + 7) * 3) * 10 with the calculator, one step at a time.'
  const a = computeIdentity(req('https://a.test/x', { input: prompt, model: 'm' }))
  const b = computeIdentity(req('https://a.test/x', { input: `${prompt} (asked differently)`, model: 'x'.repeat(80) }))
  assert.deepEqual(describeIdentityDifferences(a.parts, b.parts, 10), [
    'body $.input: ... one step at a time." → ... one step at a time. (asked differently)"',
    `body $.model: "m" → "${'x'.repeat(56)}...`,
  ])
})

test('non-JSON bodies are fingerprinted by hash', () => {
  const bin = {
    method: 'PUT',
    url: 'https://a.test/b',
    headers: [['content-type', 'application/octet-stream']] as Array<[string, string]>,
    body: new Uint8Array([1, 2, 3]),
  }
  const id = computeIdentity(bin)
  assert.equal(id.parts.body.kind, 'bytes')
  assert.notEqual(id.key, computeIdentity({ ...bin, body: new Uint8Array([1, 2, 4]) }).key)
})

test('integers past 2^53 keep every digit; ordinary numbers stay canonical', () => {
  const a = computeIdentity(req('https://a.test/x', '{"id":12345678901234567890}'))
  const b = computeIdentity(req('https://a.test/x', '{"id":12345678901234567891}'))
  assert.notEqual(a.key, b.key)
  assert.equal(computeIdentity(req('https://a.test/x', '{"n":1.0,"m":1e2}')).key, computeIdentity(req('https://a.test/x', '{"n":1,"m":100}')).key)
})

test('SigV4 and AWS SDK per-call headers never take part, even when included; x-amz-content-sha256 only when it is not the body digest', () => {
  const body = new TextEncoder().encode('{"messages":[]}')
  const req = (headers: Array<[string, string]>) => ({ method: 'POST', url: 'https://bedrock-runtime.us-east-1.amazonaws.com/model/m/converse', headers, body })
  const options = { includeHeaders: ['content-type', 'x-amz-date', 'x-amz-security-token', 'amz-sdk-invocation-id', 'amz-sdk-request', 'x-amz-content-sha256'] }
  const a = computeIdentity(
    req([
      ['x-amz-date', '20250101T000000Z'],
      ['x-amz-security-token', 'A'],
      ['amz-sdk-invocation-id', '1'],
      ['amz-sdk-request', 'attempt=1; max=3'],
      ['x-amz-content-sha256', sha256(body)],
    ]),
    options,
  )
  const b = computeIdentity(
    req([
      ['x-amz-date', '20250102T000000Z'],
      ['x-amz-security-token', 'B'],
      ['amz-sdk-invocation-id', '2'],
      ['amz-sdk-request', 'attempt=2; max=3'],
      ['x-amz-content-sha256', '[REDACTED]'],
    ]),
    options,
  )
  assert.equal(a.key, b.key)
  assert.deepEqual(a.parts.headers, [])
  const unsigned = computeIdentity(req([['x-amz-content-sha256', 'UNSIGNED-PAYLOAD']]), options)
  assert.deepEqual(unsigned.parts.headers, [['x-amz-content-sha256', 'UNSIGNED-PAYLOAD']])
})
