/**
 * A trace file read in a worker thread (TraceFileReader's `workerFrom`, trace-file-thread.ts) against the same
 * file read in one thread. Not among the unit files `npm run test:unit` runs in one process: it starts threads and
 * a process (scripts/run-tests.mjs, SLOW_UNITS).
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { ErrorCodes, type Exchange, isToolReplayError } from '../trace/index.ts'
import { jsonTrace, richTrace } from './fixtures/exchanges.ts'
import { openStore } from './level-store.ts'
import { TraceFileReader, traceDigest, writeTraceFile } from './trace-file.ts'

const root = await mkdtemp(join(tmpdir(), 'tr-file-thread-'))
after(() => rm(root, { recursive: true, force: true }))

describe('a trace file read in a worker thread (workerFrom)', () => {
  /** Everything a reader hands out, and how it ended: what a caller staging the exchanges sees. */
  async function readAll(file: string, options: { workerFrom?: number; cacheBytes?: number } = {}) {
    const reader = await TraceFileReader.open(file, { refBytes: true, ...options })
    const items: Array<{ exchange: Exchange; canonical: string; bodies: Array<[string, number[]]> }> = []
    let error: { code: unknown; message: string } | undefined
    try {
      for await (const { exchange, canonical, bodies } of reader.exchanges()) {
        items.push({ exchange, canonical, bodies: [...bodies].map(([d, b]) => [d, [...b]]) })
      }
    } catch (err) {
      error = { code: (err as { code?: unknown }).code, message: (err as Error).message }
    }
    return { inWorker: reader.inWorker, items, error }
  }

  test('hands out the same exchanges, canonical JSON and body bytes as one thread: refs (cached or read again) and blobs', async () => {
    const trace = richTrace()
    const file = join(root, 'worker-rich.trace.json')
    await writeTraceFile(file, trace, { inlineLimit: 0 })
    assert.ok((await readdir(join(root, 'blobs'))).length > 0, 'the fixture holds blobs')
    for (const cacheBytes of [undefined, 0]) {
      const here = await readAll(file, { cacheBytes })
      const there = await readAll(file, { cacheBytes, workerFrom: 0 })
      assert.deepEqual([here.inWorker, there.inWorker], [false, true])
      assert.equal(here.error, undefined)
      assert.equal(here.items.length, trace.exchanges.length)
      assert.deepEqual(there, { ...here, inWorker: true }, `cacheBytes ${cacheBytes}`)
    }
    // Below workerFrom the file is read here.
    assert.equal((await TraceFileReader.open(file, { workerFrom: (await stat(file)).size + 1 })).inWorker, false)
  })

  test('what the thread hands over is staged without a second check and stored as read; a changed copy is checked', async () => {
    const trace = richTrace()
    const file = join(root, 'worker-stage.trace.json')
    await writeTraceFile(file, trace)
    const store = await openStore(join(root, 'worker-stage-store'))
    try {
      const reader = await TraceFileReader.open(file, { refBytes: true, workerFrom: 0 })
      const stage = await store.stageTrace(reader.meta)
      let first: Exchange | undefined
      for await (const { exchange, bodies } of reader.exchanges()) {
        first ??= exchange
        await stage.add(exchange, bodies)
      }
      await stage.commit()
      const back = await store.readTrace('rich')
      assert.deepEqual(back.exchanges, trace.exchanges)
      assert.equal(traceDigest(back), traceDigest(trace))
      // A new object (as redaction makes) is checked as any exchange is.
      const changed = { ...(first as Exchange), seq: 99, outcome: { kind: 'response', response: { status: 99 } } } as unknown as Exchange
      const again = await store.stageTrace({ name: 'changed', format: 1 })
      await assert.rejects(again.add(changed, new Map()), (err) => isToolReplayError(err) && err.code === ErrorCodes.TRACE_INVALID)
      await again.discard()
    } finally {
      await store.close()
    }
  })

  test('damage fails as in one thread: same code, message and exchanges handed out before it', async () => {
    const file = join(root, 'worker-damage.trace.json')
    await writeTraceFile(file, jsonTrace('damage', 4))
    const text = await readFile(file, 'utf8')
    const damages: Array<[string, string]> = [
      ['"startMs": 30,', '"startMs": 31,'], // the trace digest, at the end
      ['"status": 200', '"status": "200"'], // the schema, at the first exchange
      ['"size": 7', '"size": 8'], // a body's size against its chunks
      ['{\\"n\\":2,', '{\\"n\\":9,'], // a body's bytes against its sha256
    ]
    for (const [from, to] of damages) {
      assert.ok(text.includes(from), from)
      await writeFile(file, text.replace(from, to))
      const here = await readAll(file)
      const there = await readAll(file, { workerFrom: 0 })
      assert.ok(here.error !== undefined, `${to} fails`)
      assert.deepEqual(there, { ...here, inWorker: true }, to)
    }
  })

  test('a caller that stops early ends the thread; a file cut short fails alike; a header that changed between the two reads is refused', async () => {
    const file = join(root, 'worker-stop.trace.json')
    await writeTraceFile(file, jsonTrace('stop', 3000))
    // Cut past the first read of the file (what open() reads here): the thread meets it, half-way through a batch.
    const cut = join(root, 'worker-cut.trace.json')
    const text = await readFile(file)
    assert.ok(text.byteLength > 2 * 1024 * 1024, `${text.byteLength} bytes`)
    await writeFile(cut, text.subarray(0, text.byteLength - 1000))
    const here = await readAll(cut)
    assert.equal(here.error?.code, ErrorCodes.TRACE_FILE_INVALID)
    assert.ok(here.items.length > 2900, `${here.items.length} exchanges before the cut`)
    assert.deepEqual(await readAll(cut, { workerFrom: 0 }), { ...here, inWorker: true })
    // A process that stops reading after two exchanges ends by itself: no thread is left holding it.
    const script = `import { TraceFileReader } from ${JSON.stringify(new URL('./trace-file-read.ts', import.meta.url).href)}
      const reader = await TraceFileReader.open(${JSON.stringify(file)}, { workerFrom: 0 })
      for await (const { exchange } of reader.exchanges()) if (exchange.seq === 1) break
      console.log(reader.inWorker)`
    const stopped = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 30_000 })
    assert.deepEqual([stopped.status, stopped.signal, stopped.stdout.trim()], [0, null, 'true'], stopped.stderr)
    const reader = await TraceFileReader.open(file)
    const { exchangesInWorker } = await import('./trace-file-thread.ts')
    const changed = exchangesInWorker(file, { digest: '0'.repeat(64), meta: reader.meta }, {})
    await assert.rejects(
      changed.next(),
      (err) => isToolReplayError(err) && err.code === ErrorCodes.TRACE_FILE_INVALID && /changed while it was read/.test(err.message),
    )
  })
})
