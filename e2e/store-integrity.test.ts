/**
 * A damaged store never serves wrong bytes and is never made worse: real LevelDB files damaged on disk (a
 * table's bytes overwritten, a write-ahead-log record flipped, an exchange deleted), then replayed through
 * the interceptor (from memory and through the store), exported and listed.
 */
import assert from 'node:assert/strict'
import { createHash, randomBytes } from 'node:crypto'
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:http'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { Level } from 'level'
import { runCli } from '../cli/index.ts'
import { install } from '../interceptor/index.ts'
import { openStore } from '../store/index.ts'
import { ErrorCodes, isToolReplayError } from '../trace/index.ts'
import { tempDir } from './support/proxy-harness.ts'

/**
 * Random (incompressible) bodies, so the bytes on disk are the bodies' own and can be found and damaged:
 * 400 small ones (stored inside LevelDB; 4.8 MB, more than its 4 MiB write buffer, so they land in .ldb
 * tables) and 12 big ones (stored as piece files beside the database).
 */
const SMALL = Array.from({ length: 400 }, () => randomBytes(12 * 1024))
const BIG = Array.from({ length: 12 }, () => randomBytes(600 * 1024))
const BODIES = [...SMALL, ...BIG]
let url: string
let server: ReturnType<typeof createServer>

before(async () => {
  server = createServer((req, res) => {
    const i = Number((req.url ?? '/0').slice(1))
    res.writeHead(200, { 'content-type': 'application/octet-stream' })
    res.end(BODIES[i])
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  url = `http://127.0.0.1:${(server.address() as { port: number }).port}`
})
after(() => server.close())

async function record(dir: string, trace: string, n: number): Promise<void> {
  const store = await openStore(dir)
  const tr = await install({ mode: 'record', trace, store })
  for (let i = 0; i < n; i++) await (await fetch(`${url}/${i}`)).arrayBuffer()
  await tr.close()
  await store.close()
}

/** Every file of a store with its SHA-256, to prove nothing was touched. */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {}
  for (const f of readdirSync(dir).sort()) {
    if (f === 'LOCK' || f.endsWith('.sock') || f === 'ca' || f === 'pieces') continue
    out[f] = createHash('sha256')
      .update(readFileSync(join(dir, f)))
      .digest('hex')
  }
  return out
}

/** Overwrites 16 bytes in the middle of a body wherever its bytes sit in the store's files; returns the file. */
function damageBody(dir: string, body: Buffer): string {
  const needle = body.subarray(body.byteLength >> 1, (body.byteLength >> 1) + 32)
  for (const f of readdirSync(dir, { recursive: true }).map(String)) {
    if (!statSync(join(dir, f)).isFile()) continue
    const bytes = readFileSync(join(dir, f))
    const at = bytes.indexOf(needle)
    if (at === -1) continue
    bytes.fill(0x41, at, at + 16)
    writeFileSync(join(dir, f), bytes)
    return f
  }
  throw new Error('body bytes not found in any store file')
}

const cli = async (...argv: string[]) => {
  const out: string[] = []
  const err: string[] = []
  const code = await runCli(argv, { out: (t) => out.push(t), err: (t) => err.push(t) })
  return { code, out: out.join('\n'), err: err.join('\n') }
}

test('bodies damaged inside a LevelDB table and in a piece file are never served: replay fails with TR_STORE_CORRUPT naming trace, exchange and body', async () => {
  const dir = join(tempDir('tr-integrity-'), 'store')
  await record(dir, 'tables', BODIES.length)
  assert.match(damageBody(dir, BODIES[2] as Buffer), /^\d+\.ldb$/)
  assert.match(damageBody(dir, BODIES[403] as Buffer), /^pieces\/[0-9a-f]{2}\/[0-9a-f]{64}$/)

  // From memory (the default for a trace this size): the trace does not even open.
  const store = await openStore(dir)
  await assert.rejects(install({ mode: 'replay', trace: 'tables', store }), (err: unknown) => {
    assert.ok(isToolReplayError(err, ErrorCodes.STORE_CORRUPT), String(err))
    assert.match(err.message, /Trace "tables" .* is damaged: exchange #2 response: body [0-9a-f]{64} is damaged/)
    assert.match(err.message, /Nothing damaged was served/)
    return true
  })
  // Through the store (bodies read as played): the intact exchanges replay, the damaged one fails the
  // request, and the run fails even though the app swallowed that error.
  const tr = await install({ mode: 'replay', trace: 'tables', store, preload: 'none' })
  const served: Array<string | number> = []
  for (let i = 0; i < BODIES.length; i++) {
    try {
      const bytes = Buffer.from(await (await fetch(`${url}/${i}`)).arrayBuffer())
      served.push(bytes.equals(BODIES[i] as Buffer) ? i : `WRONG BYTES #${i}`)
    } catch (err) {
      served.push(`failed #${i}: ${(err as { cause?: { code?: string } }).cause?.code}`)
    }
  }
  const expected: Array<string | number> = BODIES.map((_, i) => i)
  expected[2] = 'failed #2: TR_STORE_CORRUPT'
  expected[403] = 'failed #403: TR_STORE_CORRUPT'
  assert.deepEqual(served, expected)
  assert.throws(
    () => tr.assertDone(),
    (err: unknown) => isToolReplayError(err, ErrorCodes.REPLAY_INCOMPLETE) && /TR_STORE_CORRUPT/.test((err as Error).message),
  )
  await tr.close().catch(() => {})
  await store.close()

  const exported = await cli('export', 'tables', '--out', join(dir, '..', 'x.json'), '--store', dir)
  assert.equal(exported.code, 67, exported.err)
  assert.match(exported.err, /TR_STORE_CORRUPT/)
  const lsr = await cli('ls', '--store', dir)
  assert.equal(lsr.code, 0, lsr.err)
})

test('a damaged write-ahead-log record: the store is refused and no file changes (LevelDB would drop the record silently)', async () => {
  const dir = join(tempDir('tr-integrity-wal-'), 'store')
  // Small bodies: everything stays in the log.
  const store = await openStore(dir)
  for (const name of ['one', 'two', 'three']) {
    const tr = await install({ mode: 'record', trace: name, store })
    await (await fetch(`${url}/0`)).arrayBuffer()
    await tr.close()
  }
  await store.close()
  const log = readdirSync(dir).find((f) => f.endsWith('.log')) as string
  const bytes = readFileSync(join(dir, log))
  // A byte well inside the log (not the torn tail a crash would leave).
  const at = Math.floor(bytes.byteLength / 3)
  bytes[at] = (bytes[at] as number) ^ 0xff
  writeFileSync(join(dir, log), bytes)
  const before = snapshot(dir)
  for (const argv of [['ls'], ['show', 'one'], ['export', 'one', '--out', join(dir, '..', 'one.json')]]) {
    const r = await cli(...argv, '--store', dir)
    assert.equal(r.code, 67, `${argv[0]}: ${r.err}`)
    assert.match(r.err, /write-ahead log .* damaged record/)
  }
  await assert.rejects(openStore(dir), (err: unknown) => isToolReplayError(err, ErrorCodes.STORE_CORRUPT))
  assert.deepEqual(snapshot(dir), before, 'every file is exactly as it was')
})

test('an exchange that vanished from a complete trace is reported, not silently skipped', async () => {
  const dir = join(tempDir('tr-integrity-gone-'), 'store')
  await record(dir, 'gap', 3)
  const db = new Level<string, Uint8Array>(dir, { valueEncoding: 'view' })
  const keys: string[] = []
  for await (const k of db.keys({ gte: 'x!', lt: 'x"' })) keys.push(k)
  await db.del(keys[1] as string)
  await db.close()
  const store = await openStore(dir)
  await assert.rejects(
    store.readTrace('gap'),
    (err: unknown) => isToolReplayError(err, ErrorCodes.STORE_CORRUPT) && /closed with 3 exchange\(s\), but 2 can be read/.test((err as Error).message),
  )
  await store.close()
})

test('tr-proxy fsck names every damaged exchange and rescues the intact ones; on an unopenable store it reads the files as they are', async () => {
  const dir = join(tempDir('tr-fsck-'), 'store')
  await record(dir, 'tables', BODIES.length)
  await record(dir, 'clean', 2)
  damageBody(dir, BODIES[5] as Buffer)
  const rescue = join(dir, '..', 'rescued')
  const r = await cli('fsck', '--store', dir, '--export-to', rescue)
  assert.equal(r.code, 67, r.err)
  assert.match(r.err, /tables \(complete, 412 exchange\(s\)\): DAMAGED: 411 of 412 exchange\(s\) intact/)
  assert.match(r.err, /exchange #5 response: body [0-9a-f]{64} is damaged/)
  assert.match(r.err, /clean \(complete, 2 exchange\(s\)\): intact/)
  // What fsck rescued imports and replays.
  const other = join(dir, '..', 'other')
  assert.equal((await cli('import', join(rescue, 'tables.trace.json'), '--store', other)).code, 0)
  const store = await openStore(other)
  const rescued = await store.readTrace('tables')
  assert.equal(rescued.exchanges.length, 411)
  assert.equal(rescued.meta.labels?.fsck, 'partial')
  await store.close()

  // Without CURRENT the store cannot be opened: fsck reads its files as they are and leaves them alone.
  const { rmSync } = await import('node:fs')
  rmSync(join(dir, 'CURRENT'))
  const before = snapshot(dir)
  const j = await cli('fsck', '--store', dir, '--json')
  const report = JSON.parse(j.out).report
  assert.match(report.openProblem, /no CURRENT file/)
  assert.deepEqual(report.traces.map((t: { name: string; intact: number }) => [t.name, t.intact]).sort(), [
    ['clean', 2],
    ['tables', 411],
  ])
  assert.deepEqual(snapshot(dir), before)
})
