import assert from 'node:assert/strict'
import { test } from 'node:test'
import * as zlib from 'node:zlib'
import { bodyFromBytes } from './body.ts'
import { decodeContentEncoding, diffTraces, formatDiffText } from './diff.ts'
import type { Exchange, HeaderPairs, Outcome, Trace } from './exchange.ts'
import { forkTrace } from './patch.ts'

const enc = new TextEncoder()
type Item = { method?: string; url: string; reqBody?: string; status?: number; body?: string | Uint8Array; headers?: HeaderPairs; error?: string }

function trace(name: string, items: Item[]): Trace {
  const bodies = new Map<string, Uint8Array>()
  const add = (bytes: Uint8Array) => {
    const b = bodyFromBytes(bytes)
    bodies.set(b.ref.digest, b.bytes)
    return b.ref
  }
  const exchanges: Exchange[] = items.map((it, seq) => {
    const outcome: Outcome = it.error
      ? { kind: 'error', error: { code: it.error, message: it.error, phase: 'request' } }
      : {
          kind: 'response',
          response: {
            status: it.status ?? 200,
            statusText: '',
            headers: it.headers ?? [['content-type', 'application/json']],
            body: add(typeof it.body === 'string' || it.body === undefined ? enc.encode(it.body ?? '{}') : it.body),
            trailers: [],
          },
        }
    return {
      seq,
      request: {
        method: it.method ?? 'GET',
        url: it.url,
        headers: it.reqBody ? [['content-type', 'application/json']] : [],
        body: it.reqBody ? add(enc.encode(it.reqBody)) : null,
      },
      outcome,
      timing: { startMs: seq, headersMs: 1 },
    }
  })
  return { meta: { name, format: 1 }, exchanges, bodies }
}

const CRM = 'https://crm.test/customers/42'
const DECIDE = 'https://crm.test/decisions'

test('CRM story: the fork differs only where it was patched, and the diff says so (text snapshot)', () => {
  const main = trace('main', [{ url: CRM, body: '{"active":true}' }])
  const branch = forkTrace(main, { name: 'crm-inactive', sourceDigest: 'f'.repeat(64), patches: ['#0 $.active=false'] })
  const d = diffTraces(main, branch)
  assert.equal(d.equal, false)
  assert.equal(d.first?.summary, `GET ${CRM} #0 response $.active: true → false`)
  assert.equal(d.first?.kind, 'response_changed')
  assert.deepEqual(d.first?.attribution, [{ trace: 'b', seq: 0, patchId: branch.exchanges[0]?.patchId, spec: '#0 $.active=false' }])
  assert.equal(
    formatDiffText(d),
    [
      'diff a "main" (1 exchange) → b "crm-inactive" (1 exchange)',
      '1 difference: 1 response_changed',
      `first divergence: GET ${CRM} #0 response $.active: true → false [from patch ${branch.exchanges[0]?.patchId} (#0 $.active=false) on b #0]`,
      '',
      `response_changed GET ${CRM} #0 (a #0, b #0)`,
      '  response $.active: true → false',
      `  from patch ${branch.exchanges[0]?.patchId} (#0 $.active=false) on b #0`,
    ].join('\n'),
  )
  // Deterministic: same input, same bytes.
  assert.equal(formatDiffText(diffTraces(main, branch)), formatDiffText(d))
  assert.equal(formatDiffText(diffTraces(main, main)), 'diff a "main" (1 exchange) → b "main" (1 exchange)\nno differences')
})

test('request_changed, status_changed, error_changed in observation order; first divergence is the earliest', () => {
  const a = trace('a', [
    { url: CRM, body: '{"active":true}' },
    { method: 'POST', url: DECIDE, reqBody: '{"decision":"approved"}', body: '{"ok":true}' },
    { url: 'https://crm.test/health' },
  ])
  const b = trace('b', [
    { url: CRM, body: '{"active":true}', status: 500 },
    { method: 'POST', url: DECIDE, reqBody: '{"decision":"rejected"}', body: '{"ok":true}' },
    { url: 'https://crm.test/health', error: 'ECONNRESET' },
  ])
  const d = diffTraces(a, b)
  assert.deepEqual(
    d.differences.map((x) => [x.kind, x.summary]),
    [
      ['status_changed', `GET ${CRM} #0 response status: 200 → 500`],
      ['request_changed', `POST ${DECIDE} #0 request $.decision: "approved" → "rejected"`],
      ['error_changed', 'GET https://crm.test/health #0 response outcome: "200" → "error ECONNRESET during request"'],
    ],
  )
  assert.deepEqual(d.alignment, [
    { a: 0, b: 0, by: 'identity' },
    { a: 1, b: 1, by: 'method-url' },
    { a: 2, b: 2, by: 'identity' },
  ])
  assert.equal(d.version, 1)
  assert.equal(d.counts.request_changed, 1)
})

test('missing, added and order_changed; ambiguous method+URL pairs stay unmatched', () => {
  const a = trace('a', [{ url: 'https://x.test/1' }, { url: 'https://x.test/2' }, { url: 'https://x.test/3' }])
  const b = trace('b', [{ url: 'https://x.test/2' }, { url: 'https://x.test/1' }, { url: 'https://x.test/4' }])
  const d = diffTraces(a, b)
  assert.deepEqual(
    d.differences.map((x) => [x.kind, x.exchange, x.a, x.b]),
    [
      // /2 anchors (the longest in-order run); /1 moved behind it; then the tail gap: missing A first.
      ['exchange_missing', 'GET https://x.test/3 #0', 2, undefined],
      ['order_changed', 'GET https://x.test/1 #0', 0, 1],
      ['exchange_added', 'GET https://x.test/4 #0', undefined, 2],
    ],
  )
  // Two POSTs with new bodies against one: which one changed is ambiguous, so nothing is paired.
  const p = trace('p', [{ method: 'POST', url: DECIDE, reqBody: '{"n":1}' }])
  const q = trace('q', [
    { method: 'POST', url: DECIDE, reqBody: '{"n":2}' },
    { method: 'POST', url: DECIDE, reqBody: '{"n":3}' },
  ])
  assert.deepEqual(
    diffTraces(p, q).differences.map((x) => x.kind),
    ['exchange_missing', 'exchange_added', 'exchange_added'],
  )
})

test('volatile fields are ignored by default and compared when asked', () => {
  const a = trace('a', [
    {
      url: 'https://api.test/v1/chat',
      body: '{"id":"chatcmpl-Abc123def456","created":1700000000,"at":"2026-01-01T00:00:00Z","user_id":"42","text":"hi"}',
      headers: [
        ['content-type', 'application/json'],
        ['date', 'Mon'],
        ['x-request-id', 'r1'],
      ],
    },
  ])
  const b = trace('b', [
    {
      url: 'https://api.test/v1/chat',
      body: '{"id":"chatcmpl-Zyx987wvu654","created":1700000999,"at":"2026-02-02T10:00:00Z","user_id":"43","text":"hi"}',
      headers: [
        ['content-type', 'application/json'],
        ['date', 'Tue'],
        ['x-request-id', 'r2'],
      ],
    },
  ])
  assert.deepEqual(
    diffTraces(a, b).differences.flatMap((d) => d.details.map((x) => x.path)),
    ['$.user_id'],
  )
  assert.deepEqual(
    diffTraces(a, b, { volatile: false }).differences.flatMap((d) => d.details.map((x) => x.path)),
    ['date', 'x-request-id', '$.id', '$.created', '$.at', '$.user_id'],
  )
  assert.equal(diffTraces(a, b, { ignorePaths: ['$.user_id'] }).equal, true)
  assert.equal(diffTraces(a, b, { ignoreKeys: ['user_id'] }).equal, true)
})

test('encoded bodies are compared decoded (gzip, br, zstd)', () => {
  const text = '{"active":true}'
  const codings: Array<[string, (b: Buffer) => Buffer]> = [
    ['gzip', zlib.gzipSync],
    ['br', zlib.brotliCompressSync],
    ['deflate', zlib.deflateSync],
  ]
  const zstd = (zlib as unknown as { zstdCompressSync?: (b: Buffer) => Buffer }).zstdCompressSync
  if (zstd) codings.push(['zstd', zstd])
  const plain = trace('plain', [{ url: CRM, body: text }])
  for (const [coding, compress] of codings) {
    const bytes = new Uint8Array(compress(Buffer.from(text)))
    assert.equal(new TextDecoder().decode(decodeContentEncoding(bytes, coding)), text, coding)
    const zipped = trace(coding, [
      {
        url: CRM,
        body: bytes,
        headers: [
          ['content-type', 'application/json'],
          ['content-encoding', coding],
        ],
      },
    ])
    assert.equal(diffTraces(plain, zipped).equal, true, coding)
  }
  assert.equal(typeof (zlib as { zstdDecompressSync?: unknown }).zstdDecompressSync, 'function', 'this Node has zstd')
})

test('event streams are compared as events: rechunking is no difference, a changed delta is', () => {
  const h: HeaderPairs = [['content-type', 'text/event-stream']]
  const ev = (s: string) => `data: {"id":"chatcmpl-Abc123def456","choices":[{"delta":{"content":"${s}"}}]}\n\n`
  const a = trace('a', [{ method: 'POST', url: 'https://api.test/v1/chat', body: `${ev('Hel')}${ev('lo')}data: [DONE]\n\n`, headers: h }])
  const same = trace('b', [{ method: 'POST', url: 'https://api.test/v1/chat', body: `: ping\n\n${ev('Hel')}${ev('lo')}data: [DONE]\r\n\r\n`, headers: h }])
  assert.equal(diffTraces(a, same).equal, true)
  const changed = trace('c', [{ method: 'POST', url: 'https://api.test/v1/chat', body: `${ev('Hel')}${ev('p')}data: [DONE]\n\n`, headers: h }])
  assert.equal(diffTraces(a, changed).first?.summary, 'POST https://api.test/v1/chat #0 response events $[1].data.choices[0].delta.content: "lo" → "p"')
})

test('text and binary bodies', () => {
  const a = trace('a', [{ url: 'https://x.test/t', body: 'one\ntwo', headers: [['content-type', 'text/plain']] }])
  const b = trace('b', [{ url: 'https://x.test/t', body: 'one\nthree', headers: [['content-type', 'text/plain']] }])
  assert.equal(diffTraces(a, b).first?.summary, 'GET https://x.test/t #0 response line 2: "two" → "three"')
  const c = trace('c', [{ url: 'https://x.test/t', body: new Uint8Array([0xff, 0x00]), headers: [] }])
  const e = trace('e', [{ url: 'https://x.test/t', body: new Uint8Array([0xff, 0x01, 0x02]), headers: [] }])
  assert.equal(diffTraces(c, e).first?.summary, 'GET https://x.test/t #0 response body: <2 bytes> → <3 bytes>')
})

test('method + URL pairs only inside the gap the identity pairs leave', () => {
  const a = trace('a', [{ method: 'POST', url: DECIDE, reqBody: '{"n":1}' }, { url: CRM }, { method: 'POST', url: DECIDE, reqBody: '{"n":2}' }])
  const b = trace('b', [{ method: 'POST', url: DECIDE, reqBody: '{"n":9}' }, { url: CRM }, { method: 'POST', url: DECIDE, reqBody: '{"n":2}' }])
  const d = diffTraces(a, b)
  assert.deepEqual(d.alignment, [
    { a: 0, b: 0, by: 'method-url' },
    { a: 1, b: 1, by: 'identity' },
    { a: 2, b: 2, by: 'identity' },
  ])
  assert.deepEqual(
    d.differences.map((x) => x.summary),
    [`POST ${DECIDE} #0 request $.n: 1 → 9`],
  )
  // The changed POST moved past the GET: it is in another gap, so it is not paired.
  const c = trace('c', [{ url: CRM }, { method: 'POST', url: DECIDE, reqBody: '{"n":9}' }, { method: 'POST', url: DECIDE, reqBody: '{"n":2}' }])
  assert.deepEqual(
    diffTraces(a, c).differences.map((x) => [x.kind, x.a, x.b]),
    [
      ['exchange_missing', 0, undefined],
      ['exchange_added', undefined, 1],
    ],
  )
})

test('rate-limit headers (x-ratelimit-*, anthropic-ratelimit-*), accept-encoding and AWS per-call headers do not count', () => {
  const withHeaders = (name: string, n: string) => {
    const t = trace(name, [
      {
        url: 'https://api.anthropic.com/v1/messages',
        headers: [
          ['anthropic-ratelimit-requests-remaining', n],
          ['x-ratelimit-remaining-tokens', n],
        ],
      },
    ])
    const x = t.exchanges[0] as Exchange
    x.request.headers = [
      ['accept-encoding', n === '1' ? 'gzip, deflate' : 'br, gzip, deflate'],
      ['amz-sdk-invocation-id', `id-${n}`],
      ['amz-sdk-request', `attempt=${n}; max=3`],
      ['x-amz-date', `2025010${n}T000000Z`],
      ['x-amz-user-agent', `aws-sdk-js/3.${n}`],
    ]
    return t
  }
  assert.equal(diffTraces(withHeaders('a', '1'), withHeaders('b', '2')).equal, true)
  assert.equal(
    diffTraces(withHeaders('a', '1'), withHeaders('b', '2'), { volatile: false }).differences[0]?.details.some((d) => d.path === 'accept-encoding'),
    false,
  )
})
