import assert from 'node:assert/strict'
import { test } from 'node:test'
import { ErrorCodes } from './errors.ts'
import { LINE_EDGE_BYTES, LineReader, type LongLine, lineTooLong } from './line-reader.ts'

const bytes = (s: string) => new TextEncoder().encode(s)

function reader(maxLineBytes = 1024): { r: LineReader; lines: string[]; long: LongLine[] } {
  const lines: string[] = []
  const long: LongLine[] = []
  return { r: new LineReader((l) => lines.push(l), { maxLineBytes, onTooLong: (l) => long.push(l) }), lines, long }
}

test('lines split anywhere, a multi-byte character cut between chunks, CRLF, blank lines, a last line without newline', () => {
  const { r, lines } = reader()
  const text = bytes('{"a":"é€😀"}\r\n\n{"b":2}\n{"c"')
  // One byte at a time: every cut, inside characters too.
  for (let i = 0; i < text.length; i++) r.push(text.subarray(i, i + 1))
  assert.deepEqual(lines, ['{"a":"é€😀"}', '{"b":2}'])
  r.push(bytes(':3}'))
  r.end()
  assert.deepEqual(lines, ['{"a":"é€😀"}', '{"b":2}', '{"c":3}'])
})

test('a line over the limit is dropped as it streams by and reported once, with its size and both ends; the next line is read', () => {
  const { r, lines, long } = reader(100)
  const big = `{"jsonrpc":"2.0","result":"${'x'.repeat(5000)}","id":7}`
  r.push(bytes('{"first":1}\n'))
  for (let i = 0; i < big.length; i += 333) r.push(bytes(big.slice(i, i + 333)))
  assert.equal(long.length, 0, 'reported when the line ends, not before')
  assert.ok(r.pendingBytes === 0, 'nothing of the dropped line is held')
  r.push(bytes('\n{"next":2}\n'))
  assert.deepEqual(lines, ['{"first":1}', '{"next":2}'])
  assert.equal(long.length, 1)
  assert.equal(long[0]?.bytes, big.length)
  assert.equal(long[0]?.head, big.slice(0, LINE_EDGE_BYTES))
  assert.equal(long[0]?.tail, big.slice(-LINE_EDGE_BYTES))
  assert.match(long[0]?.tail ?? '', /"id":7}$/)
})

test('a line of exactly the limit is kept; one byte more is not', () => {
  const { r, lines, long } = reader(10)
  r.push(bytes('0123456789\n01234567890\n'))
  assert.deepEqual(lines, ['0123456789'])
  assert.deepEqual(
    long.map((l) => l.bytes),
    [11],
  )
})

test('a stream that ends inside a long line reports it', () => {
  const { r, long } = reader(4)
  r.push(bytes('abcdefgh'))
  r.end()
  assert.equal(long[0]?.bytes, 8)
})

test('lineTooLong: TR_LINE_TOO_LONG naming the wire, the size, the limit and the fix', () => {
  const err = lineTooLong({ name: "the MCP server's stdout", fix: 'Raise it with --max-body-bytes.' }, { bytes: 70_000_000 }, 67_108_864)
  assert.equal(err.code, ErrorCodes.LINE_TOO_LONG)
  assert.equal(
    err.message,
    "A line of 70000000 bytes on the MCP server's stdout is over the 67108864-byte line limit, so it was dropped (a message is one line, and one line is held whole to be read). Raise it with --max-body-bytes.",
  )
  assert.deepEqual(err.details, { bytes: 70_000_000, maxLineBytes: 67_108_864 })
})
