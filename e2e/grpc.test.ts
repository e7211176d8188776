/**
 * gRPC with the real @grpc/grpc-js, client and server: a unary call (with response metadata), a
 * server-streaming call (three messages, trailers) and a call that fails with NOT_FOUND (a Trailers-Only
 * answer), recorded then strictly replayed with the server stopped, in-process (install()) and through the
 * proxy (grpc-js honours `grpc_proxy` with CONNECT, then h2 over TLS). The app sees the same messages,
 * metadata, status and trailers; the trace holds the message frames byte for byte.
 */
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { before, test } from 'node:test'
import * as grpc from '@grpc/grpc-js'
import { install } from 'tool-replay/interceptor'
import { createMemoryStore, type TraceStore } from 'tool-replay/store'
import { runCli } from '../cli/index.ts'
import { openStore } from '../store/index.ts'
import { bodyBytes, type Trace } from '../trace/index.ts'
import { callGreeter, type GreeterRun, greeterClient, startGreeter } from './support/grpc-fixture.ts'
import { startTestProxy, tempDir } from './support/proxy-harness.ts'
import { createTestPki } from './support/proxy-upstream.ts'

let pki: Awaited<ReturnType<typeof createTestPki>>
const storeDir = tempDir('tr-grpc-')

before(async () => {
  pki = await createTestPki(['grpc.test'])
})

const EXPECTED: GreeterRun = {
  unary: { value: { message: 'hello Ada' }, metadata: { 'content-type': 'application/grpc+proto', 'x-greeter': 'yes' } },
  stream: {
    messages: [0, 1, 2].map((n) => ({ n, message: `hello Bo #${n}` })),
    status: { code: grpc.status.OK, details: 'OK', trailer: { 'x-sent': '3' } },
  },
  missing: { code: grpc.status.NOT_FOUND, details: 'no such greeting' },
}

/** The run without the date the server adds to its metadata. */
function stable(run: GreeterRun): GreeterRun {
  const { date: _, ...metadata } = run.unary.metadata
  return { ...run, unary: { ...run.unary, metadata } }
}

/** gRPC frames of a body: [compressed flag, message] per 5-byte-prefixed frame. */
function frames(bytes: Uint8Array): Array<[number, string]> {
  const out: Array<[number, string]> = []
  const b = Buffer.from(bytes)
  for (let at = 0; at + 5 <= b.length; ) {
    const length = b.readUInt32BE(at + 1)
    out.push([b[at] as number, b.subarray(at + 5, at + 5 + length).toString()])
    at += 5 + length
  }
  return out
}

function assertTrace(trace: Trace) {
  const byMethod = (m: string) => trace.exchanges.find((x) => x.request.url.endsWith(`/test.Greeter/${m}`))
  const stream = byMethod('StreamHellos')?.outcome
  assert.equal(stream?.kind, 'response')
  if (stream?.kind !== 'response') return
  assert.deepEqual(frames(bodyBytes(trace, stream.response.body)), [
    [0, '{"n":0,"message":"hello Bo #0"}'],
    [0, '{"n":1,"message":"hello Bo #1"}'],
    [0, '{"n":2,"message":"hello Bo #2"}'],
  ])
  assert.ok(stream.response.body.chunks.length >= 3, 'each message frame arrived in its own DATA frame')
  assert.deepEqual(
    stream.response.trailers.filter(([k]) => k !== 'x-sent'),
    [
      ['grpc-status', '0'],
      ['grpc-message', 'OK'],
    ],
  )
  const missing = byMethod('Missing')?.outcome
  assert.equal(missing?.kind === 'response' && missing.response.headers.find(([k]) => k === 'grpc-status')?.[1], '5', 'Trailers-Only: the status in the head')
  const unary = byMethod('SayHello')
  assert.ok(unary?.request.headers.some(([k, v]) => k === 'content-type' && v === 'application/grpc'))
}

test('grpc-js in-process: recorded, then strictly replayed with the server stopped', async () => {
  for (const secure of [false, true]) {
    const server = await startGreeter(secure ? pki.certs['grpc.test'] : undefined)
    const target = `localhost:${server.port}`
    const credentials = () => (secure ? grpc.credentials.createSsl(Buffer.from(pki.caPem)) : grpc.credentials.createInsecure())
    // The server's certificate names grpc.test; the channel connects to localhost.
    const channel = secure ? { 'grpc.ssl_target_name_override': 'grpc.test' } : {}
    const store = createMemoryStore()
    const trace = `greeter-${secure ? 'tls' : 'plain'}`

    const rec = await install({ mode: 'record', trace, store })
    const client = greeterClient(target, credentials(), channel)
    const live = await callGreeter(client).finally(() => {
      client.close()
      return rec.close()
    })
    assert.deepEqual(stable(live), EXPECTED, `live (${trace})`)
    assert.deepEqual(server.calls, ['SayHello', 'StreamHellos', 'Missing'])
    assertTrace(await store.readTrace(trace))
    const seen = server.connections
    await server.close()

    const rep = await install({ mode: 'replay', trace, store })
    const again = greeterClient(target, credentials(), channel)
    const replayed = await callGreeter(again).finally(() => {
      again.close()
      return rep.close()
    })
    assert.equal(rep.summary().ok, true, JSON.stringify(rep.summary().misses))
    assert.deepEqual(replayed, live, `replayed as recorded (${trace})`)
    assert.equal(server.connections, seen, 'nothing reached the stopped server')
  }
})

/** `tr-proxy show --exchange N` prints the streaming call's messages one by one, and its trailers. */
async function assertShown(trace: Trace) {
  const dir = tempDir('tr-grpc-show-')
  const disk = await openStore(join(dir, 'store'))
  await disk.putTrace(trace)
  await disk.close()
  const seq = trace.exchanges.find((x) => x.request.url.endsWith('/StreamHellos'))?.seq
  const out: string[] = []
  const code = await runCli(['show', trace.meta.name, '--exchange', String(seq), '--view', 'http', '--store', join(dir, 'store')], {
    out: (t) => out.push(t),
    err: (t) => out.push(t),
  })
  const text = out.join('\n')
  assert.equal(code, 0, text)
  for (const n of [0, 1, 2]) assert.ok(text.includes(`\n[gRPC message #${n}, 31 bytes, json] {"n":${n},"message":"hello Bo #${n}"}`), text)
  assert.ok(text.includes('>\n[gRPC message #0, 23 bytes, json] {"name":"Bo","count":3}\n'), text)
  assert.ok(text.includes('\n< (trailer) grpc-status: 0\n< (trailer) grpc-message: OK'), text)
}

/** Runs `fn` with grpc-js routed through `proxyUrl` (it reads grpc_proxy when a channel is made). */
async function viaProxy<T>(proxyUrl: string, fn: () => Promise<T>): Promise<T> {
  const saved = process.env.grpc_proxy
  process.env.grpc_proxy = proxyUrl
  try {
    return await fn()
  } finally {
    if (saved === undefined) delete process.env.grpc_proxy
    else process.env.grpc_proxy = saved
  }
}

async function proxyRun(store: TraceStore, trace: string, mode: 'record' | 'replay', port: number, secure: boolean) {
  const proxy = await startTestProxy({
    store,
    storeDir,
    trace,
    mode,
    upstreamCaPem: pki.caPem,
    resolve: { 'grpc.test': { host: '127.0.0.1', port } },
  })
  const run = await viaProxy(proxy.url, async () => {
    // TLS: CONNECT, then h2 by ALPN through the proxy's CA; cleartext: CONNECT, then the HTTP/2 preface.
    const client = secure
      ? greeterClient('grpc.test:443', grpc.credentials.createSsl(Buffer.from(proxy.ca.certPem)))
      : greeterClient('grpc.test:50051', grpc.credentials.createInsecure())
    return callGreeter(client).finally(() => client.close())
  })
  const summary = await proxy.close()
  return { run, summary, stats: proxy.stats }
}

test('grpc-js through the proxy (grpc_proxy), TLS and cleartext: recorded, then strictly replayed with the server stopped', async () => {
  for (const secure of [true, false]) {
    const trace = `greeter-proxy-${secure ? 'tls' : 'plain'}`
    const server = await startGreeter(secure ? pki.certs['grpc.test'] : undefined)
    const store = createMemoryStore()
    const rec = await proxyRun(store, trace, 'record', server.port, secure)
    assert.deepEqual(stable(rec.run), EXPECTED, trace)
    const recorded = await store.readTrace(trace)
    assertTrace(recorded)
    if (secure) await assertShown(recorded)
    const seen = server.connections
    const port = server.port
    await server.close()
    const rep = await proxyRun(store, trace, 'replay', port, secure)
    assert.equal(rep.summary.ok, true, JSON.stringify(rep.summary.misses))
    assert.equal(rep.stats.forwarded, 0)
    assert.deepEqual(rep.run, rec.run, trace)
    assert.equal(server.connections, seen, 'nothing reached the stopped server')
  }
})

test('a call the recording lacks is refused with PERMISSION_DENIED naming TR_REPLAY_MISS, and counted', async () => {
  const server = await startGreeter()
  const target = `127.0.0.1:${server.port}`
  const store = createMemoryStore()
  const rec = await install({ mode: 'record', trace: 'greeter-miss', store })
  const client = greeterClient(target, grpc.credentials.createInsecure())
  await callGreeter(client).finally(() => {
    client.close()
    return rec.close()
  })
  await server.close()
  const rep = await install({ mode: 'replay', trace: 'greeter-miss', store })
  const again = greeterClient(target, grpc.credentials.createInsecure())
  try {
    const err = await new Promise<grpc.ServiceError>((resolve, reject) =>
      again.sayHello({ name: 'Someone else' }, (e: grpc.ServiceError | null) => (e ? resolve(e) : reject(new Error('answered')))),
    )
    assert.equal(err.code, grpc.status.PERMISSION_DENIED)
    assert.match(err.details, /^TR_REPLAY_MISS: Failed to replay "POST http:\/\/127\.0\.0\.1:\d+\/test\.Greeter\/SayHello"/)
    assert.equal(err.metadata.get('x-tool-replay-error')[0], 'TR_REPLAY_MISS')
  } finally {
    again.close()
    await rep.close()
  }
  assert.equal(rep.summary().ok, false)
  assert.equal(rep.summary().misses.length, 1)
})
