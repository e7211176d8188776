import assert from 'node:assert/strict'
import { test } from 'node:test'
import { headerPairsFromRaw } from '../trace/index.ts'
import { flatten, stripHopByHop } from './headers.ts'
import { formatExports, nodeOptionsWithoutProxyWarning, proxyEnvironment } from './proxy-env.ts'
import { mapHost, parseResolve } from './upstream.ts'

test('hop-by-hop fields and the ones Connection names are stripped; order and repeats kept', () => {
  const pairs = headerPairsFromRaw([
    'Host',
    'a.test',
    'Connection',
    'keep-alive, X-Hop',
    'X-Hop',
    '1',
    'Set-Cookie',
    'a=1',
    'Proxy-Authorization',
    'x',
    'Set-Cookie',
    'b=2',
    'Transfer-Encoding',
    'chunked',
  ])
  assert.deepEqual(stripHopByHop(pairs), [
    ['Host', 'a.test'],
    ['Set-Cookie', 'a=1'],
    ['Set-Cookie', 'b=2'],
  ])
  assert.deepEqual(flatten([['a', '1']]), ['a', '1'])
})

test('--resolve parsing and host mapping', () => {
  const map = parseResolve(['api.test=127.0.0.1:8443', 'API2.test:443=[::1]:9443', 'plain.test=10.0.0.1'])
  assert.deepEqual(mapHost({ resolve: map }, 'api.test', 443), { host: '127.0.0.1', port: 8443 })
  assert.deepEqual(mapHost({ resolve: map }, 'api2.test', 443), { host: '::1', port: 9443 })
  assert.deepEqual(mapHost({ resolve: map }, 'other.test', 80), { host: 'other.test', port: 80 })
  assert.throws(
    () => parseResolve(['nope']),
    (err: Error & { code?: string }) => err.code === 'TR_INVALID_OPTION' && /Invalid --resolve "nope": expected HOST=ADDRESS:PORT/.test(err.message),
  )
})

test('proxy environment: both cases, NO_PROXY cleared, CA files; exports are shell-quoted', () => {
  const env = proxyEnvironment({ proxyUrl: 'http://127.0.0.1:1', caPath: '/s/ca.pem', bundlePath: "/s/it's.pem" })
  for (const k of ['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy']) assert.equal(env[k], 'http://127.0.0.1:1')
  assert.equal(env.NO_PROXY, '')
  assert.equal(env.no_proxy, '')
  assert.equal(env.NODE_USE_ENV_PROXY, '1')
  assert.equal(env.NODE_EXTRA_CA_CERTS, '/s/ca.pem')
  assert.match(formatExports(env), /^export CURL_CA_BUNDLE='\/s\/it'\\''s.pem'$/m)
})

test("NODE_OPTIONS keeps the user's flags and adds --disable-warning=UNDICI-EHPA once", () => {
  assert.equal(nodeOptionsWithoutProxyWarning(undefined), '--disable-warning=UNDICI-EHPA')
  assert.equal(nodeOptionsWithoutProxyWarning(' --max-old-space-size=512 '), '--max-old-space-size=512 --disable-warning=UNDICI-EHPA')
  assert.equal(nodeOptionsWithoutProxyWarning('--disable-warning=UNDICI-EHPA --x'), '--disable-warning=UNDICI-EHPA --x')
  const env = proxyEnvironment({ proxyUrl: 'http://127.0.0.1:1', caPath: 'a', bundlePath: 'b', nodeOptions: '--enable-source-maps' })
  assert.equal(env.NODE_OPTIONS, '--enable-source-maps --disable-warning=UNDICI-EHPA')
})
