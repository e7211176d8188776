import assert from 'node:assert/strict'
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { bodyChunk, bodyFromBytes, bodyFromChunks, ErrorCodes, type Exchange, isToolReplayError, sha256, type Trace } from '../trace/index.ts'
import { faultedExchange, jsonTrace, websocketExchange } from './fixtures/exchanges.ts'
import { exportTrace, parseTraceFile, readTraceFile, TRACE_FILE_VERSIONS, traceDigest, writeTraceFile } from './trace-file.ts'

const root = await mkdtemp(join(tmpdir(), 'tr-file-'))
after(() => rm(root, { recursive: true, force: true }))
const enc = new TextEncoder()

/** A trace with every body form: JSON text, an SSE stream, small and big binary, an error with a partial body. */
function mixedTrace(): Trace {
  const bodies = new Map<string, Uint8Array>()
  const keep = (b: { ref: Exchange['request']['body'] & object; bytes: Uint8Array }) => {
    bodies.set(b.ref.digest, b.bytes)
    return b.ref
  }
  const sse = keep(
    bodyFromChunks([
      { bytes: enc.encode('data: {"delta":"Hel"}\n\n'), atMs: 120 },
      { bytes: enc.encode('data: {"delta":"lo ✓"}\n\n'), atMs: 180.4 },
      { bytes: enc.encode('data: [DONE]\n\n'), atMs: 240 },
    ]),
  )
  const small = keep(bodyFromBytes(new Uint8Array([0, 1, 2, 255, 254])))
  const bigBytes = new Uint8Array(70 * 1024).map((_, i) => (i * 7919) % 251)
  const big = keep(
    bodyFromChunks([
      { bytes: bigBytes.subarray(0, 30000), atMs: 5 },
      { bytes: bigBytes.subarray(30000), atMs: 9 },
    ]),
  )
  const json = keep(bodyFromBytes(enc.encode('{"model":"m","stream":true}')))
  const partial = keep(bodyFromChunks([{ bytes: enc.encode('{"half":'), atMs: 3 }]))
  const empty = keep(bodyFromBytes(new Uint8Array()))
  const head = (type: string) => [['content-type', type]] as Array<[string, string]>
  const exchanges: Exchange[] = [
    {
      seq: 0,
      request: { method: 'POST', url: 'https://api.test/v1/chat', headers: [...head('application/json'), ['x-a', '1'], ['x-a', '2']], body: json },
      outcome: { kind: 'response', response: { status: 200, statusText: 'OK', headers: head('text/event-stream; charset=utf-8'), trailers: [], body: sse } },
      timing: { startMs: 0, headersMs: 100 },
    },
    {
      seq: 1,
      origin: 'patched',
      patchId: 'p1',
      request: { method: 'GET', url: 'https://api.test/img.png', headers: [], body: null },
      outcome: { kind: 'response', response: { status: 200, statusText: 'OK', headers: head('image/png'), trailers: [['x-t', 'v']], body: small } },
      timing: { startMs: 5, headersMs: 1 },
    },
    {
      seq: 2,
      request: { method: 'GET', url: 'https://api.test/big.bin', headers: [], body: null },
      outcome: { kind: 'response', response: { status: 200, statusText: 'OK', headers: head('application/octet-stream'), trailers: [], body: big } },
      timing: { startMs: 6, headersMs: 1 },
    },
    {
      seq: 3,
      request: { method: 'GET', url: 'https://api.test/reset', headers: [], body: null },
      outcome: {
        kind: 'error',
        error: {
          code: 'ECONNRESET',
          message: 'socket hang up',
          phase: 'response-body',
          partial: { status: 200, statusText: 'OK', headers: head('application/json'), trailers: [], body: partial },
        },
      },
      timing: { startMs: 7, headersMs: 2 },
    },
    {
      seq: 4,
      request: { method: 'DELETE', url: 'https://api.test/x', headers: [], body: null },
      outcome: { kind: 'response', response: { status: 204, statusText: 'No Content', headers: [], trailers: [], body: empty } },
      timing: { startMs: 8, headersMs: 1 },
    },
  ]
  return { meta: { name: 'mixed', format: 1, labels: { recordedWith: 'test', a: 'b' } }, exchanges, bodies }
}

const expectCode =
  (code: string, ...fragments: string[]) =>
  (err: unknown) => {
    assert.ok(isToolReplayError(err), String(err))
    assert.equal(err.code, code, err.message)
    for (const f of fragments) assert.ok(err.message.includes(f), `${JSON.stringify(f)} not in: ${err.message}`)
    return true
  }

describe('trace files', () => {
  test('round trip keeps the trace and re-export is byte-identical', async () => {
    const file = join(root, 'rt', 'mixed.trace.json')
    const trace = mixedTrace()
    const written = await writeTraceFile(file, trace)
    assert.equal(written.digest, traceDigest(trace))
    const back = await readTraceFile(file)
    assert.deepEqual(back.meta, trace.meta)
    assert.deepEqual(back.exchanges, trace.exchanges)
    assert.deepEqual(back.bodies, trace.bodies)
    const text = await readFile(file, 'utf8')
    assert.equal(exportTrace(back).text, text)
    const again = join(root, 'rt2', 'mixed.trace.json')
    await writeTraceFile(again, back)
    assert.equal(await readFile(again, 'utf8'), text)
  })

  test('the file is readable: text inline, SSE chunks with times, binary as base64, big binary as a blob', () => {
    const { text, blobs } = exportTrace(mixedTrace())
    const file = JSON.parse(text)
    assert.deepEqual(Object.keys(file), ['format', 'version', 'digest', 'meta', 'exchanges'])
    assert.equal(file.exchanges[0].request.body.text, '{"model":"m","stream":true}')
    assert.deepEqual(file.exchanges[0].request.headers, [
      ['content-type', 'application/json'],
      ['x-a', '1'],
      ['x-a', '2'],
    ])
    assert.deepEqual(file.exchanges[0].outcome.response.body.events[1], { atMs: 180, text: 'data: {"delta":"lo ✓"}\n\n' })
    assert.equal(file.exchanges[1].outcome.response.body.base64, 'AAEC//4=')
    assert.match(file.exchanges[2].outcome.response.body.blob, /^blobs\/[0-9a-f]{64}$/)
    assert.equal(blobs.size, 1)
    assert.equal(file.exchanges[4].outcome.response.body.text, '')
    assert.ok(text.startsWith('{\n  "format": "tool-replay-trace",\n  "version": 1,'))
    assert.ok(!/"(createdAt|recordedAt|time)"/.test(text))
  })

  test('big binary bodies are written as content-addressed blob files', async () => {
    const dir = join(root, 'blobs')
    const trace = mixedTrace()
    await writeTraceFile(join(dir, 'a.trace.json'), trace)
    await writeTraceFile(join(dir, 'b.trace.json'), { ...trace, meta: { name: 'b', format: 1 } })
    const blobs = await readdir(join(dir, 'blobs'))
    assert.equal(blobs.length, 1, 'shared by both files')
    assert.equal(blobs[0], trace.exchanges[2]!.outcome.kind === 'response' ? trace.exchanges[2]!.outcome.response.body.digest : '')
    assert.deepEqual((await readdir(dir)).sort(), ['a.trace.json', 'b.trace.json', 'blobs'], 'no temp files left')
    await rm(join(dir, 'blobs'), { recursive: true })
    await assert.rejects(
      readTraceFile(join(dir, 'a.trace.json')),
      expectCode(ErrorCodes.TRACE_FILE_INVALID, 'exchanges[2].outcome.response.body.blob', 'blobs/'),
    )
  })

  test('editing one byte of a body is TR_TRACE_DIGEST_MISMATCH naming the exchange and field', () => {
    const { text, blobs } = exportTrace(mixedTrace())
    const tampered = text.replace('\\"m\\"', '\\"n\\"')
    assert.ok(tampered !== text)
    assert.throws(
      () => parseTraceFile(tampered, blobs, { file: 'x.trace.json' }),
      expectCode(ErrorCodes.TRACE_DIGEST_MISMATCH, 'x.trace.json', 'exchanges[0].request.body'),
    )
    const sse = text.replace('[DONE]', '[DONF]')
    assert.throws(() => parseTraceFile(sse, blobs), expectCode(ErrorCodes.TRACE_DIGEST_MISMATCH, 'exchanges[0].outcome.response.body'))
    const b64 = text.replace('AAEC//4=', 'AAEC//8=')
    assert.throws(() => parseTraceFile(b64, blobs), expectCode(ErrorCodes.TRACE_DIGEST_MISMATCH, 'exchanges[1].outcome.response.body'))
    const [digest, bytes] = [...blobs][0]!
    const flipped = new Uint8Array(bytes)
    flipped[1000] = (flipped[1000]! + 1) % 256
    assert.throws(() => parseTraceFile(text, new Map([[digest, flipped]])), expectCode(ErrorCodes.TRACE_DIGEST_MISMATCH, 'exchanges[2].outcome.response.body'))
  })

  test('editing anything else is caught by the trace digest', () => {
    const { text, blobs } = exportTrace(mixedTrace())
    assert.deepEqual(parseTraceFile(text, blobs).exchanges.length, 5)
    const edits: Array<[string, string]> = [
      ['"status": 204', '"status": 200'],
      ['"atMs": 180', '"atMs": 181'],
      ['["x-a", "2"]', '["x-a", "3"]'],
      ['"recordedWith": "test"', '"recordedWith": "tent"'],
    ]
    for (const [from, to] of edits) {
      const edited = text.replace(from, to)
      assert.ok(edited !== text, from)
      assert.throws(() => parseTraceFile(edited, blobs, { file: 'f.json' }), expectCode(ErrorCodes.TRACE_DIGEST_MISMATCH, 'f.json', 'recorded digest'))
    }
  })

  test('a re-recording that differs in one header and one timing differs in exactly those lines (and the digest)', () => {
    const a = mixedTrace()
    const b = mixedTrace()
    const x = b.exchanges.find((e) => e.request.headers.some(([k]) => k === 'x-a'))
    assert.ok(x)
    x.timing = { ...x.timing, headersMs: x.timing.headersMs + 7 }
    x.request.headers = x.request.headers.map(([k, v]) => [k, k === 'x-a' && v === '2' ? '2-later' : v])
    const la = exportTrace(a).text.split('\n')
    const lb = exportTrace(b).text.split('\n')
    assert.equal(la.length, lb.length, 'no lines added or removed')
    const changed = la.map((line, i) => [line, lb[i]]).filter(([p, q]) => p !== q)
    assert.deepEqual(
      changed.map(([p]) => (p as string).trim().split(':')[0]),
      ['"digest"', '["x-a", "2"]', '"timing"'],
    )
  })

  test('schema problems are TR_TRACE_FILE_INVALID naming the field', () => {
    const { text } = exportTrace(jsonTrace('s', 2))
    const file = JSON.parse(text)
    const bad = (mutate: (f: typeof file) => void, ...fragments: string[]) => {
      const copy = structuredClone(file)
      mutate(copy)
      assert.throws(
        () => parseTraceFile(JSON.stringify(copy), new Map(), { file: 'bad.json' }),
        expectCode(ErrorCodes.TRACE_FILE_INVALID, 'bad.json', ...fragments),
      )
    }
    bad((f) => (f.format = 'other'), 'format')
    bad((f) => (f.version = 3), 'version')
    bad((f) => (f.extra = 1), 'extra', 'not a known field')
    bad((f) => delete f.exchanges[1].timing, 'exchanges[1].timing', 'missing')
    bad((f) => (f.exchanges[0].request.headers = [['a']]), 'exchanges[0].request.headers[0]')
    bad((f) => (f.exchanges[0].outcome.kind = 'maybe'), 'exchanges[0].outcome.kind')
    bad((f) => (f.exchanges[0].outcome.response.status = 'ok'), 'exchanges[0].outcome.response.status')
    bad((f) => (f.exchanges[0].request.body.base64 = 'AA=='), 'exchanges[0].request.body', 'exactly one')
    bad((f) => (f.exchanges[0].request.body.chunks[0].size = 1), 'exchanges[0].request.body.chunks', 'add up')
    bad((f) => (f.digest = 'nope'), 'digest', 'sha256')
    assert.throws(() => parseTraceFile('{"format": '), expectCode(ErrorCodes.TRACE_FILE_INVALID, 'not valid JSON'))
  })

  test('traceDigest ignores formatting and body-map extras but not content', () => {
    const a = jsonTrace('d', 3)
    const b = structuredClone(a)
    b.bodies.set('f'.repeat(64), new Uint8Array([1]))
    assert.equal(traceDigest(a), traceDigest(b))
    b.exchanges[0]!.timing.headersMs = 3
    assert.notEqual(traceDigest(a), traceDigest(b))
    assert.match(traceDigest(a), /^[0-9a-f]{64}$/)
  })

  test('a WebSocket session keeps its messages (text inline, binary as base64, frames as chunks); re-export is byte-identical', async () => {
    const base = jsonTrace('ws', 1)
    const w = websocketExchange(1)
    const trace: Trace = { meta: base.meta, exchanges: [...base.exchanges, w.exchange], bodies: new Map([...base.bodies, ...w.bodies]) }
    const file = join(root, 'ws', 'ws.trace.json')
    await writeTraceFile(file, trace)
    const text = await readFile(file, 'utf8')
    assert.ok(text.includes('"text": "{\\"type\\":\\"session.updated\\"}"'), text)
    assert.ok(text.includes('"base64": "AAEC//4="'))
    const back = await readTraceFile(file)
    assert.deepEqual(back.exchanges, trace.exchanges)
    assert.deepEqual(back.bodies, trace.bodies)
    assert.equal(exportTrace(back).text, text)
    const doc = JSON.parse(text)
    doc.exchanges[1].websocket.messages[1].opcode = 'binary'
    assert.throws(() => parseTraceFile(JSON.stringify(doc)), expectCode(ErrorCodes.TRACE_DIGEST_MISMATCH))
    const copy = JSON.parse(text)
    copy.exchanges[1].websocket.messages[0].extra = 1
    assert.throws(
      () => parseTraceFile(JSON.stringify(copy), new Map(), { file: 'f.json' }),
      expectCode(ErrorCodes.TRACE_FILE_INVALID, 'websocket.messages[0].extra'),
    )
  })

  test('an exchange sent over HTTP/2 keeps its version; a file that says another version is refused naming the field', async () => {
    const trace = jsonTrace('h2', 2)
    const h2 = trace.exchanges[1] as Exchange
    trace.exchanges[1] = { ...h2, request: { ...h2.request, httpVersion: '2' } }
    const file = join(root, 'h2', 'h2.trace.json')
    const written = await writeTraceFile(file, trace)
    assert.equal(written.digest, traceDigest(trace))
    const text = await readFile(file, 'utf8')
    const back = await readTraceFile(file)
    assert.equal(back.exchanges[1]?.request.httpVersion, '2')
    assert.equal(back.exchanges[0]?.request.httpVersion, undefined)
    assert.equal(exportTrace(back).text, text)
    assert.notEqual(traceDigest(back), traceDigest(jsonTrace('h2', 2)), 'the version is part of what the digest covers')
    const doc = JSON.parse(text)
    doc.exchanges[1].request.httpVersion = '1.1'
    assert.throws(
      () => parseTraceFile(JSON.stringify(doc), new Map(), { file: 'f.json' }),
      expectCode(ErrorCodes.TRACE_FILE_INVALID, 'exchanges[1].request.httpVersion'),
    )
  })

  test('a faulted WebSocket session keeps what the upstream sent (fault.websocket) through a trace file', async () => {
    const base = jsonTrace('wsf', 1)
    const w = websocketExchange(1)
    const outcome = w.exchange.outcome
    const upstream = {
      messages: (w.exchange.websocket?.messages ?? []).map((m) => ({ from: m.from, opcode: m.opcode, atMs: m.atMs, digest: m.body.digest, size: m.body.size })),
    }
    const faulted: Exchange = {
      ...w.exchange,
      fault: { rule: 'r1', kind: 'ws_drop', phase: 'mid-body', seed: '7', call: 1, upstream: outcome, websocket: upstream },
    }
    const trace: Trace = { meta: base.meta, exchanges: [...base.exchanges, faulted], bodies: new Map([...base.bodies, ...w.bodies]) }
    const file = join(root, 'wsf', 'wsf.trace.json')
    await writeTraceFile(file, trace)
    const text = await readFile(file, 'utf8')
    const back = await readTraceFile(file)
    assert.deepEqual(back.exchanges[1]?.fault?.websocket, upstream)
    assert.deepEqual(back.exchanges, trace.exchanges)
    // (The streamed writer refers to the repeated empty 101 body by ref, a version-2 file; exportTrace writes it
    // inline, version 1: both read back to this trace, with the same digest.)
    assert.equal(traceDigest(back), traceDigest(trace))
    assert.equal(exportTrace(back).text, exportTrace(trace).text)
    const doc = JSON.parse(text)
    doc.exchanges[1].fault.websocket.messages[0].digest = 'nope'
    assert.throws(
      () => parseTraceFile(JSON.stringify(doc), new Map(), { file: 'f.json' }),
      expectCode(ErrorCodes.TRACE_FILE_INVALID, 'fault.websocket.messages[0].digest'),
    )
  })

  test('a faulted exchange keeps its fault record and what the upstream really sent; re-export is byte-identical', async () => {
    const base = jsonTrace('faulted', 1)
    const f = faultedExchange(1)
    const trace: Trace = { meta: base.meta, exchanges: [...base.exchanges, f.exchange], bodies: new Map([...base.bodies, ...f.bodies]) }
    const file = join(root, 'faulted', 'faulted.trace.json')
    await writeTraceFile(file, trace)
    const text = await readFile(file, 'utf8')
    // The upstream's body (the app never saw it) is written inline like any body.
    assert.match(
      text,
      /"fault": \{\n\s+"rule": "lost-ack",\n\s+"kind": "response_lost",\n\s+"phase": "after-response",\n\s+"seed": "42",\n\s+"call": 1,\n\s+"upstream": \{/,
    )
    assert.ok(text.includes('"text": "{\\"id\\":\\"s-1\\"}"'))
    const back = await readTraceFile(file)
    assert.deepEqual(back.exchanges, trace.exchanges)
    assert.deepEqual(back.bodies, trace.bodies)
    assert.equal(exportTrace(back).text, text)
    // The fault is covered by the digest and read strictly.
    const doc = JSON.parse(text)
    doc.exchanges[1].fault.call = 2
    assert.throws(() => parseTraceFile(JSON.stringify(doc)), expectCode(ErrorCodes.TRACE_DIGEST_MISMATCH))
    const bad = (mutate: (x: Record<string, unknown>) => void, ...fragments: string[]) => {
      const copy = JSON.parse(text)
      mutate(copy.exchanges[1].fault)
      assert.throws(() => parseTraceFile(JSON.stringify(copy), new Map(), { file: 'f.json' }), expectCode(ErrorCodes.TRACE_FILE_INVALID, ...fragments))
    }
    bad((x) => (x.kind = 'gremlins'), 'exchanges[1].fault.kind', 'response_lost')
    bad((x) => (x.phase = 'later'), 'exchanges[1].fault.phase')
    bad((x) => (x.call = 0), 'exchanges[1].fault.call')
    bad((x) => delete x.upstream, 'exchanges[1].fault.upstream', 'missing')
    bad((x) => (x.extra = true), 'exchanges[1].fault.extra', 'not a known field')
  })

  test('a file written before faults existed still imports and re-exports to the same bytes', async () => {
    // Exported by the trace-file code of main at 290b2f5, before fault records were added.
    const file = fileURLToPath(new URL('./fixtures/before-faults.trace.json', import.meta.url))
    const text = await readFile(file, 'utf8')
    const trace = await readTraceFile(file)
    assert.equal(trace.exchanges.length, 2)
    assert.ok(trace.exchanges.every((x) => x.fault === undefined))
    assert.equal(exportTrace(trace).text, text)
  })

  test('a missing file is TR_TRACE_FILE_INVALID naming it', async () => {
    const file = join(root, 'absent.trace.json')
    await assert.rejects(readTraceFile(file), expectCode(ErrorCodes.TRACE_FILE_INVALID, file))
    await writeFile(join(root, 'garbage.trace.json'), 'not json')
    await assert.rejects(readTraceFile(join(root, 'garbage.trace.json')), expectCode(ErrorCodes.TRACE_FILE_INVALID, 'garbage.trace.json'))
  })
})

/** A trace whose exchanges all got the same response body (polling, retries): `count` GETs of `body`. */
function repeatedTrace(count: number, body: Uint8Array, type = 'application/json'): Trace {
  const bodies = new Map<string, Uint8Array>()
  const exchanges: Exchange[] = []
  // Hashed once: the same bytes each time (2000 hashes of 256 KB were most of a test's second).
  const { digest } = bodyFromBytes(body).ref
  bodies.set(digest, body)
  for (let seq = 0; seq < count; seq++) {
    // Same bytes, different chunking and timing each time: a ref keeps each occurrence's own chunks.
    const cut = 1 + (seq % 7)
    const b = { ref: { digest, size: body.byteLength, chunks: [bodyChunk(cut, seq), bodyChunk(body.byteLength - cut, seq + 2)] } }
    exchanges.push({
      seq,
      request: { method: 'GET', url: `https://api.test/poll?n=${seq}`, headers: [['accept', type]], body: null },
      outcome: {
        kind: 'response',
        response: {
          status: 200,
          statusText: 'OK',
          headers: [
            ['content-type', type],
            ['content-length', String(body.byteLength)],
          ],
          trailers: [],
          body: b.ref,
        },
      },
      timing: { startMs: seq * 3, headersMs: 1 },
    })
  }
  return { meta: { name: 'polls', format: 1 }, exchanges, bodies }
}

describe('trace files: each body written once', () => {
  test('a repeated body is written once; later occurrences refer to it by sha256 and keep their own chunks', () => {
    const json = enc.encode(JSON.stringify({ answer: 'the same every time', pad: 'x'.repeat(500) }))
    const trace = repeatedTrace(3, json)
    // The request of exchange 1 carries the same bytes as the responses: first occurrence in document order wins.
    trace.exchanges[1]!.request = {
      method: 'POST',
      url: 'https://api.test/echo',
      headers: [['content-type', 'application/json']],
      body: bodyFromBytes(json).ref,
    }
    const { text } = exportTrace(trace)
    const file = JSON.parse(text)
    assert.equal(file.version, 2, 'a file with refs says version 2')
    const digest = sha256(json)
    assert.equal(file.exchanges[0].outcome.response.body.text, new TextDecoder().decode(json), 'the first occurrence holds the bytes')
    assert.deepEqual(file.exchanges[1].request.body, { digest, size: json.byteLength, chunks: [{ size: json.byteLength, atMs: 0 }], ref: `sha256:${digest}` })
    assert.deepEqual(file.exchanges[2].outcome.response.body, {
      digest,
      size: json.byteLength,
      chunks: [
        { size: 3, atMs: 2 },
        { size: json.byteLength - 3, atMs: 4 },
      ],
      ref: `sha256:${digest}`,
    })
    assert.equal(text.split(new TextDecoder().decode(json).slice(0, 40).replaceAll('"', '\\"')).length - 1, 1, 'the bytes appear once in the file')
    const back = parseTraceFile(text)
    assert.deepEqual(back.exchanges, trace.exchanges)
    assert.deepEqual(back.bodies.get(digest), json)
    assert.equal(exportTrace(back).text, text, 're-export is byte-identical')
    assert.equal(exportTrace(back).digest, traceDigest(trace), 'the digest does not depend on the file form')
  })

  test('repeated event streams and blobs become refs too; a file without repeats stays version 1', () => {
    const sse = enc.encode('data: {"delta":"a"}\n\ndata: [DONE]\n\n')
    const big = new Uint8Array(70 * 1024).map((_, i) => (i * 13) % 251)
    for (const [bytes, type, form] of [
      [sse, 'text/event-stream', 'events'],
      [big, 'application/octet-stream', 'blob'],
    ] as const) {
      const { text, blobs } = exportTrace(repeatedTrace(2, bytes, type))
      const file = JSON.parse(text)
      assert.ok(form in file.exchanges[0].outcome.response.body, form)
      assert.equal(file.exchanges[1].outcome.response.body.ref, `sha256:${sha256(bytes)}`)
      assert.deepEqual(parseTraceFile(text, blobs).bodies.get(sha256(bytes)), bytes)
    }
    assert.equal(JSON.parse(exportTrace(repeatedTrace(1, sse)).text).version, 1)
    assert.ok(TRACE_FILE_VERSIONS.includes(1) && TRACE_FILE_VERSIONS.includes(2))
  })

  test('a ref must follow the body it names, in a version 2 file, with the same size', () => {
    const json = enc.encode('{"same":true}')
    const { text } = exportTrace(repeatedTrace(2, json))
    const file = JSON.parse(text)
    const bad = (mutate: (f: typeof file) => void, ...fragments: string[]) => {
      const copy = structuredClone(file)
      mutate(copy)
      assert.throws(
        () => parseTraceFile(JSON.stringify(copy), new Map(), { file: 'r.json' }),
        expectCode(ErrorCodes.TRACE_FILE_INVALID, 'r.json', ...fragments),
      )
    }
    bad((f) => (f.version = 1), 'exchanges[1].outcome.response.body.ref', 'version 2 form')
    bad((f) => (f.exchanges = [f.exchanges[1], f.exchanges[0]]), 'exchanges[0].outcome.response.body.ref', 'no earlier body in this file holds')
    bad((f) => (f.exchanges[1].outcome.response.body.ref = `sha256:${'0'.repeat(64)}`), 'exchanges[1].outcome.response.body.ref', 'must be "sha256:')
    bad((f) => {
      const b = f.exchanges[1].outcome.response.body
      b.size += 1
      b.chunks[1].size += 1
    }, 'exchanges[1].outcome.response.body.size')
  })

  test('a file written by main before refs existed still imports; re-exported it shrinks and keeps its digest', async () => {
    const old = new URL('./fixtures/written-by-main-290b2f5.trace.json', import.meta.url)
    const oldText = await readFile(old, 'utf8')
    assert.equal(JSON.parse(oldText).version, 1)
    const trace = await readTraceFile(old.pathname)
    assert.equal(trace.exchanges.length, 9)
    const again = exportTrace(trace)
    assert.equal(again.digest, JSON.parse(oldText).digest, 'same trace digest: lineage and case manifests stay valid')
    assert.equal(JSON.parse(again.text).version, 2)
    const digests = [...oldText.matchAll(/"digest": "([0-9a-f]{64})",\s*"size"/g)].map((m) => m[1])
    const refs = [...again.text.matchAll(/"ref": "sha256:[0-9a-f]{64}"/g)].length
    assert.equal(refs, digests.length - new Set(digests).size, 'every repeated body became a ref')
    assert.ok(refs >= 6, `${refs} refs`)
    assert.ok(again.text.length < oldText.length * 0.6, `${again.text.length} bytes re-exported vs ${oldText.length} written by main`)
    const back = parseTraceFile(again.text)
    assert.deepEqual(back.exchanges, trace.exchanges)
    assert.deepEqual(back.bodies, trace.bodies)
    assert.equal(exportTrace(back).text, again.text)
  })

  test('2000 replays of one 256 KB body are one copy of it, not 500 MB of JSON', () => {
    const body = enc.encode(JSON.stringify({ data: 'y'.repeat(256 * 1024 - 11) }))
    assert.equal(body.byteLength, 256 * 1024)
    const trace = repeatedTrace(2000, body)
    const { text } = exportTrace(trace)
    // One inline copy plus under 1 KB of request, head, timing and ref per exchange (512 MB before refs).
    assert.ok(text.length < 256 * 1024 + 2000 * 1024, `${(text.length / 1e6).toFixed(2)} MB`)
    assert.equal(text.split('y'.repeat(1000)).length - 1, 262, 'the body text is in the file once')
    const back = parseTraceFile(text)
    assert.equal(back.exchanges.length, 2000)
    assert.equal(back.bodies.size, 1)
    assert.equal(traceDigest(back), traceDigest(trace))
  })
})

describe('trace files: import checks every exchange (trace/validate.ts)', () => {
  /** A file edited the way anyone can: change a field, recompute the body hashes and the digest. */
  const edited = (edit: (t: Trace) => void) => {
    const trace = jsonTrace('edited', 2)
    edit(trace)
    return exportTrace(trace).text
  }
  const response = (t: Trace, seq = 0) => (t.exchanges[seq]!.outcome as Extract<Exchange['outcome'], { kind: 'response' }>).response

  test('a status text with a line break is refused, naming the field (it used to pass import and kill the proxy)', () => {
    const text = edited((t) => (response(t).statusText = 'OK\r\nX-Injected: 1'))
    assert.throws(
      () => parseTraceFile(text, new Map(), { file: 'crlf.json' }),
      expectCode(ErrorCodes.TRACE_FILE_INVALID, 'crlf.json', 'exchanges[0].outcome.response.statusText contains CR (a line break)'),
    )
  })

  test('a 1xx status, a lying Content-Length and a header with CR/LF are refused', () => {
    assert.throws(
      () => parseTraceFile(edited((t) => (response(t).status = 100))),
      expectCode(ErrorCodes.TRACE_FILE_INVALID, 'exchanges[0].outcome.response.status', '1xx'),
    )
    assert.throws(
      () => parseTraceFile(edited((t) => response(t, 1).headers.push(['content-length', '999']))),
      expectCode(ErrorCodes.TRACE_FILE_INVALID, 'exchanges[1].outcome.response.headers', 'Content-Length 999'),
    )
    assert.throws(
      () => parseTraceFile(edited((t) => t.exchanges[1]!.request.headers.push(['x-a', 'b\nc']))),
      expectCode(ErrorCodes.TRACE_FILE_INVALID, 'exchanges[1].request.headers[1][1]', 'LF'),
    )
  })
})
