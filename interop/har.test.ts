import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { describe, test } from 'node:test'
import * as zlib from 'node:zlib'
import {
  type BodyRef,
  bodyFromBytes,
  bodyFromChunks,
  ErrorCodes,
  type Exchange,
  isToolReplayError,
  parseJson,
  type RecordedResponse,
  stringifyJson,
  type Trace,
} from '../trace/index.ts'
import { formatHar, harFromTrace } from './har-export.ts'
import type { Har } from './har-format.ts'
import { traceFromHar } from './har-import.ts'

const enc = new TextEncoder()
const dec = new TextDecoder()

/** Every kind of exchange HAR has to carry: text, binary, compressed (gzip, br), errors, trailers, latin1. */
function interopTrace(): Trace {
  const bodies = new Map<string, Uint8Array>()
  const keep = (b: { ref: BodyRef; bytes: Uint8Array }) => {
    bodies.set(b.ref.digest, b.bytes)
    return b.ref
  }
  const json = '{"id":12345678901234567890,"text":"héllo ✓"}'
  const gz = zlib.gzipSync(enc.encode(json))
  const br = zlib.brotliCompressSync(enc.encode('{"br":true}'))
  const binary = new Uint8Array(3000).map((_, i) => (i * 7919 + 13) % 256) // not UTF-8
  const res = (status: number, headers: Array<[string, string]>, body: BodyRef, trailers: Array<[string, string]> = []): RecordedResponse => ({
    status,
    statusText: status === 200 ? 'OK' : 'Created',
    headers,
    trailers,
    body,
  })
  const x = (
    seq: number,
    method: string,
    url: string,
    reqHeaders: Array<[string, string]>,
    reqBody: BodyRef | null,
    outcome: Exchange['outcome'],
  ): Exchange => ({
    seq,
    request: { method, url, headers: reqHeaders, body: reqBody },
    outcome,
    timing: { startMs: seq * 10, headersMs: 4 + seq },
  })
  const exchanges: Exchange[] = [
    x(0, 'GET', 'https://api.test/v1/items?b=2&a=1', [['accept', 'application/json']], null, {
      kind: 'response',
      response: res(
        200,
        [
          ['content-type', 'application/json'],
          ['set-cookie', 'a=[REDACTED]; Path=/'],
          ['set-cookie', 'b=[REDACTED]; HttpOnly'],
        ],
        keep(bodyFromChunks([{ bytes: enc.encode(json), atMs: 9 }])),
      ),
    }),
    x(1, 'POST', 'https://api.test/v1/items', [['content-type', 'application/json']], keep(bodyFromBytes(enc.encode('{"name":"x"}'))), {
      kind: 'response',
      response: res(201, [['content-type', 'application/json']], keep(bodyFromBytes(enc.encode('{"ok":true}')))),
    }),
    x(2, 'GET', 'https://api.test/blob', [], null, {
      kind: 'response',
      response: res(200, [['content-type', 'application/octet-stream']], keep(bodyFromChunks([{ bytes: binary, atMs: 30 }]))),
    }),
    x(3, 'GET', 'https://api.test/gzip', [['accept-encoding', 'gzip']], null, {
      kind: 'response',
      response: res(
        200,
        [
          ['content-type', 'application/json'],
          ['content-encoding', 'gzip'],
          ['content-length', String(gz.byteLength)],
        ],
        keep(bodyFromChunks([{ bytes: gz, atMs: 12 }])),
      ),
    }),
    x(4, 'GET', 'https://api.test/br', [], null, {
      kind: 'response',
      response: res(200, [['content-encoding', 'br']], keep(bodyFromChunks([{ bytes: br, atMs: 10 }])), [['x-checksum', 'abc']]),
    }),
    x(5, 'PUT', 'https://api.test/upload', [['content-type', 'application/octet-stream']], keep(bodyFromBytes(binary.subarray(0, 100))), {
      kind: 'response',
      response: res(
        200,
        [['content-type', 'text/plain; charset=iso-8859-1']],
        keep(bodyFromChunks([{ bytes: new Uint8Array([0x63, 0x61, 0x66, 0xe9]), atMs: 7 }])),
      ),
    }),
    x(6, 'GET', 'https://down.test/', [], null, {
      kind: 'error',
      error: { code: 'ECONNREFUSED', message: 'connect ECONNREFUSED 127.0.0.1:9', phase: 'connect' },
    }),
    x(7, 'GET', 'https://api.test/cut', [], null, {
      kind: 'error',
      error: {
        code: 'ECONNRESET',
        message: 'socket hang up',
        phase: 'response-body',
        partial: res(200, [['content-type', 'application/json']], keep(bodyFromChunks([{ bytes: enc.encode('{"half":'), atMs: 20 }]))),
      },
    }),
    x(8, 'GET', 'https://api.test/gzip-cut', [], null, {
      kind: 'error',
      error: {
        code: 'UND_ERR_SOCKET',
        message: 'other side closed',
        phase: 'response-body',
        partial: res(200, [['content-encoding', 'gzip']], keep(bodyFromChunks([{ bytes: gz.subarray(0, 15), atMs: 20 }]))),
      },
    }),
  ]
  return { meta: { name: 'interop', format: 1 }, exchanges, bodies }
}

function bytesOf(trace: Trace, ref: BodyRef | null): Buffer | null {
  if (ref === null) return null
  const b = trace.bodies.get(ref.digest)
  assert.ok(b, `body ${ref.digest} present`)
  return Buffer.from(b)
}

function responseOf(x: Exchange): RecordedResponse | undefined {
  return x.outcome.kind === 'response' ? x.outcome.response : x.outcome.error.partial
}

/** Throws unless `fn` fails with TR_HAR_INVALID naming `field` (and, when given, the message part). */
function assertHarInvalid(fn: () => unknown, field: string, problem?: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(isToolReplayError(err, ErrorCodes.HAR_INVALID), `expected TR_HAR_INVALID, got ${String(err)}`)
    assert.equal(err.details?.field, field)
    assert.ok(err.message.includes(field), err.message)
    if (problem) assert.match(err.message, problem)
    const entry = /^log\.entries\[(\d+)\]/.exec(field)?.[1]
    if (entry !== undefined) assert.equal(err.details?.entry, Number(entry))
    return true
  })
}

// biome-ignore lint/suspicious/noExplicitAny: tests reach into any HAR field to break it
type LooseEntry = Record<string, any>

/** A minimal valid HAR with one entry; `edit` changes it before it is serialized. */
function oneEntryHar(edit: (entry: LooseEntry) => void = () => {}): string {
  const entry: LooseEntry = {
    startedDateTime: '2026-01-02T03:04:05.000Z',
    time: 3,
    request: { method: 'GET', url: 'https://api.test/x', httpVersion: 'HTTP/1.1', cookies: [], headers: [], queryString: [], headersSize: -1, bodySize: 0 },
    response: {
      status: 200,
      statusText: 'OK',
      httpVersion: 'HTTP/1.1',
      cookies: [],
      headers: [{ name: 'content-type', value: 'text/plain' }],
      content: { size: 2, mimeType: 'text/plain', text: 'hi' },
      redirectURL: '',
      headersSize: -1,
      bodySize: 2,
    },
    cache: {},
    timings: { send: 0, wait: 2, receive: 1 },
  }
  edit(entry)
  return JSON.stringify({ log: { version: '1.2', creator: { name: 't', version: '1' }, entries: [entry] } })
}

describe('HAR round trip (trace -> HAR -> trace)', () => {
  const original = interopTrace()
  const text = formatHar(harFromTrace(original))
  const back = traceFromHar(text, { name: 'back' })

  test('keeps every exchange in order with method, URL, request headers and request bodies byte for byte', () => {
    assert.deepEqual(back.skipped, [])
    assert.equal(back.trace.exchanges.length, original.exchanges.length)
    for (const [i, x] of original.exchanges.entries()) {
      const y = back.trace.exchanges[i] as Exchange
      assert.equal(y.seq, i)
      assert.equal(y.request.method, x.request.method)
      assert.equal(y.request.url, x.request.url)
      assert.deepEqual(y.request.headers, x.request.headers)
      assert.deepEqual(bytesOf(back.trace, y.request.body), bytesOf(original, x.request.body), `request body #${i}`)
      assert.deepEqual(y.timing, x.timing, `timing #${i}`)
    }
  })

  test('keeps status, status text, headers, trailers and response bodies byte for byte (binary and compressed too)', () => {
    for (const [i, x] of original.exchanges.entries()) {
      const y = back.trace.exchanges[i] as Exchange
      assert.equal(y.outcome.kind, x.outcome.kind, `outcome #${i}`)
      const a = responseOf(x)
      const b = responseOf(y)
      assert.equal(b === undefined, a === undefined, `response #${i}`)
      if (!a || !b) continue
      assert.equal(b.status, a.status)
      assert.equal(b.statusText, a.statusText)
      assert.deepEqual(b.headers, a.headers, `headers #${i}`)
      assert.deepEqual(b.trailers, a.trailers, `trailers #${i}`)
      const wireA = bytesOf(original, a.body) as Buffer
      assert.ok(wireA.equals(bytesOf(back.trace, b.body) as Buffer), `body #${i} byte for byte`)
      assert.equal(b.body.digest, a.body.digest)
      // A body arrives after its head: a chunk stamped earlier (bodyFromBytes stamps 0) comes back at headersMs.
      const lastA = Math.max(a.body.chunks.at(-1)?.atMs ?? 0, x.timing.headersMs)
      assert.equal(b.body.chunks.at(-1)?.atMs ?? y.timing.headersMs, lastA, `last chunk time #${i}`)
    }
  })

  test('keeps recorded failures exactly (code, message, phase)', () => {
    for (const [i, x] of original.exchanges.entries()) {
      const y = back.trace.exchanges[i] as Exchange
      if (x.outcome.kind !== 'error' || y.outcome.kind !== 'error') continue
      assert.equal(y.outcome.error.code, x.outcome.error.code)
      assert.equal(y.outcome.error.message, x.outcome.error.message)
      assert.equal(y.outcome.error.phase, x.outcome.error.phase)
    }
  })

  test('the HAR says what HAR readers expect: decoded content.text, base64 for binary, status 0 + _error for failures', () => {
    const har = parseJson(text) as Har
    const e = har.log.entries
    assert.equal(e[0]?.response.content.text, '{"id":12345678901234567890,"text":"héllo ✓"}')
    assert.equal(e[0]?.request.queryString.length, 2)
    assert.equal(e[2]?.response.content.encoding, 'base64')
    // gzip on the wire, decoded in content.text; the header still says what the wire carried.
    assert.equal(e[3]?.response.content.text, '{"id":12345678901234567890,"text":"héllo ✓"}')
    assert.ok(e[3]?.response.headers.some((h) => h.name === 'content-encoding' && h.value === 'gzip'))
    const gz = bytesOf(original, (responseOf(original.exchanges[3] as Exchange) as RecordedResponse).body) as Buffer
    assert.equal(e[3]?.response.bodySize, gz.byteLength, 'bodySize is the wire size')
    assert.equal(e[3]?.response.content.compression, (e[3]?.response.content.size ?? 0) - gz.byteLength)
    assert.equal(e[4]?.response.content.text, '{"br":true}')
    assert.equal(e[5]?.response.content.text, 'café')
    assert.equal(e[5]?.request.postData?.encoding, 'base64')
    assert.equal(e[6]?.response.status, 0)
    assert.equal(e[6]?.response._error, 'ECONNREFUSED')
    assert.equal(e[7]?.response.status, 200)
    assert.equal(e[7]?.response.content.text, '{"half":')
    assert.equal(e[8]?.response.content.text, undefined, 'a gzip body cut short has no decoded text')
    assert.equal(e[0]?.startedDateTime, '1970-01-01T00:00:00.000Z')
    assert.equal(e[1]?.startedDateTime, '1970-01-01T00:00:00.010Z')
  })

  test('export is deterministic', () => {
    assert.equal(formatHar(harFromTrace(interopTrace())), text)
    assert.equal(formatHar(harFromTrace(traceFromHar(text, { name: 'interop' }).trace)), text, 'HAR -> trace -> HAR gives the same text')
  })
})

describe('HAR import from browser writers', () => {
  const chrome = readFileSync(new URL('./fixtures/chrome-devtools.har', import.meta.url), 'utf8')

  test('Chrome DevTools shape: failures, HTTP/2 pseudo-headers, decoded bodies, timings, order, skipped entries', () => {
    const { trace, skipped } = traceFromHar(chrome, { name: 'chrome', source: 'chrome-devtools.har' })
    assert.deepEqual(
      skipped.map((s) => [s.entry, s.url.slice(0, 12)]),
      [
        [3, 'data:image/p'],
        [4, 'wss://app.te'],
      ],
    )
    assert.equal(trace.meta.labels?.harCreator, 'WebInspector 537.36')
    const [first, second, third] = trace.exchanges as [Exchange, Exchange, Exchange]
    // Entries are ordered by startedDateTime: the file lists the failed request first, but it started last.
    assert.equal(first.request.url, 'https://app.test/api/user')
    assert.equal(first.timing.startMs, 0)
    // blocked 1.5 + dns -1 (n/a) + connect 10.25 (ssl 6 inside) + send 0.25 + wait 20.5 = 32.5 -> 33
    assert.equal(first.timing.headersMs, 33)
    assert.ok(!first.request.headers.some(([k]) => k.startsWith(':')), 'pseudo-headers dropped')
    assert.ok(first.request.headers.some(([k]) => k === 'accept'))
    const user = responseOf(first) as RecordedResponse
    assert.equal(
      user.headers.find(([k]) => k === 'content-encoding'),
      undefined,
      'decoded body loses its Content-Encoding',
    )
    assert.deepEqual(
      user.headers.find(([k]) => k === 'content-length'),
      ['content-length', '27'],
    )
    assert.equal(dec.decode(trace.bodies.get(user.body.digest)), '{"name":"Ada","plan":"pro"}')
    assert.equal(user.body.chunks[0]?.atMs, 33 + 2)
    assert.equal(second.request.method, 'POST')
    assert.equal(second.request.url, 'https://app.test/api/cart', 'fragment dropped')
    assert.equal(dec.decode(trace.bodies.get(second.request.body?.digest ?? '')), '{"item":42}')
    assert.equal(third.request.url, 'https://app.test/logo.png')
    const png = trace.bodies.get((responseOf(third) as RecordedResponse).body.digest) ?? new Uint8Array()
    assert.equal(png.byteLength, 70)
    assert.deepEqual([...png.subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47])
    const failed = trace.exchanges[3] as Exchange
    assert.equal(failed.timing.startMs, 250)
    assert.deepEqual(failed.outcome.kind === 'error' && [failed.outcome.error.code, failed.outcome.error.phase], ['ECONNREFUSED', 'connect'])
    assert.match(failed.outcome.kind === 'error' ? failed.outcome.error.message : '', /net::ERR_CONNECTION_REFUSED \(imported from HAR log\.entries\[0\]\)/)
  })

  test('Playwright shape: status -1 with _failureText is a network error; a status with one is a body cut short', () => {
    const refused = traceFromHar(
      oneEntryHar((e) => {
        e.response = { status: -1, statusText: '', headers: [], content: { size: -1, mimeType: 'x-unknown' }, _failureText: 'net::ERR_CONNECTION_RESET' }
      }),
      { name: 'pw' },
    ).trace.exchanges[0] as Exchange
    assert.deepEqual(refused.outcome.kind === 'error' && [refused.outcome.error.code, refused.outcome.error.phase], ['ECONNRESET', 'response-headers'])
    const cut = traceFromHar(
      oneEntryHar((e) => {
        e.response._failureText = 'net::ERR_CONNECTION_CLOSED'
      }),
      { name: 'pw' },
    ).trace
    const x = cut.exchanges[0] as Exchange
    assert.equal(x.outcome.kind, 'error')
    if (x.outcome.kind !== 'error') return
    assert.equal(x.outcome.error.code, 'UND_ERR_SOCKET')
    assert.equal(x.outcome.error.phase, 'response-body')
    assert.equal(dec.decode(cut.bodies.get(x.outcome.error.partial?.body.digest ?? '')), 'hi')
  })

  test('a 304 (or HEAD) keeps no body, whatever cached content the HAR shows; a sentence as failure text becomes a code', () => {
    const cached = traceFromHar(
      oneEntryHar((e) => {
        e.response.status = 304
        e.response.statusText = 'Not Modified'
      }),
      { name: 'c' },
    ).trace
    const r = responseOf(cached.exchanges[0] as Exchange) as RecordedResponse
    assert.equal(r.status, 304)
    assert.equal(r.body.size, 0)
    const webkit = traceFromHar(
      oneEntryHar((e) => {
        e.response = { status: 0, statusText: '', headers: [], content: { size: 0, mimeType: 'x-unknown' }, _error: 'Could not connect to the server.' }
      }),
      { name: 'w' },
    ).trace.exchanges[0] as Exchange
    assert.deepEqual(webkit.outcome.kind === 'error' && [webkit.outcome.error.code, webkit.outcome.error.message], [
      'Could_not_connect_to_the_server.',
      'Could not connect to the server. (imported from HAR log.entries[0])',
    ])
  })

  test('urlencoded request bodies are rebuilt from params when text is empty; base64 request bodies decode', () => {
    const form = traceFromHar(
      oneEntryHar((e) => {
        e.request.method = 'POST'
        e.request.postData = {
          mimeType: 'application/x-www-form-urlencoded',
          text: '',
          params: [
            { name: 'a', value: '1 2' },
            { name: 'b', value: 'é' },
          ],
        }
        e.request.bodySize = -1
      }),
      { name: 'f' },
    ).trace
    assert.equal(dec.decode(form.bodies.get(form.exchanges[0]?.request.body?.digest ?? '')), 'a=1+2&b=%C3%A9')
  })
})

describe('HAR import refuses malformed and hostile input, naming the entry and field', () => {
  test('not JSON, no log, an unknown version, entries not a list', () => {
    assertHarInvalid(() => traceFromHar('{"log":', { name: 't' }), '', /not valid JSON/)
    assertHarInvalid(() => traceFromHar('{}', { name: 't' }), 'log', /must be an object/)
    assertHarInvalid(() => traceFromHar('{"log":{"version":"2.0","entries":[]}}', { name: 't' }), 'log.version', /HAR 1\.1 and 1\.2/)
    assertHarInvalid(() => traceFromHar('{"log":{"version":"1.2","entries":{}}}', { name: 't' }), 'log.entries', /must be an array/)
  })

  test('size limits: text, entries, headers, field length, body bytes (text, base64 and decompressed)', () => {
    assertHarInvalid(() => traceFromHar(oneEntryHar(), { name: 't', limits: { maxTextLength: 100 } }), '', /over the limit of 100/)
    const two = JSON.stringify({ log: { version: '1.2', entries: [{}, {}, {}] } })
    assertHarInvalid(() => traceFromHar(two, { name: 't', limits: { maxEntries: 2 } }), 'log.entries', /3 entries, over the limit of 2/)
    const many = oneEntryHar((e) => {
      e.request.headers = Array.from({ length: 5 }, (_, i) => ({ name: `x-${i}`, value: 'v' }))
    })
    assertHarInvalid(() => traceFromHar(many, { name: 't', limits: { maxHeaders: 4 } }), 'log.entries[0].request.headers', /5 headers/)
    const long = oneEntryHar((e) => {
      e.request.url = `https://api.test/${'a'.repeat(200)}`
    })
    assertHarInvalid(() => traceFromHar(long, { name: 't', limits: { maxFieldLength: 100 } }), 'log.entries[0].request.url', /over the limit of 100/)
    const big = oneEntryHar((e) => {
      e.response.content.text = 'x'.repeat(1000)
    })
    assertHarInvalid(() => traceFromHar(big, { name: 't', limits: { maxBodyBytes: 999 } }), 'log.entries[0].response.content.text', /body size limit of 999/)
    const big64 = oneEntryHar((e) => {
      e.response.content = { size: 3000, mimeType: 'x', encoding: 'base64', text: 'A'.repeat(4000) }
    })
    assertHarInvalid(() => traceFromHar(big64, { name: 't', limits: { maxBodyBytes: 2000 } }), 'log.entries[0].response.content.text', /more than 2000 bytes/)
    // A gzip bomb in Tool Replay's own wire field: 10 MB of zeros in ~10 KB; decoding stops at the limit.
    const bomb = zlib.gzipSync(new Uint8Array(10 * 1024 * 1024))
    const bombHar = oneEntryHar((e) => {
      e.response.headers = [{ name: 'content-encoding', value: 'gzip' }]
      e._toolReplay = { wireBody: bomb.toString('base64') }
    })
    assertHarInvalid(
      () => traceFromHar(bombHar, { name: 't', limits: { maxBodyBytes: 1024 * 1024 } }),
      'log.entries[0]._toolReplay.wireBody',
      /more than 1048576 bytes/,
    )
  })

  test('header injection, bad header names, bad methods, relative URLs, bad dates', () => {
    const crlf = oneEntryHar((e) => {
      e.response.headers.push({ name: 'x-evil', value: 'a\r\nset-cookie: pwned=1' })
    })
    assertHarInvalid(() => traceFromHar(crlf, { name: 't' }), 'log.entries[0].response.headers[1].value', /line break/)
    const badName = oneEntryHar((e) => {
      e.request.headers = [{ name: 'bad name', value: 'v' }]
    })
    assertHarInvalid(() => traceFromHar(badName, { name: 't' }), 'log.entries[0].request.headers[0].name', /not a header name/)
    const method = oneEntryHar((e) => {
      e.request.method = 'GET /admin HTTP/1.1\r\n'
    })
    assertHarInvalid(() => traceFromHar(method, { name: 't' }), 'log.entries[0].request.method', /not an HTTP method/)
    const relative = oneEntryHar((e) => {
      e.request.url = '/v1/x'
    })
    assertHarInvalid(() => traceFromHar(relative, { name: 't' }), 'log.entries[0].request.url', /not an absolute URL/)
    const date = oneEntryHar((e) => {
      e.startedDateTime = 'yesterday'
    })
    assertHarInvalid(() => traceFromHar(date, { name: 't' }), 'log.entries[0].startedDateTime', /ISO 8601/)
    const status = oneEntryHar((e) => {
      e.response.status = 1000
    })
    assertHarInvalid(() => traceFromHar(status, { name: 't' }), 'log.entries[0].response.status', /not an HTTP status/)
  })

  test('bodies that are not there or not what they say', () => {
    const b64 = oneEntryHar((e) => {
      e.response.content = { size: 3, mimeType: 'x', encoding: 'base64', text: 'no!base64' }
    })
    assertHarInvalid(() => traceFromHar(b64, { name: 't' }), 'log.entries[0].response.content.text', /not valid base64/)
    const noContent = oneEntryHar((e) => {
      e.response.content = { size: 120, mimeType: 'text/html' }
    })
    assertHarInvalid(() => traceFromHar(noContent, { name: 't' }), 'log.entries[0].response.content.text', /saved without response bodies/)
    const attached = oneEntryHar((e) => {
      e.response.content = { size: 120, mimeType: 'text/html', _file: 'abc.html' }
    })
    assertHarInvalid(() => traceFromHar(attached, { name: 't' }), 'log.entries[0].response.content._file', /content: "attach"/)
    const octet = oneEntryHar((e) => {
      e.request.method = 'POST'
      e.request.bodySize = 512
      e.request.postData = { mimeType: 'application/octet-stream', text: '', params: [] }
    })
    assertHarInvalid(() => traceFromHar(octet, { name: 't' }), 'log.entries[0].request.postData.text', /0 bytes but request\.bodySize is 512/)
    const edited = oneEntryHar((e) => {
      e.response.headers = [{ name: 'content-encoding', value: 'gzip' }]
      e.response.content.text = 'edited'
      e._toolReplay = { wireBody: zlib.gzipSync(enc.encode('hi')).toString('base64') }
    })
    assertHarInvalid(() => traceFromHar(edited, { name: 't' }), 'log.entries[0]._toolReplay.wireBody', /edited after export/)
  })

  test('an entry that breaks the rules every stored exchange meets (trace/validate.ts) is refused, naming the entry', () => {
    const lying = oneEntryHar((e) => {
      e.response.headers.push({ name: 'Content-Length', value: '12' })
    })
    assertHarInvalid(() => traceFromHar(lying, { name: 't' }), 'log.entries[0]', /cannot be a trace exchange: outcome\.response\.headers say Content-Length 12/)
    const control = oneEntryHar((e) => {
      e.request.headers = [{ name: 'x-bell', value: 'a\u0007b' }]
    })
    assertHarInvalid(() => traceFromHar(control, { name: 't' }), 'log.entries[0]', /request\.headers\[0\]\[1\]/)
    const interim = oneEntryHar((e) => {
      e.response.status = 103
    })
    assertHarInvalid(() => traceFromHar(interim, { name: 't' }), 'log.entries[0]', /1xx heads are interim/)
  })

  test('a status 0 that names no failure is refused rather than guessed', () => {
    const silent = oneEntryHar((e) => {
      e.response = { status: 0, statusText: '', headers: [], content: { size: 0, mimeType: 'x-unknown' } }
    })
    assertHarInvalid(() => traceFromHar(silent, { name: 't' }), 'log.entries[0].response.status', /names no failure/)
  })

  test('the second entry is named when it is the bad one', () => {
    const har = parseJson(oneEntryHar()) as Har
    const bad = stringifyJson({ log: { ...har.log, entries: [har.log.entries[0], { ...har.log.entries[0], request: 'nope' }] } })
    assertHarInvalid(() => traceFromHar(bad, { name: 't' }), 'log.entries[1].request', /must be an object/)
  })
})
