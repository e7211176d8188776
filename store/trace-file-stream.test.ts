import assert from 'node:assert/strict'
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { canonicalJson, ErrorCodes, type Exchange, isToolReplayError } from '../trace/index.ts'
import { jsonTrace, richTrace } from './fixtures/exchanges.ts'
import { JsonObjectStream } from './json-stream.ts'
import { openStore } from './level-store.ts'
import { createMemoryStore } from './memory-store.ts'
import { exportTrace, storedTraceSource, TraceDigester, TraceFileReader, traceDigest, traceSource, writeTraceFile, writeTraceFileFrom } from './trace-file.ts'

const root = await mkdtemp(join(tmpdir(), 'tr-file-stream-'))
after(() => rm(root, { recursive: true, force: true }))

function events(text: string, size: number): string {
  const s = new JsonObjectStream('exchanges')
  const buf = Buffer.from(text)
  const out: unknown[] = []
  try {
    for (let i = 0; i < buf.length; i += size) out.push(...s.push(buf.subarray(i, i + size)))
    out.push(...s.end())
  } catch (err) {
    return `error: ${(err as Error).message}`
  }
  return JSON.stringify(out)
}

describe('streamed trace files (unit)', () => {
  test('the JSON scanner gives the same events however the bytes are cut, and refuses what JSON.parse refuses', () => {
    const good = '{"format": "x", "n": null, "t": true, "exchanges": [ {"a": [1, "]}\\"✓"]}, 2 , "s" ], "z": [-1.5e3] }'
    const whole = events(good, good.length)
    assert.ok(!whole.startsWith('error'), whole)
    for (const size of [1, 2, 3, 7]) assert.equal(events(good, size), whole, `cut every ${size} bytes`)
    assert.match(whole, /"kind":"element","value":\{"a":\[1,"\]\}\\"✓"\]\}/)
    const invalid = ['{"a":1,}', '{"exchanges":[1,]}', '{"a":1} x', '{"a" 1}', '{"exchanges":[1 2]}', '{"a":1', '{"a":tru}']
    for (const bad of invalid) assert.throws(() => JSON.parse(bad), bad)
    // Also refused: a top level that is not an object, and a key given twice (JSON.parse would keep the last).
    for (const bad of [...invalid, '[1]', '{"a":1,"a":2}']) assert.match(events(bad, 1), /^error: /, bad)
  })

  test('the digest fed an exchange at a time is traceDigest', () => {
    const trace = richTrace()
    const d = new TraceDigester()
    for (const x of trace.exchanges) d.add(x)
    assert.equal(d.digest(trace.meta), traceDigest(trace))
    assert.equal(new TraceDigester().digest(trace.meta), traceDigest({ meta: trace.meta, exchanges: [] }))
  })

  test("the reader builds each exchange with sorted keys, so its canonical JSON is canonicalJson's one-stringify path", async () => {
    const file = join(root, 'sorted.trace.json')
    await writeTraceFile(file, richTrace())
    const reader = await TraceFileReader.open(file)
    for await (const { exchange, canonical } of reader.exchanges()) {
      assert.equal(canonical, canonicalJson(exchange))
      assert.equal(canonical, JSON.stringify(exchange), `exchange ${exchange.seq} is built with sorted keys`)
    }
  })

  test('a stored trace streamed to a file gives exportTrace bytes; the reader hands back every body, refs re-read from the file', async () => {
    const trace = richTrace()
    const store = createMemoryStore()
    await store.putTrace(trace)
    const file = join(root, 'rich.trace.json')
    const written = await writeTraceFileFrom(file, storedTraceSource(await store.openTrace('rich')))
    const expected = exportTrace(trace)
    assert.equal(await readFile(file, 'utf8'), expected.text)
    assert.equal(written.digest, traceDigest(trace))
    assert.match(expected.text, /"ref": "sha256:/, 'the fixture holds refs')
    // No cache at all: every ref's bytes are read again from the exchange that first held them.
    const reader = await TraceFileReader.open(file, { refBytes: true, cacheBytes: 0 })
    let n = 0
    for await (const { exchange, bodies } of reader.exchanges()) {
      for (const [d, b] of bodies) assert.deepEqual(b, trace.bodies.get(d), `exchange ${exchange.seq} body ${d}`)
      assert.equal(exchange.seq, trace.exchanges[n]?.seq)
      n++
    }
    assert.equal(n, trace.exchanges.length)
  })

  test('a streamed file needs its fields before "exchanges"; damage anywhere fails the read at the end or where it is', async () => {
    const trace = jsonTrace('order', 3)
    const doc = JSON.parse(exportTrace(trace).text)
    const reordered = join(root, 'reordered.trace.json')
    await writeFile(reordered, JSON.stringify({ exchanges: doc.exchanges, format: doc.format, version: doc.version, digest: doc.digest, meta: doc.meta }))
    await assert.rejects(
      TraceFileReader.open(reordered),
      (err) => isToolReplayError(err) && err.code === ErrorCodes.TRACE_FILE_INVALID && /before "exchanges"/.test(err.message),
    )
    const file = join(root, 'last.trace.json')
    await writeTraceFile(file, trace)
    const text = await readFile(file, 'utf8')
    assert.ok(text.includes('"startMs": 20,'), 'the last exchange starts at 20 ms')
    await writeFile(file, text.replace('"startMs": 20,', '"startMs": 21,'))
    const reader = await TraceFileReader.open(file)
    const seen: number[] = []
    await assert.rejects(
      (async () => {
        for await (const { exchange } of reader.exchanges()) seen.push(exchange.seq)
      })(),
      (err) => isToolReplayError(err) && err.code === ErrorCodes.TRACE_DIGEST_MISMATCH,
    )
    assert.deepEqual(seen, [0, 1, 2], 'every exchange was handed out before the digest failed: callers stage, then commit')
  })

  test('bodies are asked for three windows ahead while they are small, one window ahead once a window holds big ones', async () => {
    // A source whose bodies arrive only when the test says: how many windows it was asked for before the first arrived.
    const asked = async (count: number, bodySize: number) => {
      const trace = jsonTrace('ahead', count)
      const big = bodySize > 0 ? new Uint8Array(bodySize) : undefined
      const requests: Array<() => void> = []
      let released = false
      const source = {
        ...traceSource(trace),
        bodies: (wanted: ReadonlyArray<[{ digest: string; size: number }, string]>) =>
          new Promise<Map<string, Uint8Array>>((resolve) => {
            const answer = () => resolve(new Map(wanted.map(([ref]) => [ref.digest, trace.bodies.get(ref.digest) as Uint8Array])))
            if (released) answer()
            else requests.push(answer)
          }),
      }
      // Claimed sizes make the windows big without big bytes: the writer counts what it asks for.
      if (big) for (const x of trace.exchanges) if (x.request.body) x.request.body = { ...x.request.body, size: bodySize }
      const written = writeTraceFileFrom(join(root, `ahead-${bodySize}.trace.json`), source).catch((err: unknown) => err)
      // Once a window is asked for, the writer waits on the first; more requests, if any, come without I/O between.
      for (let i = 0; i < 500 && requests.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10))
      for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve))
      const before = requests.length
      released = true
      for (const answer of requests) answer()
      await written
      return before
    }
    assert.equal(await asked(256 * 5, 0), 4, 'small bodies: the window being written and three more')
    assert.equal(await asked(20, 5 * 1024 * 1024), 2, 'bodies of 5 MiB: the window being written and the next')
  })

  test('an export that fails half-way leaves no file and no temp file behind', async () => {
    const trace = jsonTrace('lost', 3)
    const missing = trace.exchanges[2]?.outcome.kind === 'response' ? trace.exchanges[2].outcome.response.body.digest : ''
    trace.bodies.delete(missing)
    const dir = join(root, 'failed')
    await assert.rejects(writeTraceFile(join(dir, 'lost.trace.json'), trace), (err) => isToolReplayError(err) && err.code === ErrorCodes.BODY_MISSING)
    assert.deepEqual(await readdir(dir), [])
  })

  test('a streamed file is written once, in place: the temp file it was written to is the file, renamed; an empty trace too', async () => {
    // Copying a finished temp file behind its head wrote a big export twice and held both on the disk at once.
    const trace = richTrace()
    const dir = join(root, 'in-place')
    const file = join(dir, 'rich.trace.json')
    const inodes = new Set<number>()
    const source = traceSource(trace)
    const result = await writeTraceFileFrom(file, {
      ...source,
      exchanges: async function* () {
        for await (const x of source.exchanges()) {
          // While the exchanges are written: the one temp file there is.
          for (const name of await readdir(dir)) inodes.add((await stat(join(dir, name))).ino)
          yield x
        }
      },
    })
    assert.equal(inodes.size, 1, 'one temp file while writing')
    assert.ok(inodes.has((await stat(file)).ino), 'the file is that temp file')
    assert.equal(await readFile(file, 'utf8'), exportTrace(trace).text)
    assert.equal(result.digest, exportTrace(trace).digest)
    const empty = join(dir, 'empty.trace.json')
    await writeTraceFileFrom(empty, traceSource({ meta: { name: 'empty', format: 1 }, exchanges: [], bodies: new Map() }))
    assert.equal(await readFile(empty, 'utf8'), exportTrace({ meta: { name: 'empty', format: 1 }, exchanges: [], bodies: new Map() }).text)
    assert.deepEqual((await readdir(dir)).sort(), ['empty.trace.json', 'rich.trace.json'])
  })
})

describe('a staged trace was not recorded here', () => {
  test('stageTrace (import) and putTrace leave `recorded` false on both backends; beginTrace sets it', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'tr-staged-'))
    after(() => rm(dir, { recursive: true, force: true }))
    for (const store of [createMemoryStore(), await openStore(join(dir, 'store'))]) {
      try {
        const trace = jsonTrace('imported', 3)
        const staged = await store.stageTrace(trace.meta)
        for (const x of trace.exchanges) await staged.add(x, trace.bodies)
        await staged.commit()
        assert.equal((await store.openTrace('imported')).info.recorded, false, 'an imported trace is not a recording of this store')
        await store.putTrace(jsonTrace('put', 2))
        assert.equal((await store.openTrace('put')).info.recorded, false)
        const rec = await store.beginTrace(jsonTrace('live', 0).meta)
        await rec.close()
        assert.equal((await store.openTrace('live')).info.recorded, true)
      } finally {
        await store.close()
      }
    }
  })
})

test('a repeated seq is refused wherever it comes: in a rising run, after a gap, once seqs stop rising', async () => {
  const base = jsonTrace('seqs', 1)
  const x = base.exchanges[0] as Exchange
  const read = async (seqs: number[]) => {
    const file = join(root, `seqs-${seqs.join('-')}.trace.json`)
    await writeTraceFile(file, { ...base, exchanges: seqs.map((seq) => ({ ...x, seq })) })
    const reader = await TraceFileReader.open(file)
    try {
      for await (const _ of reader.exchanges());
      return 'ok'
    } catch (err) {
      assert.ok(isToolReplayError(err, ErrorCodes.TRACE_FILE_INVALID), String(err))
      return /repeats seq (\d+)/.exec(err.message)?.[1]
    }
  }
  assert.equal(await read([0, 1, 2, 3]), 'ok')
  assert.equal(await read([0, 1, 2, 1]), '1')
  assert.equal(await read([0, 5, 9, 5]), '5')
  assert.equal(await read([3, 7, 4, 0, 8]), 'ok')
  assert.equal(await read([3, 7, 4, 0, 4]), '4')
  assert.equal(await read([3, 7, 4, 0, 7]), '7')
  assert.equal(await read([0, 1, 2, 10, 11, 5, 6, 11]), '11')
})
