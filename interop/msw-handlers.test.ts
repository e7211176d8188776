import assert from 'node:assert/strict'
import { test } from 'node:test'
import { type BodyRef, bodyFromBytes, ErrorCodes, type Exchange, isToolReplayError, type Trace } from '../trace/index.ts'
import { mswHandlersFromTrace } from './msw-handlers.ts'

const enc = new TextEncoder()

function traceOf(responses: Array<{ method?: string; url: string; status: number; headers?: Array<[string, string]>; body?: string }>): Trace {
  const bodies = new Map<string, Uint8Array>()
  const keep = (text: string): BodyRef => {
    const b = bodyFromBytes(enc.encode(text))
    bodies.set(b.ref.digest, b.bytes)
    return b.ref
  }
  const exchanges: Exchange[] = responses.map((r, seq) => ({
    seq,
    request: { method: r.method ?? 'GET', url: r.url, headers: [], body: null },
    outcome: { kind: 'response', response: { status: r.status, statusText: '', headers: r.headers ?? [], trailers: [], body: keep(r.body ?? '') } },
    timing: { startMs: seq, headersMs: 1 },
  }))
  return { meta: { name: 'unit', format: 1 }, exchanges, bodies }
}

test('paths MSW would read as patterns become anchored RegExps; plain paths stay strings', () => {
  const src = mswHandlersFromTrace(
    traceOf([
      { url: 'https://api.test/v1/models/gemini:generate?x=1', status: 200, body: 'a' },
      { url: 'https://api.test/v1/items', status: 200, body: 'b' },
      { url: 'https://api.test/v1/items', status: 200, body: 'c' },
    ]),
  )
  assert.match(src, /http\.get\(new RegExp\("\^https:\\\\\/\\\\\/api\\\\\.test\\\\\/v1\\\\\/models\\\\\/gemini:generate\$"\)/)
  // One handler per path; the repeated request is one recording with two answers, in order.
  assert.equal(src.match(/http\.get\("https:\/\/api\.test\/v1\/items"/g)?.length, 1)
  assert.match(src, /new HttpResponse\("b".*\/\* #1 \*\/,\n\s+\(\) => new HttpResponse\("c"/)
})

test('hop-by-hop headers are dropped, 204 and HEAD answers have no body, odd methods use http.all with a method check', () => {
  const src = mswHandlersFromTrace(
    traceOf([
      {
        url: 'https://api.test/a',
        status: 200,
        headers: [
          ['Transfer-Encoding', 'chunked'],
          ['x-kept', '1'],
          ['Connection', 'keep-alive'],
        ],
        body: 'x',
      },
      { method: 'DELETE', url: 'https://api.test/b', status: 204, body: '' },
      { method: 'HEAD', url: 'https://api.test/c', status: 200, headers: [['content-length', '5']], body: 'hello' },
      { method: 'PROPFIND', url: 'https://api.test/d', status: 207, body: '<multistatus/>' },
    ]),
  )
  assert.match(src, /headers: \[\["x-kept", "1"\]\]/)
  assert.doesNotMatch(src, /Transfer-Encoding|Connection/)
  assert.match(src, /new HttpResponse\(null, \{ status: 204/)
  assert.match(src, /new HttpResponse\(null, \{ status: 200, statusText: "", headers: \[\["content-length", "5"\]\]/)
  assert.match(src, /http\.all\("https:\/\/api\.test\/d", replay\("PROPFIND"/)
})

test('what a fetch Response cannot carry, or too many body bytes, is TR_EXPORT_UNSUPPORTED naming the exchange', () => {
  assert.throws(
    () => mswHandlersFromTrace(traceOf([{ url: 'https://api.test/ws', status: 101 }])),
    (err: unknown) => isToolReplayError(err, ErrorCodes.EXPORT_UNSUPPORTED) && /exchange #0 \(GET https:\/\/api\.test\/ws\) has status 101/.test(err.message),
  )
  assert.throws(
    () => mswHandlersFromTrace(traceOf([{ url: 'https://api.test/big', status: 200, body: 'x'.repeat(100) }]), { maxBodyBytes: 99 }),
    (err: unknown) => isToolReplayError(err, ErrorCodes.EXPORT_UNSUPPORTED) && /larger than the limit/.test(err.message),
  )
})
