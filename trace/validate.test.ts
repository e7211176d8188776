import assert from 'node:assert/strict'
import { test } from 'node:test'
import { bodyFromBytes, bodyFromChunks } from './body.ts'
import { ErrorCodes, isToolReplayError } from './errors.ts'
import type { Exchange, HeaderPairs } from './exchange.ts'
import { assertValidExchange, assertValidTrace, exchangeProblem, headFitsHttp } from './validate.ts'

const enc = new TextEncoder()
const BODY = '{"ok":true}'

function exchange(headers: HeaderPairs = [['content-type', 'application/json']], body = BODY): { x: Exchange; bodies: Map<string, Uint8Array> } {
  const res = bodyFromChunks([
    { bytes: enc.encode(body.slice(0, 4)), atMs: 1 },
    { bytes: enc.encode(body.slice(4)), atMs: 2 },
  ])
  const req = bodyFromBytes(enc.encode('{"q":1}'))
  const x: Exchange = {
    seq: 0,
    request: { method: 'POST', url: 'https://api.test/v1/x?a=1', headers: [['content-type', 'application/json']], body: req.ref },
    outcome: { kind: 'response', response: { status: 200, statusText: 'OK', headers, trailers: [], body: res.ref } },
    timing: { startMs: 0, headersMs: 3 },
  }
  return {
    x,
    bodies: new Map([
      [req.ref.digest, req.bytes],
      [res.ref.digest, res.bytes],
    ]),
  }
}

/** The problem after `edit`, as "path: problem". */
function problem(edit: (x: Exchange & { [k: string]: unknown }) => void, headers?: HeaderPairs): string | undefined {
  const { x, bodies } = exchange(headers)
  edit(x as Exchange & { [k: string]: unknown })
  const p = exchangeProblem(x, bodies)
  return p && `${p.path}: ${p.problem}`
}

const response = (x: Exchange) => (x.outcome as Extract<Exchange['outcome'], { kind: 'response' }>).response

test('a recorded exchange as both capture paths write it is valid', () => {
  assert.equal(
    problem(() => {}),
    undefined,
  )
  assert.equal(
    problem(() => {}, [
      ['Content-Type', 'application/json'],
      ['content-length', String(BODY.length)],
      ['x-latin1', 'caf\u00e9\tbar'],
    ]),
    undefined,
  )
  assert.equal(
    problem(() => {}, [['transfer-encoding', 'chunked']]),
    undefined,
  )
  // A recorded failure: no head, or a head with the part of the body that arrived.
  assert.equal(
    problem((x) => {
      const partial = { ...response(x), headers: [['content-length', '500']] as HeaderPairs }
      x.outcome = { kind: 'error', error: { code: 'ECONNRESET', message: 'read ECONNRESET', phase: 'response-body', partial } }
    }),
    undefined,
  )
  assert.equal(
    problem((x) => {
      x.outcome = { kind: 'error', error: { code: 'TR_REPLAY_MISS', message: 'no match', phase: 'connect' } }
    }),
    undefined,
  )
})

test('statuses: 200-599 only; 1xx and 101 are refused with the reason', () => {
  for (const status of [200, 204, 304, 418, 599]) {
    assert.equal(
      problem((x) => {
        response(x).status = status
        if (status === 204 || status === 304) response(x).body = bodyFromBytes(new Uint8Array()).ref
      }),
      undefined,
      String(status),
    )
  }
  for (const status of [100, 101, 103]) {
    assert.match(
      problem((x) => (response(x).status = status)) ?? '',
      /outcome\.response\.status: is 1\d\d; .*final status 200-599 \(1xx heads are interim.*101 is recorded only for a WebSocket session/,
    )
  }
  for (const status of [0, 199, 600, 999, 200.5, -1]) {
    assert.match(problem((x) => (response(x).status = status)) ?? '', /outcome\.response\.status: .*200-599/, String(status))
  }
  assert.match(problem((x) => (response(x).status = '200' as unknown as number)) ?? '', /status: is "200"/)
})

test('status text and fields: no CR, LF, NUL, controls or characters above U+00FF; names are tokens', () => {
  assert.match(problem((x) => (response(x).statusText = 'OK\r\nX-Evil: 1')) ?? '', /outcome\.response\.statusText: contains CR \(a line break\) at index 2/)
  assert.match(problem((x) => (response(x).statusText = 'OK\n')) ?? '', /statusText: contains LF/)
  assert.match(problem((x) => (response(x).statusText = 'O\0K')) ?? '', /statusText: contains NUL at index 1/)
  assert.match(problem((x) => (response(x).statusText = 'OK \u2713')) ?? '', /U\+2713 \(above U\+00FF/)
  assert.match(problem((x) => (response(x).statusText = 'a\u0007')) ?? '', /control character U\+0007/)
  assert.equal(
    problem((x) => (response(x).statusText = '')),
    undefined,
  )
  assert.match(problem((x) => response(x).headers.push(['x-a', 'v\r\nset-cookie: a=b'])) ?? '', /outcome\.response\.headers\[1\]\[1\]: contains CR/)
  assert.match(problem((x) => response(x).headers.push(['bad name', 'v'])) ?? '', /headers\[1\]\[0\]: is "bad name"; a field name is an HTTP token/)
  assert.match(problem((x) => response(x).headers.push(['', 'v'])) ?? '', /headers\[1\]\[0\]/)
  assert.match(problem((x) => response(x).trailers.push(['x-t', '\n'])) ?? '', /outcome\.response\.trailers\[0\]\[1\]: contains LF/)
  assert.match(
    problem((x) => response(x).trailers.push(['Content-Length', '5'])) ?? '',
    /trailers\[0\]\[0\]: is Content-Length, a framing or connection field, which cannot be sent as a trailer/,
  )
  assert.match(problem((x) => response(x).trailers.push(['connection', 'close'])) ?? '', /trailers\[0\]\[0\]: is connection/)
  assert.match(problem((x) => x.request.headers.push(['x-r', 'a\0'])) ?? '', /request\.headers\[1\]\[1\]: contains NUL/)
  assert.match(problem((x) => (x.request.method = 'GE T')) ?? '', /request\.method: is "GE T"/)
  assert.match(problem((x) => (x.request.url = '/relative')) ?? '', /request\.url: is "\/relative", not an absolute URL/)
  assert.match(problem((x) => (x.request.url = 'ftp://h/x')) ?? '', /request\.url: has scheme "ftp:"/)
})

test('framing: Content-Length agrees with the body, one framing only, bodiless responses are empty', () => {
  const n = String(BODY.length)
  assert.match(
    problem(() => {}, [['content-length', '50']]) ?? '',
    /outcome\.response\.headers: say Content-Length 50, which disagrees with the body \(11 bytes\)/,
  )
  assert.match(problem(() => {}, [['content-length', '2']]) ?? '', /disagrees with the body/)
  assert.match(
    problem(() => {}, [
      ['content-length', n],
      ['Content-Length', n],
    ]) ?? '',
    /headers\[1\]: is a second Content-Length/,
  )
  assert.match(problem(() => {}, [['content-length', '+11']]) ?? '', /headers\[0\]: has Content-Length "\+11"; it must be a decimal/)
  assert.match(problem(() => {}, [['content-length', ' 11']]) ?? '', /decimal/)
  assert.match(
    problem(() => {}, [
      ['transfer-encoding', 'chunked'],
      ['content-length', n],
    ]) ?? '',
    /have both Transfer-Encoding and Content-Length/,
  )
  assert.match(problem(() => {}, [['transfer-encoding', 'chunked, ']]) ?? '', /not a list of transfer codings/)
  // HEAD: Content-Length describes the representation, the body is empty.
  const head = (x: Exchange) => {
    x.request.method = 'HEAD'
    x.request.body = null
  }
  assert.match(problem(head) ?? '', /outcome\.response\.body: has 11 bytes, but the request is HEAD/)
  assert.equal(
    problem(
      (x) => {
        head(x)
        response(x).body = bodyFromBytes(new Uint8Array()).ref
      },
      [['content-length', '123456']],
    ),
    undefined,
  )
  assert.match(problem((x) => (response(x).status = 204)) ?? '', /has 11 bytes, but status 204 has no content/)
  // A failure mid-body: the head announced more than arrived, never less.
  const partial = (cl: string) =>
    problem((x) => {
      const p = { ...response(x), headers: [['content-length', cl]] as HeaderPairs }
      x.outcome = { kind: 'error', error: { code: 'ECONNRESET', message: 'reset', phase: 'response-body', partial: p } }
    })
  assert.equal(partial('11'), undefined)
  assert.equal(partial('4000'), undefined)
  assert.match(partial('3') ?? '', /outcome\.error\.partial\.headers: say Content-Length 3, which is smaller than the 11 bytes that arrived/)
})

test('bodies, timing, errors: sizes add up, numbers are sane, codes are words, phases known', () => {
  assert.match(problem((x) => (response(x).body.chunks[0]!.size = 5)) ?? '', /outcome\.response\.body\.chunks: sizes add up to 12, not the body size 11/)
  assert.match(problem((x) => (response(x).body.size = 12)) ?? '', /add up to 11, not the body size 12/)
  assert.match(problem((x) => (response(x).body.chunks[1]!.atMs = Number.NaN)) ?? '', /chunks\[1\]\.atMs: must be a number of ms from 0 to 2147483647/)
  assert.match(problem((x) => (x.timing.startMs = 1e20)) ?? '', /timing\.startMs: must be a number of ms from 0/, 'beyond what a Node timer can wait')
  assert.match(problem((x) => (response(x).body.digest = 'abc')) ?? '', /body\.digest: must be a lowercase hex sha256/)
  assert.match(problem((x) => (x.timing.headersMs = -1)) ?? '', /timing\.headersMs/)
  assert.match(problem((x) => (x.seq = 1.5)) ?? '', /^seq:/)
  const error = (e: Record<string, unknown>) =>
    problem((x) => {
      x.outcome = { kind: 'error', error: { code: 'ECONNRESET', message: 'm', phase: 'connect', ...e } } as Exchange['outcome']
    })
  assert.match(error({ code: 'EVIL\r\nx: 1' }) ?? '', /outcome\.error\.code: is "EVIL\\r\\nx: 1"; an error code is a word/)
  assert.match(error({ code: '' }) ?? '', /error\.code/)
  assert.match(error({ phase: 'later' }) ?? '', /error\.phase: must be one of connect, request, response-headers, response-body/)
  assert.match(error({ message: 3 }) ?? '', /error\.message: must be a string/)
  assert.match(
    error({ partial: { status: 200, statusText: 'OK', headers: [], trailers: [], body: bodyFromBytes(new Uint8Array()).ref } }) ?? '',
    /partial: is a response head, but the failure is in phase "connect"/,
  )
  const empty = { statusText: '', headers: [], trailers: [], body: bodyFromBytes(new Uint8Array()).ref }
  assert.match(error({ phase: 'response-body', partial: { status: 204, ...empty } }) ?? '', /partial: is a 204 response, which is complete at its head/)
  // Whatever shape arrives (an old or damaged store), the answer is a problem, never a TypeError.
  for (const junk of [
    null,
    1,
    'x',
    [],
    {},
    { seq: 0, request: null },
    { seq: 0, request: { method: 'GET', url: 'http://a/', headers: [[1, 2]], body: null } },
  ]) {
    assert.ok(exchangeProblem(junk), JSON.stringify(junk))
  }
})

test('body sizes are checked against the bytes when the caller has them', () => {
  const { x, bodies } = exchange()
  const digest = response(x).body.digest
  bodies.set(digest, enc.encode('{"ok":false}'))
  assert.match(exchangeProblem(x, bodies)?.problem ?? '', /is 11, but body [0-9a-f]{12} has 12 bytes/)
  assert.equal(exchangeProblem(x, new Map()), undefined, 'a body the map lacks is the store’s business')
})

test('assertValidExchange and assertValidTrace throw a typed error naming the trace, exchange and field', () => {
  const { x, bodies } = exchange()
  response(x).statusText = 'OK\r\nX: 1'
  assert.throws(
    () => assertValidExchange(x, { trace: 't', bodies, action: 'Cannot replay', remedy: 'Re-record it.' }),
    (err: unknown) =>
      isToolReplayError(err, ErrorCodes.TRACE_INVALID) &&
      err.message ===
        'Cannot replay exchange #0 (POST https://api.test/v1/x?a=1) of trace "t": outcome.response.statusText contains CR (a line break) at index 2; a status text may hold only tab, space, visible ASCII and Latin-1 (RFC 9110), never CR, LF or NUL. Re-record it.' &&
      (err.details as { field: string }).field === 'outcome.response.statusText',
  )
  assert.throws(
    () => assertValidTrace({ meta: { name: 'u' }, exchanges: [exchange().x, x], bodies }, { code: ErrorCodes.INVALID_PATCH }),
    (err: unknown) => isToolReplayError(err, ErrorCodes.INVALID_PATCH) && err.message.includes('trace "u"'),
  )
  assertValidTrace({ meta: { name: 'ok' }, exchanges: [exchange().x] })
  assert.throws(
    () => assertValidTrace({ meta: { name: 'dup' }, exchanges: [exchange().x, exchange().x] }),
    (err: unknown) => isToolReplayError(err, ErrorCodes.TRACE_INVALID) && /seq repeats seq 0/.test(err.message),
  )
})

test('MCP stdio URLs are valid request URLs; a host that is not a server name is not', () => {
  const base = {
    seq: 0,
    request: { method: 'POST', url: 'mcp+stdio://filesystem/tools/call/write_file', headers: [], body: null },
    outcome: {
      kind: 'response',
      response: { status: 200, statusText: 'OK', headers: [], body: { digest: '0'.repeat(64), size: 0, chunks: [] }, trailers: [] },
    },
    timing: { startMs: 0, headersMs: 0 },
  } as const
  assert.equal(exchangeProblem(base), undefined)
  assert.equal(exchangeProblem({ ...base, request: { ...base.request, url: 'mcp+stdio://filesystem/' } }), undefined)
  assert.match(
    exchangeProblem({ ...base, request: { ...base.request, url: 'mcp+stdio://File System/x' } })?.problem ?? '',
    /not an absolute URL|not an MCP stdio URL/,
  )
  assert.match(
    exchangeProblem({ ...base, request: { ...base.request, url: 'ftp://x/y' } })?.problem ?? '',
    /recorded requests are http:, https: or mcp\+stdio:/,
  )
})

test('headFitsHttp holds a head to the rules a recorded response is held to, and agrees with exchangeProblem', () => {
  const heads: Array<[string, HeaderPairs, boolean]> = [
    [
      'OK',
      [
        ['content-type', 'text/event-stream'],
        ['x-obs', 'caf\u00e9\tok'],
      ],
      true,
    ],
    ['', [], true],
    ['OK', [['bad name', 'v']], false],
    ['OK', [['x-split', 'a\nb']], false],
    ['OK', [['x-nul', 'a\u0000']], false],
    ['Caf\u0100', [], false],
    ['O\u0001K', [], false],
  ]
  for (const [statusText, headers, fits] of heads) {
    assert.equal(headFitsHttp({ statusText, headers }), fits, JSON.stringify([statusText, headers]))
    const { x } = exchange(headers)
    if (x.outcome.kind === 'response') x.outcome.response.statusText = statusText
    assert.equal(exchangeProblem(x) === undefined, fits, `exchangeProblem on ${JSON.stringify([statusText, headers])}`)
  }
})
