import assert from 'node:assert/strict'
import { IncomingMessage, ServerResponse } from 'node:http'
import { Socket } from 'node:net'
import { PassThrough } from 'node:stream'
import { test } from 'node:test'
import { localizeRedirects, localOriginOf, rewriteLocation, rewriteToUpstream } from './reverse-request.ts'
import { parseReverse, ReverseRoutes } from './reverse-routes.ts'

const up = (v: string) => v.replace('https://up.test', 'http://127.0.0.1:1')

test('rewriteToUpstream: absolute URL and the upstream authority as Host', () => {
  const req = { url: '/v1/x?y=1', rawHeaders: ['Host', '127.0.0.1:8080', 'accept', '*/*'] }
  rewriteToUpstream(req, 'https://api.example.test:8443/v1/x?y=1')
  assert.deepEqual(req, { url: 'https://api.example.test:8443/v1/x?y=1', rawHeaders: ['Host', 'api.example.test:8443', 'accept', '*/*'] })
  assert.equal(localOriginOf({ rawHeaders: ['host', 'localhost:9'] }, 'http://x'), 'http://localhost:9')
  assert.equal(localOriginOf({ rawHeaders: ['host', 'evil.test/"x'] }, 'http://127.0.0.1:8080'), 'http://127.0.0.1:8080')
})

test('rewriteLocation: every form writeHead takes (object, flat array, pairs); other fields untouched', () => {
  assert.deepEqual(rewriteLocation({ Location: 'https://up.test/a', 'x-other': 'https://up.test/b' }, up), {
    Location: 'http://127.0.0.1:1/a',
    'x-other': 'https://up.test/b',
  })
  assert.deepEqual(rewriteLocation(['location', 'https://up.test/a', 'x', 'https://up.test/b'], up), [
    'location',
    'http://127.0.0.1:1/a',
    'x',
    'https://up.test/b',
  ])
  assert.deepEqual(rewriteLocation([['LOCATION', 'https://up.test/a']], up), [['LOCATION', 'http://127.0.0.1:1/a']])
  assert.equal(rewriteLocation(undefined, up), undefined)
})

test('localizeRedirects: the head the client is sent points back at the proxy, however it is written', () => {
  const routes = new ReverseRoutes(parseReverse(['api=https://up.test/v1']))
  const heads: string[] = []
  for (const write of [
    (res: ServerResponse) => res.writeHead(302, 'Found', ['location', 'https://up.test/v1/next']),
    (res: ServerResponse) => res.writeHead(302, { location: '/v1/next' }),
    (res: ServerResponse) => res.writeHead(302, undefined, [['Location', 'https://up.test/v1/next']]),
    (res: ServerResponse) => {
      res.statusCode = 302
      res.setHeader('location', 'https://up.test/v1/next')
    },
  ]) {
    const req = new IncomingMessage(new Socket())
    const res = new ServerResponse(req)
    const sink = new PassThrough()
    const parts: Buffer[] = []
    sink.on('data', (c: Buffer) => parts.push(c))
    Object.assign(sink, { setNoDelay: () => sink, setTimeout: () => sink, _httpMessage: null })
    res.assignSocket(sink as unknown as Socket)
    localizeRedirects(res, routes, 'https://up.test/v1/first', 'http://127.0.0.1:8080')
    write(res)
    res.end()
    heads.push(/location: (.*)\r\n/i.exec(Buffer.concat(parts).toString('latin1'))?.[1] ?? '(none)')
  }
  assert.deepEqual(heads, ['http://127.0.0.1:8080/api/next', '/api/next', 'http://127.0.0.1:8080/api/next', 'http://127.0.0.1:8080/api/next'])
})
