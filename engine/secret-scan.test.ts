import assert from 'node:assert/strict'
import { test } from 'node:test'
import { brotliCompressSync, gzipSync } from 'node:zlib'
import { bodyFromBytes, type Exchange, type HeaderPairs, type Trace } from '../trace/index.ts'
import { maskSecret, scanDocument, scanTrace } from './secret-scan.ts'

const OPENAI = 'sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8t'
const ANTHROPIC = 'sk-ant-api03-Zy8xWv5uTs2rQp9o'
const AWS = 'AKIAIOSFODNN7EXAMPLE'
const JWT = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U'
const PEM = '-----BEGIN RSA PRIVATE KEY-----\nMIIEow...\n-----END RSA PRIVATE KEY-----'

/** A one-exchange trace; bodies given as raw bytes with their headers. */
function trace(o: {
  url?: string
  reqHeaders?: HeaderPairs
  reqBody?: Uint8Array
  resHeaders?: HeaderPairs
  resBody?: Uint8Array
  trailers?: HeaderPairs
}): Trace {
  const bodies = new Map<string, Uint8Array>()
  const keep = (bytes: Uint8Array) => {
    const b = bodyFromBytes(bytes)
    bodies.set(b.ref.digest, b.bytes)
    return b.ref
  }
  const x: Exchange = {
    seq: 0,
    request: { method: 'POST', url: o.url ?? 'https://api.test/v1', headers: o.reqHeaders ?? [], body: o.reqBody ? keep(o.reqBody) : null },
    outcome: {
      kind: 'response',
      response: { status: 200, statusText: 'OK', headers: o.resHeaders ?? [], trailers: o.trailers ?? [], body: keep(o.resBody ?? new Uint8Array()) },
    },
    timing: { startMs: 0, headersMs: 1 },
  }
  return { meta: { name: 't', format: 1 }, exchanges: [x], bodies }
}

const where = (t: Trace, options = {}) => scanTrace(t, options).map((f) => `${f.side} ${f.where}: ${f.kind}`)

test('credential shapes are found anywhere, with where they are and a masked preview', () => {
  const t = trace({
    url: `https://api.test/v1?note=${AWS}`,
    reqHeaders: [['x-debug', `Bearer ${JWT}`]],
    reqBody: Buffer.from(JSON.stringify({ messages: [{ content: `my key is ${OPENAI}` }], nested: { k: ANTHROPIC } })),
    resHeaders: [['content-type', 'text/plain']],
    resBody: Buffer.from(`line one\n${PEM}\n`),
  })
  const found = scanTrace(t)
  assert.deepEqual(
    found.map((f) => `${f.side} ${f.where}: ${f.kind}`),
    [
      'request url: aws-access-key',
      'request header x-debug: jwt',
      'request body $.messages[0].content: openai-key',
      'request body $.nested.k: anthropic-key',
      'response body at offset 9: private-key',
    ],
  )
  assert.equal(found[2]?.preview, `sk-pro…8t (${OPENAI.length} chars)`)
  assert.ok(found.every((f) => f.trace === 't' && f.seq === 0))
  for (const f of found) for (const s of [OPENAI, ANTHROPIC, AWS, JWT]) assert.ok(!f.preview.includes(s.slice(4, 16)), 'previews never hold the secret')
})

test('compressed bodies are searched decoded (gzip, br), escaped JSON strings too', () => {
  const json = Buffer.from(`{"token":"${OPENAI.replace('-', '\\u002d')}"}`)
  for (const [coding, bytes] of [
    ['gzip', gzipSync(json)],
    ['br', brotliCompressSync(json)],
  ] as const) {
    assert.deepEqual(where(trace({ reqHeaders: [['content-encoding', coding]], reqBody: bytes })), ['request body $.token: openai-key'], coding)
  }
  // An event stream: the event that holds it.
  const sse = Buffer.from(`data: {"a":1}\n\ndata: {"b":"${OPENAI}"}\n\n`)
  assert.deepEqual(where(trace({ resHeaders: [['content-type', 'text/event-stream']], resBody: sse })), ['response body event #1: openai-key'])
})

test('redacted-by-default headers, query parameters and configured body paths must hold [REDACTED]', () => {
  const redacted = trace({
    url: 'https://u:%5BREDACTED%5D@api.test/v1?api_key=%5BREDACTED%5D&page=2',
    reqHeaders: [
      ['Authorization', '[REDACTED]'],
      ['cookie', '[REDACTED]'],
      ['sec-websocket-protocol', 'realtime, openai-insecure-api-key.[REDACTED]'],
    ],
    reqBody: Buffer.from('{"api_key":"[REDACTED]"}'),
    resHeaders: [['set-cookie', 'sid=[REDACTED]; Path=/; HttpOnly']],
  })
  assert.deepEqual(where(redacted, { redaction: { bodyPaths: ['$.api_key'] } }), [])
  const leaked = trace({
    url: 'https://u:hunter2@api.test/v1?api_key=plainvalue&Token=abc',
    reqHeaders: [
      ['Authorization', 'Basic dXNlcjpwYXNz'],
      ['x-tenant-secret', 'tenant-7'],
      ['sec-websocket-protocol', 'token, 0123456789abcdef0123456789abcdef01234567'],
    ],
    reqBody: Buffer.from('{"api_key":"not-a-known-shape"}'),
    resHeaders: [['set-cookie', 'sid=abc123; Path=/']],
  })
  assert.deepEqual(where(leaked, { redaction: { headers: ['X-Tenant-Secret'], bodyPaths: ['$.api_key'] } }), [
    'request url: url-password',
    'request url query api_key: unredacted-query',
    'request url query Token: unredacted-query',
    'request header authorization: unredacted-header',
    'request header x-tenant-secret: unredacted-header',
    'request header sec-websocket-protocol: unredacted-header',
    'request body $.api_key: unredacted-body-path',
    'response header set-cookie: unredacted-header',
  ])
})

test('ordinary API traffic is not reported (ids, fingerprints, base64 images, the word Bearer)', () => {
  const t = trace({
    reqBody: Buffer.from(JSON.stringify({ model: 'gpt-4o', task: 'desk-lamp-inventory-2024-list', note: 'use a Bearer token' })),
    resHeaders: [
      ['content-type', 'application/json'],
      ['x-request-id', 'req_8c1f7a6e2b3d4c5e6f7a8b9c0d1e2f3a'],
      ['www-authenticate', 'Bearer realm="api"'],
    ],
    resBody: Buffer.from(
      JSON.stringify({ id: 'chatcmpl-AbCdEf1234567890XyZ', system_fingerprint: 'fp_44709d6fcb', image: Buffer.alloc(300, 7).toString('base64') }),
    ),
  })
  assert.deepEqual(scanTrace(t), [])
})

test('documents that are not traces: a case manifest or test file', () => {
  assert.deepEqual(
    scanDocument('manifest.json', JSON.stringify({ expect: { json: { key: OPENAI } } })).map((f) => f.where),
    ['$.expect.json.key'],
  )
  assert.deepEqual(
    scanDocument('case.test.ts', `const k = "${AWS}"`).map((f) => `${f.where} ${f.kind}`),
    ['text aws-access-key'],
  )
  assert.equal(maskSecret('short'), 'sh… (5 chars)')
})

test('scan reads raw JSON text: every occurrence of a repeated key, an escaped key, a comment, JSON cut short or broken', () => {
  const paths = { redaction: { bodyPaths: ['$.password'] } }
  const body = (text: string, type = 'application/json') => where(trace({ resHeaders: [['content-type', type]], resBody: Buffer.from(text) }), paths)
  // JSON.parse keeps the last key: a secret in the first (or the last) of two is found either way.
  assert.deepEqual(body('{"password":"SECRET","password":"[REDACTED]"}'), ['response body $.password: unredacted-body-path'])
  assert.deepEqual(body('{"password":"[REDACTED]","password":"SECRET"}'), ['response body $.password (repeated key, occurrence 2): unredacted-body-path'])
  assert.deepEqual(body(String.raw`{"password":"[REDACTED]","pa\u0073sword":"SECRET"}`), [
    'response body $.password (repeated key, occurrence 2): unredacted-body-path',
  ])
  // A comment is no field, but it is on disk: a configured key written in it, or a credential's shape.
  assert.deepEqual(body(`{"password":"[REDACTED]" /* "password": "SECRET" */, "a": 1 // ${OPENAI}\n}`), [
    'response body comment at offset 25: "password": unredacted-body-path',
    'response body comment at offset 60: openai-key',
  ])
  assert.deepEqual(body('{"id":1,"password":"SECR'), ['response body $.password: unredacted-body-path'], 'cut short')
  assert.deepEqual(body('{"id":1} trailing "password": "SECRET"', 'text/plain'), ['response body after offset 9: "password": unredacted-body-path'], 'broken')
  // A raw tab in a string is not JSON, but a lenient reader reads on: the key is reported once, by its path.
  assert.deepEqual(body('{"note":"a\tb","password":"SECRET"}'), ['response body $.password: unredacted-body-path'])
  assert.deepEqual(body('{"password":"a"}\n{"password":"SECRET"}', 'application/x-ndjson'), [
    'response body $.password: unredacted-body-path',
    'response body value #2 $.password: unredacted-body-path',
  ])
  // An escaped credential in a key or a value, in a repeated key: found decoded.
  const escaped = OPENAI.replace('-', '\\u002d')
  assert.deepEqual(body(`{"note":"a","note":"${escaped}","${escaped}":1}`, 'text/plain'), ['response body $.note: openai-key', 'response body $: openai-key'])
})

test('a faulted exchange: what the upstream really answered is scanned too', () => {
  const t = trace({})
  const leaked = bodyFromBytes(Buffer.from(JSON.stringify({ token: OPENAI })))
  t.bodies.set(leaked.ref.digest, leaked.bytes)
  const x = t.exchanges[0] as Exchange
  x.fault = {
    rule: 'r',
    kind: 'server_error',
    phase: 'after-response',
    seed: 's',
    call: 1,
    upstream: { kind: 'response', response: { status: 200, statusText: 'OK', headers: [['x-api-key', 'k-1']], trailers: [], body: leaked.ref } },
  }
  assert.deepEqual(where(t), ['response upstream header x-api-key: unredacted-header', 'response upstream body $.token: openai-key'])
})

test('a script that opens with comments is text, not JSON: found once, where the text is', () => {
  assert.deepEqual(
    scanDocument('case.test.mjs', `// Generated by emit-test\n// key: ${OPENAI}\nimport { test } from 'node:test'\n`).map((f) => `${f.where} ${f.kind}`),
    ['text openai-key'],
  )
})
