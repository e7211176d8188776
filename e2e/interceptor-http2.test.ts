/**
 * node:http2 is not captured, so while install() is in place it is refused instead of going out: the proof is
 * an HTTP/2 server on loopback that counts connections and must see none, with the real AWS SDK Bedrock client
 * (HTTP/2 by default) and with `http2.connect` called directly (also through an ESM named import).
 * `http2: false` lets it through; close() restores it.
 */
import assert from 'node:assert/strict'
import http2, { connect as namedConnect } from 'node:http2'
import type { AddressInfo } from 'node:net'
import { test } from 'node:test'
import { BedrockRuntimeClient, ConverseCommand } from '@aws-sdk/client-bedrock-runtime'
import { install } from 'tool-replay/interceptor'
import { createMemoryStore } from 'tool-replay/store'

/** A cleartext HTTP/2 server that counts the TCP connections it accepted. */
async function startCountingH2() {
  const server = http2.createServer()
  let connections = 0
  server.on('connection', () => connections++)
  server.on('stream', (stream) => {
    stream.respond({ ':status': 200, 'content-type': 'text/plain' })
    stream.end('live')
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    get connections() {
      return connections
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }
}

/** One GET over a new HTTP/2 session; resolves with the body. */
function h2get(url: string, connect: typeof http2.connect = http2.connect): Promise<string> {
  return new Promise((resolve, reject) => {
    const session = connect(url)
    session.on('error', reject)
    const req = session.request({ ':path': '/' })
    let body = ''
    req.setEncoding('utf8')
    req.on('data', (c: string) => (body += c))
    req.on('end', () => {
      session.close()
      resolve(body)
    })
    req.on('error', reject)
    req.end()
  })
}

async function recordedEmpty(store: ReturnType<typeof createMemoryStore>, trace: string) {
  const rec = await install({ mode: 'record', trace, store })
  await rec.close()
}

test('strict replay refuses node:http2 with TR_CAPTURE_UNAVAILABLE, counts it as a miss, and nothing connects', async () => {
  const server = await startCountingH2()
  const store = createMemoryStore()
  await recordedEmpty(store, 'h2')
  const rep = await install({ mode: 'replay', trace: 'h2', store })
  try {
    assert.throws(
      () => http2.connect(server.url),
      (err: Error & { code?: string }) =>
        err.code === 'TR_CAPTURE_UNAVAILABLE' && err.message.includes(server.url) && err.message.includes('http2: false and nodeHttp: false'),
    )
    assert.throws(() => namedConnect(server.url), { code: 'TR_CAPTURE_UNAVAILABLE' }, 'an ESM named import is refused too')
    const bedrock = new BedrockRuntimeClient({
      region: 'us-east-1',
      endpoint: `https://127.0.0.1:${new URL(server.url).port}`,
      credentials: { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY' },
      maxAttempts: 1,
    })
    const sdkError = await bedrock.send(new ConverseCommand({ modelId: 'm', messages: [{ role: 'user', content: [{ text: 'hi' }] }] })).then(
      () => undefined,
      (err: Error & { code?: string }) => err,
    )
    assert.ok(sdkError, 'the SDK call fails')
    assert.ok(`${sdkError.code} ${sdkError.message}`.includes('TR_CAPTURE_UNAVAILABLE'), `${sdkError.name}: ${sdkError.message}`)
    assert.equal(server.connections, 0, 'nothing reached the HTTP/2 server')
    assert.equal(rep.summary().misses.length, 3)
    assert.equal(rep.summary().ok, false)
  } finally {
    await rep.close()
  }
  assert.equal(await h2get(server.url), 'live', 'close() gives node:http2 back')
  assert.equal(await h2get(server.url, namedConnect), 'live', 'and the named import')
  await server.close()
})

test('record mode refuses node:http2 too (it would go out unrecorded); http2: false with nodeHttp: false leaves it alone', async () => {
  const server = await startCountingH2()
  const store = createMemoryStore()
  const rec = await install({ mode: 'record', trace: 'h2-record', store })
  try {
    assert.throws(() => http2.connect(server.url), { code: 'TR_CAPTURE_UNAVAILABLE' })
    assert.equal(server.connections, 0)
  } finally {
    await rec.close()
  }
  // The node:http capture reads client sockets as HTTP/1.1 and would hold an HTTP/2 one: both are turned off.
  const open = await install({ mode: 'record', trace: 'h2-open', store, http2: false, nodeHttp: false })
  try {
    assert.equal(await h2get(server.url), 'live')
    assert.equal(server.connections, 1)
  } finally {
    await open.close()
    await server.close()
  }
})
