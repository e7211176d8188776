import assert from 'node:assert/strict'
import { once } from 'node:events'
import { type AddressInfo, createServer } from 'node:net'
import { describe, test } from 'node:test'
import { connect } from 'node:tls'
import { classifyFirstBytes, clientHelloServerName, FIRST_BYTES_LIMIT } from './first-bytes.ts'

/** The first bytes a real TLS client (Node's) sends, with or without a server name. */
async function clientHello(servername: string | undefined): Promise<Buffer> {
  const server = createServer()
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const accepted = once(server, 'connection')
  const client = connect({ host: '127.0.0.1', port: (server.address() as AddressInfo).port, ...(servername ? { servername } : {}) })
  client.on('error', () => {})
  const [socket] = (await accepted) as [import('node:net').Socket]
  const [bytes] = (await once(socket, 'data')) as [Buffer]
  client.destroy()
  socket.destroy()
  server.close()
  return bytes
}

describe('first bytes of a redirected connection', () => {
  test('a TLS ClientHello gives its server name; split anywhere, it asks for more until its record is whole', async () => {
    const hello = await clientHello('API.Example.test')
    assert.deepEqual(classifyFirstBytes(hello, false), { kind: 'tls', serverName: 'api.example.test' })
    const at = hello.indexOf('API.Example.test')
    for (const cut of [1, 4, 5, 40, at + 3]) assert.deepEqual(classifyFirstBytes(hello.subarray(0, cut), false), { kind: 'more' }, `cut at ${cut}`)
    // Nothing more comes: TLS without a name (the caller falls back to the DNS name).
    assert.deepEqual(classifyFirstBytes(hello.subarray(0, 40), true), { kind: 'tls', serverName: undefined })
  })

  test('a ClientHello without SNI (a client that connected to an IP address)', async () => {
    const hello = await clientHello(undefined)
    assert.equal(clientHelloServerName(hello), undefined)
    assert.deepEqual(classifyFirstBytes(hello, false), { kind: 'tls', serverName: undefined })
  })

  test('HTTP/1.x: the Host of the first request; a head cut short waits for more', () => {
    const request = Buffer.from('POST /v1/chat HTTP/1.1\r\nContent-Type: application/json\r\nHOST:  api.test:8080 \r\n\r\n{}')
    assert.deepEqual(classifyFirstBytes(request, false), { kind: 'http', proxyForm: false, host: 'api.test:8080' })
    for (const cut of [1, 4, 10, 30]) assert.deepEqual(classifyFirstBytes(request.subarray(0, cut), false), { kind: 'more' }, `cut at ${cut}`)
    assert.deepEqual(classifyFirstBytes(Buffer.from('GET / HTTP/1.0\r\n\r\n'), false), { kind: 'http', proxyForm: false, host: undefined })
    assert.deepEqual(classifyFirstBytes(Buffer.from('GET / HTTP/1.1\r\nAccept: */*\r\n'), true), { kind: 'http', proxyForm: false, host: undefined })
  })

  test('a proxy request (CONNECT, absolute form) is told apart from a transparent one', () => {
    assert.deepEqual(classifyFirstBytes(Buffer.from('CONNECT api.test:443 HTTP/1.1\r\nHost: api.test:443\r\n\r\n'), false), {
      kind: 'http',
      proxyForm: true,
      host: undefined,
    })
    assert.deepEqual(classifyFirstBytes(Buffer.from('GET http://api.test/x HTTP/1.1\r\n'), false), { kind: 'http', proxyForm: true, host: undefined })
  })

  test('HTTP/2 prior knowledge, databases, garbage, silence', () => {
    assert.deepEqual(classifyFirstBytes(Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), false), { kind: 'h2c' })
    assert.deepEqual(classifyFirstBytes(Buffer.from('PRI * HT'), false), { kind: 'more' })
    // PostgreSQL's startup message: length, protocol 3.0.
    assert.deepEqual(classifyFirstBytes(Buffer.from([0, 0, 0, 8, 4, 0xd2, 0x16, 0x2f]), false), { kind: 'other' })
    assert.deepEqual(classifyFirstBytes(Buffer.from('*1\r\n$4\r\nPING\r\n'), false), { kind: 'other' }) // Redis
    assert.deepEqual(classifyFirstBytes(Buffer.from('HELO x\r\n'), false), { kind: 'other' })
    assert.deepEqual(classifyFirstBytes(Buffer.alloc(0), false), { kind: 'more' })
    assert.deepEqual(classifyFirstBytes(Buffer.alloc(0), true), { kind: 'other' })
    // A line that looks like a method but never becomes a request line is judged at the limit.
    assert.deepEqual(classifyFirstBytes(Buffer.from(`GET ${'a'.repeat(FIRST_BYTES_LIMIT)}`), false), { kind: 'other' })
  })
})
