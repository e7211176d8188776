import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { HeaderPairs } from '../trace/index.ts'
import { REDACTED, Redactor } from './redaction.ts'

const JSON_TYPE: HeaderPairs = [['content-type', 'application/json']]
const enc = new TextEncoder()
const dec = new TextDecoder()
const redact = (paths: string[], text: string, headers: HeaderPairs = JSON_TYPE) =>
  dec.decode(new Redactor({ bodyPaths: paths }).body(enc.encode(text), headers))
const R = JSON.stringify(REDACTED)

test('a repeated key is redacted at every occurrence (JSON.parse keeps the last one, other parsers the first)', () => {
  const out = redact(['$.password'], '{"password":"x","password":"SECRET"}')
  assert.equal(out, `{"password":${R},"password":${R}}`)
  assert.equal(JSON.parse(out).password, REDACTED, 'what a server reads (last key wins) is redacted')
  // Nested: the repeated key is the parent, and the path runs through both copies.
  assert.equal(
    redact(['$.user.password'], '{"user":{"password":"a"},"user":{"password":"SECRET","name":"n"}}'),
    `{"user":{"password":${R}},"user":{"password":${R},"name":"n"}}`,
  )
  // Wildcards and array members, repeated keys inside them.
  assert.equal(
    redact(['$.items[*].token'], '{"items":[{"token":"a","token":"SECRET"},{"id":1,"token":"b"}]}'),
    `{"items":[{"token":${R},"token":${R}},{"id":1,"token":${R}}]}`,
  )
})

test('keys are compared decoded: an escaped key is the same key, and the escape stays as it was', () => {
  assert.equal(redact(['$.password'], String.raw`{"pa\u0073sword":"SECRET","password":"x"}`), String.raw`{"pa\u0073sword":${R},"password":${R}}`)
  // An escaped secret value is replaced whole.
  assert.equal(redact(['$.token'], String.raw`{"token":"SE\u0043RET"}`), `{"token":${R}}`)
})

test('what a lenient server also reads: JSONC comments and trailing commas, JSON Lines, leading whitespace without a JSON type', () => {
  assert.equal(
    redact(['$.password'], '{\n  // the login\n  "password": "SECRET", /* old */ "password": "SECRET2",\n}'),
    `{\n  // the login\n  "password": ${R}, /* old */ "password": ${R},\n}`,
  )
  assert.equal(redact(['$.token'], '{"token":"a"}\n{"token":"SECRET"}\n', [['content-type', 'application/x-ndjson']]), `{"token":${R}}\n{"token":${R}}\n`)
  assert.equal(redact(['$.token'], '  \n{"token":"SECRET"}', [['content-type', 'text/plain']]), `  \n{"token":${R}}`)
})

test('a body cut short or broken half-way is redacted as far as it reads', () => {
  assert.equal(redact(['$.password'], '{"id":1,"password":"SECR'), `{"id":1,"password":${R}`)
  assert.equal(redact(['$.password'], '{"password":"SECRET", oops'), `{"password":${R}, oops`)
})

test('surgical and idempotent: other bytes stay, a redacted container swallows what is inside, an already redacted body is the same object', () => {
  const text = '{ "n": 12345678901234567890, "creds": {"key": "k", "key": "SECRET"}, "keep": 1.50 }'
  assert.equal(redact(['$.creds', '$.creds.key'], text), `{ "n": 12345678901234567890, "creds": ${R}, "keep": 1.50 }`)
  const done = enc.encode(`{"password":${R},"password":${R}}`)
  const r = new Redactor({ bodyPaths: ['$.password'] })
  assert.equal(r.body(done, JSON_TYPE), done)
  const notJson = enc.encode('password=SECRET')
  assert.equal(r.body(notJson, [['content-type', 'application/x-www-form-urlencoded']]), notJson)
})

test('nesting depth costs no stack', () => {
  const deep = `${'['.repeat(200_000)}{"password":"SECRET"}${']'.repeat(200_000)}`
  assert.equal(redact(['$.password'], deep), deep, 'not at $.password')
  const out = redact(['$[0][0][0].password'], `[[[{"password":"SECRET"}]]]`)
  assert.equal(out, `[[[{"password":${R}}]]]`)
})

test('a body path that does not parse is refused when the redactor is made, not per body', () => {
  assert.throws(() => new Redactor({ bodyPaths: ['password'] }), { code: 'TR_INVALID_OPTION' })
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

test('a redactor remembers the values it replaced, so free text stored with a trace can be scrubbed of them', () => {
  const r = new Redactor({ bodyPaths: ['$.password'] })
  r.headers([['authorization', 'Bearer sk-remembered-1234']])
  r.url('https://u:url-password@api.test/x?api_key=query-secret-99')
  r.body(new TextEncoder().encode('{"password":"body-secret-1","password":"body-secret-2"}'), [['content-type', 'application/json']])
  assert.deepEqual(r.replacedValues().sort(), ['Bearer sk-remembered-1234', 'body-secret-1', 'body-secret-2', 'query-secret-99', 'url-password'])
})

test('a credential in a WebSocket subprotocol name is redacted (OpenAI Realtime, Kubernetes, Deepgram), the other names kept', () => {
  const r = new Redactor()
  const offered: HeaderPairs = [
    ['Sec-WebSocket-Protocol', 'realtime, openai-insecure-api-key.sk-proj-SECRET1234, openai-beta.realtime-v1'],
    ['sec-websocket-protocol', 'base64url.bearer.authorization.k8s.io.ZXlKaGJHY2lPaUpT,base64.binary.k8s.io'],
    ['sec-websocket-protocol', 'token, 0123456789abcdef0123456789abcdef01234567'],
  ]
  assert.deepEqual(
    r.headers(offered).map(([, v]) => v),
    [
      `realtime, openai-insecure-api-key.${REDACTED}, openai-beta.realtime-v1`,
      `base64url.bearer.authorization.k8s.io.${REDACTED},base64.binary.k8s.io`,
      `token, ${REDACTED}`,
    ],
  )
  assert.deepEqual(r.replacedValues().sort(), ['0123456789abcdef0123456789abcdef01234567', 'ZXlKaGJHY2lPaUpT', 'sk-proj-SECRET1234'])
  const plain: HeaderPairs = [['Sec-WebSocket-Protocol', 'realtime']]
  assert.equal(r.headers(plain), plain, 'no credential: the same pairs')
  const done = r.headers(offered)
  assert.deepEqual(r.headers(done), done, 'idempotent')
})

test('a URL query is redacted whatever its spelling: case, percent-encoding, plus, tabs and fragments; plain queries are left as they are', () => {
  const r = new Redactor({ queryParams: ['Sig'] })
  const spelled = [
    'https://api.test/x?page=2&api_key=s1',
    'https://api.test/x?page=2&API_KEY=s1',
    'https://api.test/x?page=2&api%5Fkey=s1',
    'https://api.test/x?page=2&api_ke%79=s1#f',
    'https://api.test/x?page=2&api+key=1&ap\ti_key=s1',
    'https://api.test/x?page=2&ap\ni_key=s1',
    'https://api.test/x?page=2&sig=s1',
    'https://api.test/x?key=s1',
  ]
  for (const url of spelled) {
    const out = r.url(url)
    assert.ok(!out.includes('s1'), `${JSON.stringify(url)} -> ${out}`)
    assert.equal([...new URL(out).searchParams].filter(([, v]) => v === REDACTED).length, 1, out)
  }
  for (const url of ['https://api.test/x?page=2&fields=name.first', 'https://api.test/x?a=1&b=~x*y-z_#frag', 'https://api.test/x?keys=1&tokens=2']) {
    assert.equal(r.url(url), url)
  }
})
