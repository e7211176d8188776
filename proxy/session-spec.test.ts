import assert from 'node:assert/strict'
import { test } from 'node:test'
import { ErrorCodes } from '../trace/index.ts'
import { parseSessionSpec, sessionOptionsOf } from './session-spec.ts'

test('parseSessionSpec: name, trace (default: the name), mode (default: replay), options', () => {
  assert.deepEqual(parseSessionSpec({ name: 'w1' }), { name: 'w1', mode: 'replay', trace: 'w1' })
  assert.deepEqual(parseSessionSpec({ name: 'w1', trace: 'suite:w1', mode: 'record' }), { name: 'w1', mode: 'record', trace: 'suite:w1' })
  assert.deepEqual(parseSessionSpec({ name: 'w1', recordAs: 'seen', tail: 'live', keepUnused: false }), {
    name: 'w1',
    mode: 'replay',
    trace: 'w1',
    recordAs: 'seen',
    tail: 'live',
    keepUnused: false,
  })
})

test('parseSessionSpec refuses bad requests with TR_INVALID_OPTION naming the field', () => {
  const cases: Array<[unknown, RegExp]> = [
    [[], /not a JSON object/],
    [{ name: 'w1', mdoe: 'record' }, /unknown field\(s\) "mdoe"/],
    [{ name: 'a b' }, /Invalid session name "a b"/],
    [{ name: 'w1', mode: 'live' }, /"mode" "live" is not one of record, replay, passthrough, update/],
    [{ name: 'w1', trace: '../x' }, /Invalid trace name/],
    [{ name: 'w1', tail: 'x' }, /"tail" "x"/],
    [{ name: 'w1', keepUnused: 'yes' }, /"keepUnused" is not a boolean/],
  ]
  for (const [body, why] of cases) {
    assert.throws(
      () => parseSessionSpec(body),
      (err: Error & { code?: string }) => err.code === ErrorCodes.INVALID_OPTION && why.test(err.message),
      JSON.stringify(body),
    )
  }
})

test("sessionOptionsOf: the spec's own options over the proxy's shared ones, never the default session's", () => {
  const base = { mode: 'record' as const, trace: 'default', recordAs: 'x', tail: 'live' as const, redaction: { headers: ['x-key'] }, labels: { team: 'a' } }
  assert.deepEqual(sessionOptionsOf({ name: 'w1', mode: 'replay', trace: 't1' }, base), {
    mode: 'replay',
    trace: 't1',
    redaction: { headers: ['x-key'] },
    labels: { team: 'a' },
  })
})
