/**
 * The proxy's parts driven without a network: node:http's own IncomingMessage and ServerResponse on an
 * in-memory stream, a real engine session over a memory store.
 */
import assert from 'node:assert/strict'
import { IncomingMessage, ServerResponse } from 'node:http'
import { Socket } from 'node:net'
import { PassThrough } from 'node:stream'
import { test } from 'node:test'
import { openSession } from '../engine/index.ts'
import { createMemoryStore } from '../store/index.ts'
import { bodyFromChunks, ErrorCodes } from '../trace/index.ts'
import { createExchangeHandler, createStats } from './exchange-handler.ts'
import { readBody } from './request-body.ts'
import { createHrefResolver, parseAuthority, urlInput } from './request-target.ts'
import { lazyUpstreamAgent } from './upstream.ts'

/** A request as node:http would hand it over, with `body` already received. */
function fakeRequest(method: string, url: string, headers: Array<[string, string]>, body?: string): IncomingMessage {
  const req = new IncomingMessage(new Socket())
  req.method = method
  req.url = url
  req.httpVersion = '1.1'
  req.httpVersionMajor = 1
  req.httpVersionMinor = 1
  req.rawHeaders = headers.flat()
  if (body !== undefined) req.push(Buffer.from(body))
  req.push(null)
  req.complete = true
  return req
}

/** A response whose bytes land in `wire`. */
function fakeResponse(req: IncomingMessage): { res: ServerResponse; wire: () => string; done: Promise<void> } {
  const res = new ServerResponse(req)
  const sink = new PassThrough()
  const parts: Buffer[] = []
  sink.on('data', (c: Buffer) => parts.push(c))
  Object.assign(sink, { setNoDelay: () => sink, setTimeout: () => sink, _httpMessage: null })
  res.assignSocket(sink as unknown as Socket)
  const done = new Promise<void>((resolve) => res.once('finish', () => resolve()))
  return { res, wire: () => Buffer.concat(parts).toString('latin1'), done }
}

test('request target: absolute form, tunnel origin + path, and junk', () => {
  assert.equal(urlInput('http://a.test/x', undefined), 'http://a.test/x')
  assert.equal(urlInput('/x?y=1', { scheme: 'https', authority: 'a.test:8443' }), 'https://a.test:8443/x?y=1')
  assert.equal(urlInput('/x', undefined), undefined)
  assert.equal(urlInput('*', { scheme: 'https', authority: 'a.test:443' }), undefined)
  const href = createHrefResolver()
  assert.equal(href({ url: 'HTTP://A.test:80/p' }, undefined), 'http://a.test/p')
  assert.equal(href({ url: 'http://[::1' }, undefined), undefined)
  assert.deepEqual(parseAuthority('[::1]:443'), { hostname: '::1', port: 443 })
  assert.equal(parseAuthority('a.test'), undefined)
  assert.equal(parseAuthority('a.test:99999'), undefined)
})

test('request body: none without framing headers, bounded with', async () => {
  assert.equal(readBody(fakeRequest('GET', '/', []), [], 10), null)
  const small = readBody(fakeRequest('POST', '/', [['content-length', '5']], 'hello'), [['content-length', '5']], 10)
  assert.equal((await small)?.toString(), 'hello')
  const big = readBody(fakeRequest('POST', '/', [['content-length', '11']], 'hello world'), [['content-length', '11']], 10)
  assert.equal(await big, 'too-large')
})

test('exchange handler: replays a recorded chunked response, refuses a miss with the 403 refusal, and a big body with 413', async () => {
  const store = createMemoryStore()
  const enc = new TextEncoder()
  const body = bodyFromChunks([
    { bytes: enc.encode('data: a\n\n'), atMs: 0 },
    { bytes: enc.encode('data: b\n\n'), atMs: 5 },
  ])
  await store.putTrace({
    meta: { name: 't', format: 1 },
    exchanges: [
      {
        seq: 0,
        request: { method: 'GET', url: 'https://api.test/sse', headers: [], body: null },
        outcome: {
          kind: 'response',
          response: { status: 200, statusText: 'OK', headers: [['content-type', 'text/event-stream']], body: body.ref, trailers: [] },
        },
        timing: { startMs: 0, headersMs: 1 },
      },
    ],
    bodies: new Map([[body.ref.digest, body.bytes]]),
  })
  const session = await openSession({ mode: 'replay', trace: 't', store })
  const stats = createStats()
  const upstream = lazyUpstreamAgent({})
  const handle = createExchangeHandler({
    session,
    upstream,
    stats,
    pace: { kind: 'chunks' },
    chunkGapMs: 0,
    maxBodyBytes: 4,
    drainAfterAbortMs: 0,
    listening: () => '127.0.0.1:1',
    arrival: () => session.arrival(),
  })

  const req = fakeRequest('GET', '/sse', [['Host', 'api.test']])
  const ok = fakeResponse(req)
  await handle(req, ok.res, { scheme: 'https', authority: 'api.test' })
  await ok.done
  assert.match(ok.wire(), /^HTTP\/1\.1 200 OK\r\n/)
  assert.match(ok.wire(), /content-type: text\/event-stream/)
  // Chunked transfer coding, one HTTP chunk per recorded chunk.
  assert.match(ok.wire(), /9\r\ndata: a\n\n\r\n9\r\ndata: b\n\n\r\n0\r\n\r\n$/)

  const missReq = fakeRequest('GET', 'http://api.test/other', [])
  const miss = fakeResponse(missReq)
  handle(missReq, miss.res, undefined)
  await miss.done
  assert.match(miss.wire(), /^HTTP\/1\.1 403 Tool Replay Refused\r\n/)
  assert.match(miss.wire(), /x-should-retry: false/)
  assert.match(miss.wire(), new RegExp(`x-tool-replay-error: ${ErrorCodes.REPLAY_MISS}`))

  const bigReq = fakeRequest('POST', 'http://api.test/upload', [['content-length', '5']], 'hello')
  const big = fakeResponse(bigReq)
  await handle(bigReq, big.res, undefined)
  await big.done
  assert.match(big.wire(), /^HTTP\/1\.1 413 /)
  assert.match(big.wire(), new RegExp(`x-tool-replay-error: ${ErrorCodes.REQUEST_TOO_LARGE}`))
  assert.match(big.wire(), /--max-body-bytes/)

  const summary = await session.close()
  assert.equal(summary.misses.length, 2, 'the miss and the refused body both count against strict replay')
  assert.deepEqual({ replayed: stats.replayed, refused: stats.refused, badRequests: stats.badRequests }, { replayed: 1, refused: 1, badRequests: 1 })
  await upstream.close()
})
