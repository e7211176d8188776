/**
 * Fork patches keep an exchange coherent, checked where the client looks: each patched trace replays through
 * the interceptor (Node's fetch) and through the proxy (undici's fetch over CONNECT + MITM).
 *  - a new body on a gzip/br/deflate/zstd response (body=@FILE, $.x=...) drops the encoding and fixes the
 *    length, so the client reads the new JSON instead of failing to decode it (Z_DATA_ERROR);
 *  - error=CODE@response-body[:BYTES] delivers that much of the recorded body (default half) before the reset;
 *  - error=ETIMEDOUT@request says "read ETIMEDOUT", not "connect ETIMEDOUT";
 *  - `tr-proxy fork` says what it adjusted.
 */
import assert from 'node:assert/strict'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import * as zlib from 'node:zlib'
import { install } from 'tool-replay/interceptor'
import { openStore, type TraceStore } from 'tool-replay/store'
import { bodyFromChunks, type Exchange, type HeaderPairs, type Trace } from 'tool-replay/trace'
import { ProxyAgent, fetch as undiciFetch } from 'undici'
import { runCli } from '../cli/main.ts'
import { startTestProxy, tempDir } from './support/proxy-harness.ts'

const enc = new TextEncoder()
const zstdCompress = (zlib as unknown as { zstdCompressSync?: (b: Uint8Array) => Buffer }).zstdCompressSync
const CODINGS: Array<[string, (b: Uint8Array) => Uint8Array]> = [
  ['gzip', (b) => zlib.gzipSync(b)],
  ['br', (b) => zlib.brotliCompressSync(b)],
  ['deflate', (b) => zlib.deflateSync(b)],
  ...(zstdCompress ? [['zstd', (b: Uint8Array) => zstdCompress(b)] as [string, (b: Uint8Array) => Uint8Array]] : []),
]

const url = (path: string) => `https://api.test/${path}`

function exchange(seq: number, path: string, chunks: Uint8Array[], headers: HeaderPairs): { x: Exchange; bytes: Uint8Array } {
  const body = bodyFromChunks(chunks.map((bytes, i) => ({ bytes, atMs: i })))
  return {
    x: {
      seq,
      request: { method: 'GET', url: url(path), headers: [], body: null },
      outcome: {
        kind: 'response',
        response: { status: 200, statusText: 'OK', headers: [...headers, ['content-length', String(body.ref.size)]], body: body.ref, trailers: [] },
      },
      timing: { startMs: seq, headersMs: 1 },
    },
    bytes: body.bytes,
  }
}

/** The source: one JSON response per coding, a 4000-byte and a 3000-byte body in 1000-byte chunks, a plain one. */
function sourceTrace(): Trace {
  const parts = [
    ...CODINGS.map(([coding, encode], i) =>
      exchange(
        i,
        `encoded/${coding}`,
        [encode(enc.encode(`{"n":1,"coding":"${coding}"}`))],
        [
          ['content-type', 'application/json'],
          ['content-encoding', coding],
        ],
      ),
    ),
  ]
  const n = parts.length
  const kb = (c: string) => enc.encode(c.repeat(1000))
  parts.push(exchange(n, 'stream/4000', [kb('a'), kb('b'), kb('c'), kb('d')], [['content-type', 'text/plain']]))
  parts.push(exchange(n + 1, 'stream/3000', [kb('a'), kb('b'), kb('c')], [['content-type', 'text/plain']]))
  parts.push(exchange(n + 2, 'slow', [enc.encode('late')], [['content-type', 'text/plain']]))
  return {
    meta: { name: 'source', format: 1 },
    exchanges: parts.map((p) => p.x),
    bodies: new Map(parts.map((p) => [p.x.outcome.kind === 'response' ? p.x.outcome.response.body.digest : '', p.bytes])),
  }
}

const dir = tempDir('tr-fork-coherence-')
const storeDir = join(dir, 'store')
let store: TraceStore
const n = CODINGS.length
let forkOut = ''

before(async () => {
  store = await openStore(storeDir)
  await store.putTrace(sourceTrace())
  const patches: string[] = []
  CODINGS.forEach(([coding], i) => {
    if (i % 2 === 0) {
      const file = join(dir, `${coding}.json`)
      writeFileSync(file, `{"replaced":"${coding}"}`)
      patches.push(`#${i} body=@${file}`)
    } else patches.push(`#${i} $.n=2`)
  })
  patches.push(`#${n} error=ECONNRESET@response-body:1500`, `#${n + 1} error=ECONNRESET@response-body`, `#${n + 2} error=ETIMEDOUT@request`)
  const out: string[] = []
  const err: string[] = []
  const code = await runCli(['fork', 'source', '--to', 'branch', '--store', storeDir, ...patches.flatMap((p) => ['--patch', p])], {
    out: (t) => out.push(t),
    err: (t) => err.push(t),
  })
  assert.equal(code, 0, err.join('\n'))
  forkOut = out.join('\n')
})
after(() => store.close())

/** What a client gets for every exchange of the branch, with the given fetch. */
async function clientView(get: (u: string) => Promise<Response>) {
  const encoded: Record<string, unknown> = {}
  for (const [coding] of CODINGS) {
    const res = await get(url(`encoded/${coding}`))
    encoded[coding] = { status: res.status, encoding: res.headers.get('content-encoding'), body: await res.json() }
  }
  const partial = async (path: string) => {
    const res = await get(url(path))
    assert.equal(res.status, 200)
    assert.equal(res.headers.get('content-length'), null)
    const reader = (res.body as ReadableStream<Uint8Array>).getReader()
    let bytes = 0
    let text = ''
    for (;;) {
      try {
        const { done, value } = await reader.read()
        if (done) return { bytes, text, failed: false }
        bytes += value.byteLength
        text += new TextDecoder().decode(value)
      } catch (error) {
        return { bytes, text, failed: true, error }
      }
    }
  }
  return { encoded, cut: await partial('stream/4000'), half: await partial('stream/3000'), slow: await get(url('slow')).catch((e: unknown) => e) }
}

function expectedEncoded() {
  return Object.fromEntries(
    CODINGS.map(([coding], i) => [coding, { status: 200, encoding: null, body: i % 2 === 0 ? { replaced: coding } : { n: 2, coding } }]),
  )
}

test('tr-proxy fork says what each patch adjusted', () => {
  for (const [coding] of CODINGS)
    assert.match(forkOut, new RegExp(`content-encoding ${coding} dropped, body stored (as given|decoded) \\(\\d+ bytes\\); content-length \\d+`))
  assert.match(forkOut, /ECONNRESET after 1500 of 4000 body bytes \(2 recorded chunk\(s\)\); content-length removed/)
  assert.match(forkOut, /ECONNRESET after 1500 of 3000 body bytes \(2 recorded chunk\(s\)\); content-length removed/)
})

test('through the interceptor: new bodies decode, partial bodies arrive before the reset, phase messages', async () => {
  const tr = await install({ mode: 'replay', trace: 'branch', store })
  let view: Awaited<ReturnType<typeof clientView>>
  try {
    view = await clientView((u) => fetch(u))
  } finally {
    await tr.close()
  }
  assert.deepEqual(view.encoded, expectedEncoded())
  assert.deepEqual([view.cut.bytes, view.cut.failed, view.cut.text], [1500, true, `${'a'.repeat(1000)}${'b'.repeat(500)}`])
  assert.equal(((view.cut.error as Error).cause as { code?: string } | undefined)?.code, 'ECONNRESET')
  assert.deepEqual([view.half.bytes, view.half.failed], [1500, true])
  const cause = (view.slow as Error & { cause?: Error & { code?: string } }).cause
  assert.equal(cause?.code, 'ETIMEDOUT')
  assert.equal(cause?.message, 'read ETIMEDOUT')
  assert.equal((cause as { syscall?: string } | undefined)?.syscall, 'read')
  assert.equal(tr.summary().ok, true, 'every exchange replayed, none unused')
})

test('through the proxy: the same, as an HTTPS client behind the proxy reads it', async () => {
  const proxy = await startTestProxy({ store, storeDir, mode: 'replay', trace: 'branch', upstreamCaPem: '', resolve: {} })
  const agent = new ProxyAgent({ uri: proxy.url, requestTls: { ca: proxy.ca.certPem } })
  let view: Awaited<ReturnType<typeof clientView>>
  try {
    view = await clientView((u) => undiciFetch(u, { dispatcher: agent }) as unknown as Promise<Response>)
  } finally {
    await agent.close()
  }
  const summary = await proxy.close()
  assert.deepEqual(view.encoded, expectedEncoded())
  assert.deepEqual([view.cut.bytes, view.cut.failed, view.cut.text], [1500, true, `${'a'.repeat(1000)}${'b'.repeat(500)}`])
  assert.deepEqual([view.half.bytes, view.half.failed], [1500, true])
  const slow = view.slow as Response
  assert.equal(slow.status, 502)
  assert.equal(slow.headers.get('x-tool-replay-upstream-error'), 'ETIMEDOUT')
  const text = await slow.text()
  assert.match(text, /ETIMEDOUT during request: read ETIMEDOUT/)
  assert.doesNotMatch(text, /connect ETIMEDOUT/)
  assert.equal(summary.ok, true, 'every exchange replayed, none unused')
})
