import assert from 'node:assert/strict'
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { type BodyRef, bodyFromBytes, ErrorCodes, type Exchange, isToolReplayError, type Trace } from '../trace/index.ts'
import { BODY_THREAD_FROM, exportSource } from './body-thread.ts'
import { jsonExchange, jsonTrace } from './fixtures/exchanges.ts'
import { openStore } from './level-store.ts'
import { piecePath } from './pieces.ts'
import { exportTrace, storedTraceSource, writeTraceFileFrom } from './trace-file.ts'

const root = await mkdtemp(join(tmpdir(), 'tr-body-thread-'))
after(() => rm(root, { recursive: true, force: true }))

/**
 * 700 JSON exchanges whose bodies repeat 300 exchanges later (in the window after the one that holds them
 * first, and in the one after that), and every 100th answers a 40 KB binary body (pieces beside the database), the same one.
 */
function bigTrace(name: string): Trace {
  const exchanges: Exchange[] = []
  const bodies = new Map<string, Uint8Array>()
  const blob = bodyFromBytes(new Uint8Array(40_000).map((_, i) => (i * 31) % 251))
  for (let i = 0; i < 700; i++) {
    const x = jsonExchange(i, i % 300)
    for (const [d, b] of x.bodies) bodies.set(d, b)
    if (i % 100 === 50 && x.exchange.outcome.kind === 'response') {
      x.exchange.outcome.response.headers = [['content-type', 'application/octet-stream']]
      x.exchange.outcome.response.body = blob.ref
      bodies.set(blob.ref.digest, blob.bytes)
    }
    exchanges.push(x.exchange)
  }
  return { meta: { name, format: 1 }, exchanges, bodies }
}

test('bodies read in a worker thread give the bytes of an export in one thread, refs and pieces included', async () => {
  const dir = join(root, 'same')
  const trace = bigTrace('big')
  const store = await openStore(dir)
  try {
    await store.putTrace(trace)
    const reader = await store.openTrace('big')
    const threaded = exportSource(store, reader, reader.info.meta, { threadFrom: 0 })
    assert.ok(threaded.bodies && threaded.close, 'the source reads its bodies in a thread')
    assert.equal(exportSource(store, reader, reader.info.meta).bodies, undefined, `a trace under ${BODY_THREAD_FROM} exchanges reads them here`)
    await writeTraceFileFrom(join(root, 'threaded.trace.json'), threaded)
    await writeTraceFileFrom(join(root, 'here.trace.json'), storedTraceSource(reader))
    const text = await readFile(join(root, 'threaded.trace.json'), 'utf8')
    assert.equal(text, exportTrace(trace).text)
    assert.equal(text, await readFile(join(root, 'here.trace.json'), 'utf8'))
    assert.match(text, /"ref": "sha256:/)
  } finally {
    await store.close()
  }
})

test('a damaged body fails the export as in one thread, with nothing written; a trace replaced since it was opened still reads', async () => {
  const dir = join(root, 'damaged')
  const trace = bigTrace('big')
  const store = await openStore(dir)
  try {
    await store.putTrace(trace)
    const blob = trace.exchanges[50]?.outcome.kind === 'response' ? trace.exchanges[50].outcome.response.body.digest : ''
    await writeFile(piecePath(join(dir, 'pieces'), blob), new Uint8Array(40_000))
    const reader = await store.openTrace('big')
    const failure = async (source: ReturnType<typeof storedTraceSource>, out: string) => {
      const err = await writeTraceFileFrom(join(root, out, 'x.trace.json'), source).then(
        () => assert.fail('the export did not fail'),
        (e: unknown) => e,
      )
      assert.ok(isToolReplayError(err) && err.code === ErrorCodes.STORE_CORRUPT, String(err))
      assert.deepEqual(await readdir(join(root, out)), [], 'no file and no temp file')
      return err.message
    }
    const threaded = await failure(exportSource(store, reader, reader.info.meta, { threadFrom: 0 }), 'out-threaded')
    assert.equal(threaded, await failure(storedTraceSource(reader), 'out-here'))
    assert.match(threaded, new RegExp(`piece 1 of 1 of body ${blob} is damaged`))

    // Bodies are read by digest: a recording whose name has moved on since it was opened still exports its own.
    const opened = await store.openTrace('big')
    await store.putTrace(jsonTrace('big', 2, 'again'), { overwrite: true })
    const source = exportSource(store, opened, opened.info.meta, { threadFrom: 0 })
    const first = trace.exchanges[0]?.request.body as BodyRef
    const read = await (source.bodies as NonNullable<typeof source.bodies>)([[first, 'exchange #0 request']])
    assert.deepEqual(read.get(first.digest), trace.bodies.get(first.digest))
    await source.close?.()
  } finally {
    await store.close()
  }
})

test('an export that cannot create its file ends the thread (the process is not held open by it)', async () => {
  const dir = join(root, 'nowhere')
  const store = await openStore(dir)
  try {
    await store.putTrace(bigTrace('big'))
    const reader = await store.openTrace('big')
    const source = exportSource(store, reader, reader.info.meta, { threadFrom: 0 })
    await writeFile(join(root, 'a-file'), 'not a directory')
    await assert.rejects(
      writeTraceFileFrom(join(root, 'a-file', 'x.trace.json'), source),
      (err) => (err as NodeJS.ErrnoException).code === 'EEXIST' || (err as NodeJS.ErrnoException).code === 'ENOTDIR',
    )
    const first = bigTrace('big').exchanges[0]?.request.body as BodyRef
    await assert.rejects((source.bodies as NonNullable<typeof source.bodies>)([[first, 'exchange #0 request']]), /it was closed/)
  } finally {
    await store.close()
  }
})
