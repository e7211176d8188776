import assert from 'node:assert/strict'
import { test } from 'node:test'
import { driftJson } from './schema-drift.ts'

const body = '{\n  "shipment": {"id": "s-1", "qty": 3, "ref": 12345678901234567890},\n  "items": [{"n": 1}, {"n": 2}]\n}'

test('each change: rename, type change, missing field, extra field; the rest of the text keeps its bytes', () => {
  const r = driftJson(body, [
    { op: 'rename', path: '$.shipment.id', to: 'shipment_id' },
    { op: 'type', path: '$.shipment.qty', to: 'string' },
    { op: 'remove', path: '$.items[*].n' },
    { op: 'add', path: '$.shipment.extra', value: true },
  ])
  assert.deepEqual(r.changed, [
    'renamed $.shipment.id to shipment_id',
    'changed $.shipment.qty to string',
    'removed $.items[1].n',
    'removed $.items[0].n',
    'added $.shipment.extra',
  ])
  const v = JSON.parse(r.text)
  assert.deepEqual(Object.keys(v.shipment).sort(), ['extra', 'qty', 'ref', 'shipment_id'])
  assert.equal(v.shipment.shipment_id, 's-1')
  assert.equal(v.shipment.qty, '3')
  assert.deepEqual(v.items, [{}, {}])
  // The big integer was never parsed into a double and printed back.
  assert.ok(r.text.includes('"ref": 12345678901234567890'))
  assert.ok(r.text.startsWith('{\n  "shipment": {'))
})

test('type changes carry the value over where the type allows, and a value already of that type is left alone', () => {
  const r = driftJson('{"a":"42","b":"12345678901234567890","c":1,"d":[1],"e":"x"}', [
    { op: 'type', path: '$.a', to: 'number' },
    { op: 'type', path: '$.b', to: 'number' },
    { op: 'type', path: '$.c', to: 'boolean' },
    { op: 'type', path: '$.d', to: 'object' },
    { op: 'type', path: '$.e', to: 'string' },
  ])
  assert.equal(r.text, '{"a":42,"b":12345678901234567890,"c":true,"d":{"value":[1]},"e":"x"}')
  assert.equal(r.changed.length, 4)
})

test('a body that is not JSON, or paths that match nothing, change nothing', () => {
  assert.deepEqual(driftJson('not json', [{ op: 'remove', path: '$.a' }]), { text: 'not json', changed: [] })
  assert.deepEqual(
    driftJson('{"a":1}', [
      { op: 'remove', path: '$.b' },
      { op: 'add', path: '$.a', value: 2 },
    ]).changed,
    [],
  )
})
