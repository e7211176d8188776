import assert from 'node:assert/strict'
import { test } from 'node:test'
import { http2ErrorCodeIn, http2ErrorName, http2Fields, http2RequestFields, http2ResponseFields, isHttp2Failure } from './http2-wire.ts'

test('pseudo-headers become method and URL parts, never fields; te: trailers is kept, other hop-by-hop fields are not', () => {
  const f = http2RequestFields([
    ':method',
    'POST',
    ':scheme',
    'https',
    ':authority',
    'api.test:443',
    ':path',
    '/pkg.Svc/Call?x=1',
    'content-type',
    'application/grpc',
    'te',
    'trailers',
    'keep-alive',
    'timeout=5',
    'x-a',
    '1',
  ])
  assert.equal(f.method, 'POST')
  assert.equal(f.scheme, 'https')
  assert.equal(f.authority, 'api.test:443')
  assert.equal(f.path, '/pkg.Svc/Call?x=1')
  assert.deepEqual(f.headers, [
    ['content-type', 'application/grpc'],
    ['x-a', '1'],
    ['te', 'trailers'],
  ])
})

test('a request without :authority takes its host field', () => {
  const f = http2RequestFields([':method', 'GET', ':path', '/', 'host', 'h.test'])
  assert.equal(f.authority, 'h.test')
})

test('fields for node:http2 leave connection-specific ones out and keep one value of single-value fields', () => {
  const out = http2Fields(
    [
      ['Connection', 'keep-alive'],
      ['Transfer-Encoding', 'chunked'],
      ['Keep-Alive', 'timeout=5'],
      ['Host', 'x'],
      ['Content-Type', 'text/plain'],
      ['content-type', 'text/html'],
      ['Set-Cookie', 'a=1'],
      ['set-cookie', 'b=2'],
      ['te', 'gzip'],
    ],
    { ':status': 200 },
  )
  assert.deepEqual(out, { ':status': 200, 'content-type': 'text/plain', 'set-cookie': ['a=1', 'b=2'] })
})

test('response fields drop pseudo-headers and keep order', () => {
  assert.deepEqual(http2ResponseFields([':status', '200', 'b', '2', 'a', '1']), [
    ['b', '2'],
    ['a', '1'],
  ])
})

test('HTTP/2 error codes are read back from Node messages', () => {
  assert.equal(http2ErrorName(11), 'NGHTTP2_ENHANCE_YOUR_CALM')
  assert.equal(http2ErrorCodeIn('Stream closed with error code NGHTTP2_ENHANCE_YOUR_CALM'), 11)
  assert.equal(http2ErrorCodeIn('Stream closed with error code NGHTTP2_REFUSED_STREAM'), 7)
  assert.equal(http2ErrorCodeIn('socket hang up'), 2, 'INTERNAL_ERROR when the message names none')
  assert.equal(http2ErrorCodeIn('NGHTTP2_NO_ERROR'), 2, 'a reset is never sent as NO_ERROR')
  assert.equal(isHttp2Failure('ERR_HTTP2_STREAM_ERROR'), true)
  assert.equal(isHttp2Failure('ECONNRESET'), false)
})
