import assert from 'node:assert/strict'
import { test } from 'node:test'
import { bodyFromBytes } from './body.ts'
import { diffTraces } from './diff.ts'
import type { Exchange, Trace } from './exchange.ts'
import { canonicalJson, cloneJson, editJson, isExactNumber, jsonEqual, parseJson, stringifyJson } from './json-codec.ts'
import { diffJson } from './json-path.ts'
import { computeIdentity } from './request-identity.ts'
import { parseSse, sseEventsAsJson } from './sse.ts'

const BIG = '{"id":12345678901234567890,"secret":"x","n":1.50}'

test('parse → stringify keeps every number as written: big integers, 1.50, 1e3, -0', () => {
  for (const text of [BIG, '[1e3,-0,0.1,1.0,123456789012345678901234567890.5]', '{"a":[{"b":9007199254740993}]}']) {
    assert.equal(stringifyJson(parseJson(text)), text)
  }
  const v = parseJson(BIG) as Record<string, unknown>
  assert.ok(isExactNumber(v.id))
  assert.equal(typeof parseJson('{"n":2}'), 'object')
  assert.equal((parseJson('{"n":2}') as { n: unknown }).n, 2, 'a number a double prints the same stays a plain number')
})

test('canonical JSON and equality: big integers never collide; 1.0 == 1 as RFC 8785 says', () => {
  assert.notEqual(canonicalJson(parseJson('12345678901234567890')), canonicalJson(parseJson('12345678901234567891')))
  assert.equal(canonicalJson(parseJson('{"b":1.0,"a":12345678901234567890}')), '{"a":12345678901234567890,"b":1}')
  assert.ok(jsonEqual(parseJson('1.50'), 1.5))
  assert.ok(!jsonEqual(parseJson('12345678901234567890'), parseJson('12345678901234567891')))
  assert.deepEqual(cloneJson(parseJson(BIG)), parseJson(BIG))
  assert.equal(stringifyJson(cloneJson(parseJson(BIG))), BIG)
})

test('diffJson reports a change in the last digit of a big integer', () => {
  const d = diffJson(parseJson('{"account":12345678901234567890}'), parseJson('{"account":12345678901234567891}'))
  assert.equal(d.length, 1)
  assert.equal(d[0]?.path, '$.account')
  assert.equal(stringifyJson(d[0]?.before), '12345678901234567890')
  assert.equal(stringifyJson(d[0]?.after), '12345678901234567891')
})

test('editJson changes only the bytes of the edited values; whitespace, key order, escapes stay', () => {
  const text = '{\n  "2": "two",\n  "id": 12345678901234567890,\n  "secret" : "x",\n  "n": 1.50, "s": "\\u00e9"\n}'
  const out = editJson(text, [{ path: ['secret'], value: '[REDACTED]' }])
  assert.equal(out, text.replace('"x"', '"[REDACTED]"'))
  const added = editJson('{"a":1}', [{ path: ['b'], value: parseJson('12345678901234567890') }])
  assert.deepEqual(parseJson(added), parseJson('{"a":1,"b":12345678901234567890}'))
  assert.equal(editJson('{"a":1,"b":2}', [{ path: ['a'], remove: true }]).replace(/\s/g, ''), '{"b":2}')
  assert.throws(() => editJson('{"a":1}', [{ path: ['x', 'y'], value: 1 }]), /no parent/)
})

test('SSE event data keeps big integers exact', () => {
  const events = sseEventsAsJson(parseSse('data: {"id":12345678901234567890}\n\n'))
  assert.equal(stringifyJson(events[0]?.data), '{"id":12345678901234567890}')
})

test('request identity: big integers that differ in the last digit are different requests', () => {
  const req = (body: string) => ({
    method: 'POST',
    url: 'https://a.test/',
    headers: [['content-type', 'application/json']] as const,
    body: new TextEncoder().encode(body),
  })
  assert.notEqual(computeIdentity(req('{"a":12345678901234567890}')).key, computeIdentity(req('{"a":12345678901234567891}')).key)
  assert.equal(computeIdentity(req('{"a":1.0}')).key, computeIdentity(req('{"a":1}')).key)
})

test('diffTraces tells two big account numbers apart (issue 7)', () => {
  const trace = (name: string, body: string): Trace => {
    const req = bodyFromBytes(new Uint8Array(0))
    const res = bodyFromBytes(new TextEncoder().encode(body))
    const x: Exchange = {
      seq: 0,
      request: { method: 'GET', url: 'https://bank.test/account', headers: [], body: null },
      outcome: { kind: 'response', response: { status: 200, statusText: 'OK', headers: [['content-type', 'application/json']], body: res.ref, trailers: [] } },
      timing: { startMs: 0, headersMs: 1 },
    }
    return {
      meta: { name, format: 1 },
      exchanges: [x],
      bodies: new Map([
        [res.ref.digest, res.bytes],
        [req.ref.digest, req.bytes],
      ]),
    }
  }
  const d = diffTraces(trace('a', '{"account":12345678901234567890}'), trace('b', '{"account":12345678901234567891}'))
  assert.equal(d.differences.length, 1)
  assert.equal(d.differences[0]?.kind, 'response_changed')
})

test('parseJson without the reviver reads every number a double prints back the same; the others keep their text', () => {
  // A seeded walk over number spellings: integers, fractions, exponents, trailing zeros, long and tiny ones.
  let seed = 7
  const next = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31
    return seed % n
  }
  const digits = (n: number) => Array.from({ length: n }, () => String(next(10))).join('')
  const spellings = ['0', '-0', '1.0', '0.000001', '0.0000001', '1e21', '1E5', '-0.5', '123456789012345', '1234567890123456', '12345678.12345678']
  for (let i = 0; i < 5000; i++) {
    const int = String(next(2) === 0 ? next(1000) : Number(`1${digits(next(20))}`))
    const frac = next(3) === 0 ? '' : `.${digits(1 + next(18))}`
    const exp = next(5) === 0 ? `e${next(2) === 0 ? '-' : ''}${next(30)}` : ''
    spellings.push(`${next(4) === 0 ? '-' : ''}${int}${frac}${exp}`)
  }
  for (const n of spellings) {
    const text = `{"n":${n},"a":[${n}]}`
    const exact = JSON.parse(text, (_k, v, context?: { source?: string }) =>
      typeof v === 'number' && context?.source !== undefined && context.source !== String(v) ? `raw:${context.source}` : v,
    ) as { n: unknown }
    const got = parseJson(text) as { n: unknown }
    if (typeof exact.n === 'string') assert.ok(isExactNumber(got.n) && `raw:${got.n.rawJSON}` === exact.n, `${n} keeps its text`)
    else assert.equal(got.n, exact.n, `${n} is a plain number`)
    assert.equal(
      canonicalJson(got),
      canonicalJson(
        JSON.parse(text, (_k, v, c?: { source?: string }) =>
          typeof v === 'number' && c?.source !== undefined && c.source !== String(v)
            ? (JSON as unknown as { rawJSON(t: string): unknown }).rawJSON(c.source)
            : v,
        ),
      ),
      n,
    )
  }
})

test('canonicalJson gives the same text on its sorted one-stringify path and on the walk', () => {
  // The same value with every object's keys inserted in reverse: unsorted, so it takes the walk.
  const reversed = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(reversed)
    if (v === null || typeof v !== 'object' || Object.getPrototypeOf(v) !== Object.prototype) return v
    return Object.fromEntries(
      Object.entries(v)
        .reverse()
        .map(([k, x]) => [k, reversed(x)]),
    )
  }
  const values: Array<[unknown, string]> = [
    [{ a: 1, b: [{ c: 'x', d: 2 }] }, '{"a":1,"b":[{"c":"x","d":2}]}'],
    [{ a: 1, b: { 9: 'nine', 10: 'ten' } }, '{"a":1,"b":{"10":"ten","9":"nine"}}'],
    [{ a: undefined, b: [undefined, -0, 1e21, 'é\u2028"'], c: null }, '{"b":[null,0,1e+21,"é\u2028\\""],"c":null}'],
    [{ v: { w: 1, x: { y: { z: true } } }, z: [] }, '{"v":{"w":1,"x":{"y":{"z":true}}},"z":[]}'],
    [{ n: parseJson('12345678901234567890'), m: 1 }, '{"m":1,"n":12345678901234567890}'],
    [[1, 'two', { a: false, b: true }], '[1,"two",{"a":false,"b":true}]'],
  ]
  for (const [v, text] of values) {
    assert.equal(canonicalJson(v), text)
    assert.equal(canonicalJson(reversed(v)), text)
  }
  assert.throws(() => canonicalJson({ a: Number.NaN }), TypeError)
  assert.throws(() => canonicalJson({ a: () => 1 }), TypeError)
})
