import assert from 'node:assert/strict'
import { test } from 'node:test'
import { type JsonTextReading, readJsonText } from './json-text.ts'

/** Every visit as a line: values as `path=kind@offset+length text`, keys as `key path name`, comments. */
function visits(text: string): { reading: JsonTextReading; lines: string[] } {
  const lines: string[] = []
  const reading = readJsonText(text, {
    value: (v) =>
      lines.push(`${v.document}:${v.path.join('.')}=${v.kind}@${v.offset}+${v.length}${v.text === undefined ? '' : ` ${v.text}`}${v.cut ? ' cut' : ''}`),
    key: (k) => lines.push(`key ${k.path.join('.')} ${k.text}`),
    comment: (c) => lines.push(`comment ${c.text}`),
  })
  return { reading, lines }
}

test('every occurrence of a repeated key, keys decoded, containers after their members', () => {
  const { reading, lines } = visits(String.raw`{"pa\u0073sword":"x","password":"SECRET","a":[1,{"b":null}]}`)
  assert.deepEqual(reading, { status: 'json', documents: 1, end: 60 })
  assert.deepEqual(lines, [
    'key  password',
    '0:password=string@17+3 x',
    'key  password',
    '0:password=string@32+8 SECRET',
    'key  a',
    '0:a.0=number@46+1',
    'key a.1 b',
    '0:a.1.b=null@53+4',
    '0:a.1=object@48+10',
    '0:a=array@45+14',
    '0:=object@0+60',
  ])
})

test('JSONC (comments, trailing commas) and JSON Lines are JSON; comments are handed over', () => {
  const jsonc = visits('{"a":1, /* c */ "b":[2,],}')
  assert.equal(jsonc.reading.status, 'json')
  assert.ok(jsonc.lines.includes('comment /* c */'))
  const lines = visits('{"a":1}\n{"a":2}\n')
  assert.deepEqual(lines.reading, { status: 'json', documents: 2, end: 16 })
  assert.ok(lines.lines.includes('1:a=number@13+1'))
})

test('text cut short, broken, or not JSON: what was read is visited, and the reading says where it stopped', () => {
  assert.deepEqual(visits('{"a":"cu').reading, { status: 'cut', documents: 0, end: 8 })
  assert.deepEqual(visits('{"a":"cu').lines, ['key  a', '0:a=string@5+3 cu cut'])
  assert.deepEqual(visits('[[[').reading, { status: 'cut', documents: 0, end: 3 })
  assert.deepEqual(visits('{"a":1 "b":2}').reading, { status: 'invalid', documents: 0, end: 7 })
  assert.deepEqual(visits('{"a":1}]').reading, { status: 'invalid', documents: 1, end: 7 })
  assert.deepEqual(visits('').reading, { status: 'invalid', documents: 0, end: 0 })
  assert.deepEqual(visits('hello').lines, [])
  // A raw control character in a string: still read as a string, but not JSON.
  const flawed = visits('{"a":"x\ty"}')
  assert.deepEqual(flawed.reading, { status: 'invalid', documents: 1, end: 11 }, 'read to its end, every value visited')
  assert.ok(flawed.lines.includes('0:a=string@5+5 x\ty'))
})

test('nesting depth costs no stack', () => {
  const n = 500_000
  assert.deepEqual(readJsonText(`${'['.repeat(n)}${']'.repeat(n)}`, {}), { status: 'json', documents: 1, end: 2 * n })
})
