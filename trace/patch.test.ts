import assert from 'node:assert/strict'
import { test } from 'node:test'
import { gzipSync } from 'node:zlib'
import { bodyBytes, bodyFromBytes } from './body.ts'
import { ErrorCodes, ToolReplayError } from './errors.ts'
import type { Exchange, HeaderPairs, Trace } from './exchange.ts'
import { headerValue } from './header-pairs.ts'
import { canonicalJson } from './json-codec.ts'
import { canonicalPatchSpec, exchangeLabel, forkTrace, forkTraceWithNotes, parsePatchSpec, patchId, resolvePatches, resolvePatchFile } from './patch.ts'

const enc = new TextEncoder()

function trace(name: string, items: Array<{ method?: string; url: string; status?: number; body?: string | Uint8Array; headers?: HeaderPairs }>): Trace {
  const bodies = new Map<string, Uint8Array>()
  const exchanges: Exchange[] = items.map((it, seq) => {
    const b = bodyFromBytes(typeof it.body === 'string' || it.body === undefined ? enc.encode(it.body ?? '') : it.body)
    bodies.set(b.ref.digest, b.bytes)
    return {
      seq,
      request: { method: it.method ?? 'GET', url: it.url, headers: [], body: null },
      outcome: {
        kind: 'response',
        response: { status: it.status ?? 200, statusText: 'OK', headers: it.headers ?? [['content-type', 'application/json']], body: b.ref, trailers: [] },
      },
      timing: { startMs: seq, headersMs: 1 },
    }
  })
  return { meta: { name, format: 1 }, exchanges, bodies }
}

const CRM = 'https://crm.test/customers/42'
const crm = () =>
  trace('main', [
    {
      url: CRM,
      body: '{"active":true,"name":"Ada"}',
      headers: [
        ['content-type', 'application/json'],
        ['content-length', '28'],
      ],
    },
  ])
const json = (t: Trace, seq = 0) => {
  const o = t.exchanges[seq]?.outcome
  assert.equal(o?.kind, 'response')
  return JSON.parse(new TextDecoder().decode(bodyBytes(t, (o as Extract<typeof o, { kind: 'response' }>).response.body)))
}
const rejects = (fn: () => unknown, code: string, re: RegExp) =>
  assert.throws(fn, (err: unknown) => err instanceof ToolReplayError && err.code === code && re.test(err.message))

test('parsePatchSpec reads every selector and action form', () => {
  assert.deepEqual(parsePatchSpec('#0 $.active=false'), {
    text: '#0 $.active=false',
    selector: { kind: 'seq', seq: 0 },
    action: { kind: 'json', path: '$.active', value: false },
  })
  assert.deepEqual(parsePatchSpec(`get ${CRM} #1 status=503`).selector, { kind: 'request', method: 'GET', url: CRM, occurrence: 1 })
  assert.deepEqual(parsePatchSpec(`GET ${CRM} status=503`).selector, { kind: 'request', method: 'GET', url: CRM })
  assert.deepEqual(parsePatchSpec(`#2 $['a=b'].c={"x": [1, 2]}`).action, { kind: 'json', path: "$['a=b'].c", value: { x: [1, 2] } })
  assert.deepEqual(parsePatchSpec('#0 body=@fixtures/x.json').action, { kind: 'body-file', file: 'fixtures/x.json' })
  assert.deepEqual(parsePatchSpec('#0 header:X-Flag=on').action, { kind: 'header', name: 'x-flag', value: 'on' })
  assert.deepEqual(parsePatchSpec('#0 header:X-Flag').action, { kind: 'header', name: 'x-flag', value: null })
  assert.deepEqual(parsePatchSpec('#0 error=ECONNRESET').action, { kind: 'error', code: 'ECONNRESET', phase: 'request' })
  assert.deepEqual(parsePatchSpec('#0 error=ETIMEDOUT@connect').action, { kind: 'error', code: 'ETIMEDOUT', phase: 'connect' })
  assert.deepEqual(parsePatchSpec('#0 response=200').action, { kind: 'response', status: 200 })
})

test('parsePatchSpec rejects malformed specs with TR_INVALID_PATCH', () => {
  rejects(() => parsePatchSpec('$.active=false'), ErrorCodes.INVALID_PATCH, /does not start with a selector/)
  rejects(() => parsePatchSpec('#0 $.name=Ada'), ErrorCodes.INVALID_PATCH, /is not JSON \(strings need quotes/)
  rejects(() => parsePatchSpec('#0 $.items[*].id=1'), ErrorCodes.INVALID_PATCH, /wildcard/)
  rejects(() => parsePatchSpec('#0 status=99'), ErrorCodes.INVALID_PATCH, /unknown action/)
  rejects(() => parsePatchSpec('#0 error=ECONNRESET@later'), ErrorCodes.INVALID_PATCH, /unknown error phase/)
  rejects(() => parsePatchSpec('#0'), ErrorCodes.INVALID_PATCH, /selector/)
  rejects(() => parsePatchSpec('GET /relative #0 status=500'), ErrorCodes.INVALID_PATCH, /not an absolute URL/)
})

test('patch ids are deterministic and follow the canonical spec', () => {
  const a = parsePatchSpec('#0 $.active=false')
  const b = parsePatchSpec('#0   $["active"]=false')
  assert.equal(canonicalPatchSpec(a), '#0 $.active=false')
  assert.equal(patchId(a), patchId(b))
  assert.match(patchId(a), /^[0-9a-f]{12}$/)
  assert.notEqual(patchId(a), patchId(parsePatchSpec('#0 $.active=true')))
  // File bodies are identified by content, never by the path they were read from.
  const f1 = resolvePatchFile(parsePatchSpec('#0 body=@/home/me/a.json'), enc.encode('{}'))
  const f2 = resolvePatchFile(parsePatchSpec('#0 body=@b.json'), enc.encode('{}'))
  assert.equal(patchId(f1), patchId(f2))
  assert.match(canonicalPatchSpec(f1), /^#0 body=sha256:[0-9a-f]{64}$/)
})

test('forkTrace sets a JSON value, keeps lineage and leaves the source byte-identical', () => {
  const source = crm()
  const before = canonicalJson({ meta: source.meta, exchanges: source.exchanges, bodies: [...source.bodies].map(([k, v]) => [k, [...v]]) })
  const branch = forkTrace(source, { name: 'inactive', sourceDigest: 'd'.repeat(64), patches: ['#0 $.active=false'] })
  assert.equal(canonicalJson({ meta: source.meta, exchanges: source.exchanges, bodies: [...source.bodies].map(([k, v]) => [k, [...v]]) }), before)
  assert.deepEqual(json(branch), { active: false, name: 'Ada' })
  const x = branch.exchanges[0] as Exchange
  assert.equal(x.origin, 'patched')
  const id = patchId(parsePatchSpec('#0 $.active=false'))
  assert.equal(x.patchId, id)
  assert.deepEqual(branch.meta, {
    name: 'inactive',
    format: 1,
    lineage: { sourceDigest: 'd'.repeat(64), sourceName: 'main', patches: [{ id, spec: '#0 $.active=false' }] },
  })
  assert.equal(headerValue((x.outcome as { response: { headers: HeaderPairs } }).response.headers, 'content-length'), '29')
  // Independent: every referenced body is in the branch itself, and nothing else.
  assert.equal(branch.bodies.size, 1)
  assert.ok(branch.bodies.has((x.outcome as { response: { body: { digest: string } } }).response.body.digest))
})

test('forkTrace selects by method + URL + occurrence and rejects ambiguous or empty selections', () => {
  const source = trace('loop', [
    { url: CRM, body: '{"n":0}' },
    { url: 'https://crm.test/other', body: '{}' },
    { url: CRM, body: '{"n":1}' },
  ])
  const branch = forkTrace(source, { name: 'b', sourceDigest: 'x', patches: [`GET ${CRM} #1 $.n=9`] })
  assert.deepEqual(json(branch, 2), { n: 9 })
  assert.deepEqual(json(branch, 0), { n: 0 })
  assert.equal(exchangeLabel(branch, branch.exchanges[2] as Exchange), `GET ${CRM} #1`)
  rejects(() => resolvePatches(source, [`GET ${CRM} $.n=9`]), ErrorCodes.INVALID_PATCH, /matches 2 exchanges \(#0, #2\)\. Add the occurrence/)
  rejects(() => resolvePatches(source, [`GET ${CRM} #2 $.n=9`]), ErrorCodes.INVALID_PATCH, /recorded 2 time\(s\)/)
  rejects(() => resolvePatches(source, ['POST https://crm.test/x status=500']), ErrorCodes.INVALID_PATCH, /matches no exchange/)
  rejects(() => resolvePatches(source, ['#7 status=500']), ErrorCodes.INVALID_PATCH, /matches no exchange/)
  // Resolution happens before anything is applied: one bad patch means no fork at all.
  rejects(() => forkTrace(source, { name: 'b', sourceDigest: 'x', patches: ['#0 status=500', '#9 status=500'] }), ErrorCodes.INVALID_PATCH, /#9/)
  rejects(() => forkTrace(source, { name: 'b', sourceDigest: 'x', patches: [] }), ErrorCodes.INVALID_PATCH, /at least one patch/)
})

test('status, header, whole body, error and response patches', () => {
  const source = crm()
  let b = forkTrace(source, { name: 'b', sourceDigest: 'x', patches: ['#0 status=503', '#0 header:Retry-After=5', '#0 header:content-type'] })
  let r = (b.exchanges[0]!.outcome as { response: { status: number; statusText: string; headers: HeaderPairs } }).response
  assert.equal(r.status, 503)
  assert.equal(r.statusText, 'Service Unavailable')
  assert.equal(headerValue(r.headers, 'retry-after'), '5')
  assert.equal(headerValue(r.headers, 'content-type'), undefined)
  assert.equal(b.exchanges[0]?.patchId?.split('+').length, 3)

  b = forkTrace(source, { name: 'b', sourceDigest: 'x', patches: [resolvePatchFile(parsePatchSpec('#0 body=@x.json'), enc.encode('{"active":"maybe"}'))] })
  assert.deepEqual(json(b), { active: 'maybe' })

  b = forkTrace(source, { name: 'b', sourceDigest: 'x', patches: ['#0 error=ECONNRESET'] })
  assert.deepEqual(b.exchanges[0]?.outcome, { kind: 'error', error: { code: 'ECONNRESET', message: 'read ECONNRESET', phase: 'request' } })
  rejects(
    () => forkTrace(b, { name: 'c', sourceDigest: 'y', patches: ['#0 status=200'] }),
    ErrorCodes.INVALID_PATCH,
    /recorded error \(ECONNRESET\).*response=CODE/,
  )
  const c = forkTrace(b, {
    name: 'c',
    sourceDigest: 'y',
    patches: ['#0 response=200', '#0 body=@ok'].map((s) => resolvePatchFile(parsePatchSpec(s), enc.encode('{"ok":true}'))),
  })
  r = (c.exchanges[0]!.outcome as { response: { status: number; statusText: string; headers: HeaderPairs } }).response
  assert.equal(r.status, 200)
  assert.deepEqual(json(c), { ok: true })
  rejects(() => forkTrace(source, { name: 'b', sourceDigest: 'x', patches: ['#0 response=200'] }), ErrorCodes.INVALID_PATCH, /already has a response/)
  rejects(() => forkTrace(source, { name: 'b', sourceDigest: 'x', patches: ['#0 $.missing.deep=1'] }), ErrorCodes.INVALID_PATCH, /does not exist/)
  rejects(() => forkTrace(source, { name: 'b', sourceDigest: 'x', patches: ['#0 body=@x'] }), ErrorCodes.INVALID_PATCH, /has not been read/)
})

test('a JSON patch on a gzip body decodes it and drops Content-Encoding', () => {
  const zipped = gzipSync(Buffer.from('{"active":true}'))
  const source = trace('gz', [
    {
      url: CRM,
      body: new Uint8Array(zipped),
      headers: [
        ['content-type', 'application/json'],
        ['content-encoding', 'gzip'],
      ],
    },
  ])
  const b = forkTrace(source, { name: 'b', sourceDigest: 'x', patches: ['#0 $.active=false'] })
  assert.deepEqual(json(b), { active: false })
  const headers = (b.exchanges[0]!.outcome as { response: { headers: HeaderPairs } }).response.headers
  assert.equal(headerValue(headers, 'content-encoding'), undefined)
  const text = trace('t', [{ url: CRM, body: 'plain words', headers: [['content-type', 'text/plain']] }])
  rejects(() => forkTrace(text, { name: 'b', sourceDigest: 'x', patches: ['#0 $.a=1'] }), ErrorCodes.INVALID_PATCH, /not JSON.*body=@FILE/)
})

test('error patches: messages follow the phase, response-body delivers the chosen partial body', () => {
  const message = (spec: string) => {
    const o = forkTrace(crm(), { name: 'b', sourceDigest: 'x', patches: [spec] }).exchanges[0]?.outcome
    return o?.kind === 'error' ? o.error.message : undefined
  }
  assert.equal(message('#0 error=ETIMEDOUT@connect'), 'connect ETIMEDOUT')
  assert.equal(message('#0 error=ETIMEDOUT@request'), 'read ETIMEDOUT')
  assert.equal(message('#0 error=ECONNREFUSED@connect'), 'connect ECONNREFUSED')
  assert.equal(message('#0 error=EPIPE@request'), 'write EPIPE')
  assert.equal(message('#0 error=ENOTFOUND@connect'), 'getaddrinfo ENOTFOUND crm.test')
  assert.equal(message('#0 error=UND_ERR_HEADERS_TIMEOUT@response-headers'), 'Headers Timeout Error')
  assert.equal(message('#0 error=UND_ERR_SOCKET@response-body'), 'other side closed')

  assert.deepEqual(parsePatchSpec('#0 error=ECONNRESET@response-body:10').action, { kind: 'error', code: 'ECONNRESET', phase: 'response-body', bytes: 10 })
  assert.equal(canonicalPatchSpec(parsePatchSpec('#0 error=ECONNRESET@response-body:10')), '#0 error=ECONNRESET@response-body:10')
  assert.equal(canonicalPatchSpec(parsePatchSpec('#0 error=ECONNRESET@response-body')), '#0 error=ECONNRESET@response-body')
  rejects(() => parsePatchSpec('#0 error=ECONNRESET@request:10'), ErrorCodes.INVALID_PATCH, /only goes with @response-body/)

  const { trace: b, notes } = forkTraceWithNotes(crm(), { name: 'b', sourceDigest: 'x', patches: ['#0 error=ECONNRESET@response-body:10'] })
  const o = b.exchanges[0]?.outcome
  assert.equal(o?.kind, 'error')
  const partial = (o as Extract<typeof o, { kind: 'error' }>).error.partial
  assert.equal(new TextDecoder().decode(bodyBytes(b, partial!.body)), '{"active":')
  assert.equal(headerValue(partial!.headers, 'content-length'), undefined)
  assert.deepEqual(notes, [
    {
      id: patchId(parsePatchSpec('#0 error=ECONNRESET@response-body:10')),
      seq: 0,
      note: 'ECONNRESET after 10 of 28 body bytes (1 recorded chunk(s)); content-length removed',
    },
  ])
  const half = forkTrace(crm(), { name: 'b', sourceDigest: 'x', patches: ['#0 error=ECONNRESET@response-body'] }).exchanges[0]?.outcome
  assert.equal((half as Extract<typeof half, { kind: 'error' }>).error.partial?.body.size, 14)
  rejects(
    () => forkTrace(crm(), { name: 'b', sourceDigest: 'x', patches: ['#0 error=ECONNRESET@response-body:29'] }),
    ErrorCodes.INVALID_PATCH,
    /28 bytes, fewer than the 29/,
  )
})

test('a whole-body patch on an encoded response drops the encoding, fixes the length and says so', () => {
  const source = trace('gz', [
    {
      url: CRM,
      body: new Uint8Array(gzipSync(Buffer.from('{"active":true}'))),
      headers: [
        ['content-type', 'application/json'],
        ['content-encoding', 'gzip'],
        ['content-length', '35'],
      ],
    },
  ])
  const spec = resolvePatchFile(parsePatchSpec('#0 body=@x.json'), enc.encode('{"active":"maybe"}'))
  const { trace: b, notes } = forkTraceWithNotes(source, { name: 'b', sourceDigest: 'x', patches: [spec] })
  assert.deepEqual(json(b), { active: 'maybe' })
  const headers = (b.exchanges[0]!.outcome as { response: { headers: HeaderPairs } }).response.headers
  assert.equal(headerValue(headers, 'content-encoding'), undefined)
  assert.equal(headerValue(headers, 'content-length'), '18')
  assert.deepEqual(
    notes.map((n) => n.note),
    ['content-encoding gzip dropped, body stored as given (18 bytes); content-length 18'],
  )
})
