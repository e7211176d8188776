import assert from 'node:assert/strict'
import { once } from 'node:events'
import { createServer, type RequestListener } from 'node:http'
import type { AddressInfo } from 'node:net'
import { test } from 'node:test'
import { rawLoad } from './raw-http.ts'

const BODY = Buffer.alloc(1024, 'x')

/** A node:http server on loopback for one test; what it saw is counted. */
async function serve(handler: RequestListener) {
  const seen: Array<{ url: string; host: string | undefined }> = []
  const server = createServer((req, res) => {
    seen.push({ url: req.url ?? '', host: req.headers.host })
    handler(req, res)
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return { url, seen, close: () => server.close() }
}

const job = (url: string, amount: number) => ({
  kind: 'raw' as const,
  url,
  path: 'http://bench.test/kb',
  host: 'bench.test',
  amount,
  connections: 4,
  bodyBytes: BODY.byteLength,
})

test('every request is sent as written and every whole 200 answer of the right length is counted', async () => {
  const s = await serve((_req, res) => {
    // Head and body in separate writes, so answers arrive cut at odd places.
    res.writeHead(200, { 'content-length': BODY.byteLength })
    res.write(BODY.subarray(0, 7))
    setImmediate(() => res.end(BODY.subarray(7)))
  })
  const r = await rawLoad(job(s.url, 103))
  s.close()
  assert.deepEqual([r.total, r.errors], [103, 0])
  assert.equal(s.seen.length, 103)
  assert.ok(s.seen.every((x) => x.url === 'http://bench.test/kb' && x.host === 'bench.test'))
})

test('an answer that is not 200, or whose body is not the expected length, is an error and not counted', async () => {
  for (const [status, body] of [
    [503, BODY],
    [200, BODY.subarray(1)],
  ] as const) {
    const s = await serve((_req, res) => {
      res.writeHead(status, { 'content-length': body.byteLength })
      res.end(body)
    })
    const r = await rawLoad(job(s.url, 10))
    s.close()
    assert.equal(r.total, 0, `status ${status}, ${body.byteLength} bytes`)
    assert.ok(r.errors > 0)
  }
})

test('a server that closes connections leaves the requests unanswered: the count says so and the run ends', async () => {
  let n = 0
  const s = await serve((req, res) => {
    if (++n % 3 === 0) req.socket.destroy()
    else {
      res.writeHead(200, { 'content-length': BODY.byteLength })
      res.end(BODY)
    }
  })
  const r = await rawLoad(job(s.url, 50))
  s.close()
  assert.ok(r.total < 50, `${r.total} answered`)
})
