import assert from 'node:assert/strict'
import { Readable } from 'node:stream'
import { test } from 'node:test'
import { bufferBody, headerPairs, requestUrl } from './request-capture.ts'

const text = (b: Uint8Array | null) => (b === null ? null : Buffer.from(b).toString())

test('requestUrl joins origin and path, and keeps absolute (proxy-style) paths', () => {
  assert.equal(requestUrl({ origin: 'http://api.test', path: '/a?b=1' }), 'http://api.test/a?b=1')
  assert.equal(requestUrl({ origin: 'http://api.test/', path: '/a' }), 'http://api.test/a')
  assert.equal(requestUrl({ origin: new URL('https://api.test:8443/ignored'), path: '/x' }), 'https://api.test:8443/x')
  assert.equal(requestUrl({ origin: 'http://proxy', path: 'http://other.test/y' }), 'http://other.test/y')
})

test('headerPairs reads every shape undici accepts and keeps repeats', () => {
  const expected = [
    ['a', '1'],
    ['set-cookie', 'x'],
    ['set-cookie', 'y'],
  ]
  assert.deepEqual(headerPairs({ a: '1', 'set-cookie': ['x', 'y'], skipped: undefined }), expected)
  assert.deepEqual(headerPairs(['a', '1', 'set-cookie', 'x', 'set-cookie', 'y']), expected)
  assert.deepEqual(
    headerPairs([
      ['a', '1'],
      ['set-cookie', 'x'],
      ['set-cookie', 'y'],
    ]),
    expected,
  )
  assert.deepEqual(headerPairs(new Map([['a', '1']])), [['a', '1']])
  assert.deepEqual(headerPairs(null), [])
})

test('bufferBody: in-memory bodies are captured synchronously', () => {
  assert.deepEqual(bufferBody(null), { bytes: null })
  const s = bufferBody('héllo')
  assert.ok(!(s instanceof Promise))
  assert.equal(text(s.bytes), 'héllo')
  const bytes = new Uint8Array([1, 2, 3])
  const b = bufferBody(bytes)
  assert.ok(!(b instanceof Promise))
  assert.equal(b.bytes, bytes, 'bytes are not copied')
  const view = bufferBody(new DataView(new Uint8Array([9, 8, 7, 6]).buffer, 1, 2))
  assert.ok(!(view instanceof Promise))
  assert.deepEqual([...(view.bytes ?? [])], [8, 7])
  const form = bufferBody(new URLSearchParams({ a: '1', b: 'x y' }))
  assert.ok(!(form instanceof Promise))
  assert.equal(text(form.bytes), 'a=1&b=x+y')
  assert.match(form.contentType ?? '', /^application\/x-www-form-urlencoded/)
})

test('bufferBody: streams, iterables, Blob and FormData are read whole', async () => {
  assert.equal(text((await bufferBody(Readable.from(['a', Buffer.from('b')]))).bytes), 'ab')
  assert.equal(
    text(
      (
        await bufferBody(
          (async function* () {
            yield 'x'
            yield new Uint8Array([0x79])
          })(),
        )
      ).bytes,
    ),
    'xy',
  )
  const web = new ReadableStream({
    start(c) {
      c.enqueue(new TextEncoder().encode('web '))
      c.enqueue(new TextEncoder().encode('stream'))
      c.close()
    },
  })
  assert.equal(text((await bufferBody(web)).bytes), 'web stream')
  const blob = await bufferBody(new Blob(['blob'], { type: 'text/x-blob' }))
  assert.deepEqual({ text: text(blob.bytes), type: blob.contentType }, { text: 'blob', type: 'text/x-blob' })
})

test('bufferBody: FormData uses the boundary already announced in the request headers', async () => {
  const form = new FormData()
  form.append('field', 'value')
  const own = await bufferBody(form)
  assert.match(own.contentType ?? '', /^multipart\/form-data; boundary=/)
  const announced = await bufferBody(form, 'multipart/form-data; boundary=----fixed-boundary')
  assert.equal(announced.contentType, undefined)
  assert.ok(text(announced.bytes)?.startsWith('------fixed-boundary\r\n'))
  assert.match(text(announced.bytes) ?? '', /------fixed-boundary--\r\n$/)
})

test('bufferBody rejects what it cannot capture, naming the type', () => {
  assert.throws(() => bufferBody(42), { message: /cannot capture a request body of type \[object Number\]/ })
})
