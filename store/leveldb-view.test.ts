/**
 * Our reading of LevelDB's files against LevelDB itself: the same real directory (many tables at several
 * levels, deletions, overwritten keys, writes still in the log) read by classic-level and by FileView must
 * give the same keys and values, and reading it must not change a byte of it.
 */
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { Level } from 'level'
import { bloomHash, TableFile, useSyncPointReads } from './leveldb-table.ts'
import { FileView } from './leveldb-view.ts'
import { inspectStore } from './store-files.ts'

const root = mkdtempSync(join(tmpdir(), 'tr-view-'))
after(() => rmSync(root, { recursive: true, force: true }))

function hashes(dir: string): Record<string, string> {
  const out: Record<string, string> = {}
  for (const f of readdirSync(dir).sort())
    out[f] = createHash('sha256')
      .update(readFileSync(join(dir, f)))
      .digest('hex')
  return out
}

/** A seeded pseudo-random generator, so a failure reproduces. */
function rng(seed: number): () => number {
  let s = seed >>> 0
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0
    return s / 2 ** 32
  }
}

async function dump(dir: string): Promise<Array<[string, string]>> {
  const db = new Level<string, Uint8Array>(dir, { keyEncoding: 'utf8', valueEncoding: 'view' })
  const out: Array<[string, string]> = []
  for await (const [k, v] of db.iterator()) out.push([k, Buffer.from(v).toString('hex')])
  await db.close()
  return out
}

test('FileView reads what LevelDB reads: tables at several levels, deletions, overwrites and the log', async () => {
  const dir = join(root, 'db')
  // A small write buffer and table size: many flushes and compactions.
  const db = new Level<string, Uint8Array>(dir, { keyEncoding: 'utf8', valueEncoding: 'view' })
  await db.open({ writeBufferSize: 64 * 1024, maxFileSize: 64 * 1024 } as never)
  const rand = rng(7)
  for (let round = 0; round < 60; round++) {
    const ops: Array<{ type: 'put'; key: string; value: Uint8Array } | { type: 'del'; key: string }> = []
    for (let i = 0; i < 200; i++) {
      const key = `k!${String(Math.floor(rand() * 3000)).padStart(5, '0')}!é`
      if (rand() < 0.15) ops.push({ type: 'del', key })
      else {
        const value = Buffer.alloc(Math.floor(rand() * 600), Math.floor(rand() * 256))
        ops.push({ type: 'put', key, value })
      }
    }
    await db.batch(ops)
    // Half way: everything so far compacted into tables of one level; what follows lands above it and in the log.
    if (round === 29) await (db as unknown as { compactRange(a: string, b: string): Promise<void> }).compactRange('\u0000', '\uffff')
  }
  await db.close()
  const before = hashes(dir)
  assert.ok(Object.keys(before).filter((f) => f.endsWith('.ldb')).length > 1, 'the store has several tables')

  const files = await inspectStore(dir)
  assert.deepEqual(files.problems, [])
  const view = await FileView.live(dir, files.manifest?.tables ?? [], files.liveLogs, files.names)
  const ours: Array<[string, string]> = []
  await view.scan({ gte: '', lt: '\u00ff' }, (k, v) => {
    ours.push([Buffer.from(k, 'latin1').toString('utf8'), Buffer.from(v).toString('hex')])
    return true
  })
  // A range that starts past some keys and stops early.
  const part: string[] = []
  await view.scan({ gt: Buffer.from('k!01000!é').toString('latin1'), lt: 'k!02' }, (k) => {
    part.push(Buffer.from(k, 'latin1').toString('utf8'))
    return part.length < 50
  })
  // Point reads (a block searched by its restarts, not decoded whole) agree with the scan, key by key: every
  // key of the key space, so deleted and never-written ones (undefined) and overwritten ones (the newest) too.
  const scanned = new Map(ours)
  for (let n = 0; n < 3000; n++) {
    const key = `k!${String(n).padStart(5, '0')}!é`
    const got = await view.get(Buffer.from(key).toString('latin1'))
    assert.equal(got && Buffer.from(got).toString('hex'), scanned.get(key), key)
  }
  assert.equal(await view.get('k!'), undefined)
  assert.equal(await view.get('zz'), undefined)
  await view.close()
  assert.deepEqual(hashes(dir), before, 'reading changed no file')

  // The bloom filters as LevelDB wrote them: every stored key may match; absent keys almost never do.
  let present = 0
  let falsePositives = 0
  for (const t of files.manifest?.tables ?? []) {
    const name = `${String(t.number).padStart(6, '0')}.ldb`
    const file = await TableFile.open(join(dir, name), name)
    await file.load()
    for (let i = 0; i < file.blocks; i++) {
      for (const e of await file.block(i)) {
        assert.ok(await file.mayContain(i, bloomHash(Buffer.from(e.key, 'latin1'))), `${name} block ${i} may hold ${e.key}`)
        present++
        if (await file.mayContain(i, bloomHash(Buffer.from(`${e.key}~absent`, 'latin1')))) falsePositives++
      }
    }
    await file.close()
  }
  assert.ok(present > 1000 && falsePositives < present / 20, `${falsePositives} false positives of ${present}`)

  const copy = join(root, 'copy')
  cpSync(dir, copy, { recursive: true })
  const theirs = await dump(copy)
  assert.equal(ours.length, theirs.length)
  assert.deepEqual(ours, theirs)
  assert.deepEqual(
    part,
    theirs
      .map(([k]) => k)
      .filter((k) => k > 'k!01000!é' && k < 'k!02')
      .slice(0, 50),
  )
})

test('with useSyncPointReads, a point read reads its block without waiting for libuv (and reads the same)', async () => {
  const dir = join(root, 'sync-reads')
  const db = new Level<string, Uint8Array>(dir, { keyEncoding: 'utf8', valueEncoding: 'view' })
  await db.open()
  const value = (n: number) => Buffer.alloc(300, n)
  await db.batch(Array.from({ length: 400 }, (_, n) => ({ type: 'put' as const, key: `k${String(n).padStart(4, '0')}`, value: value(n) })))
  await (db as unknown as { compactRange(a: string, b: string): Promise<void> }).compactRange('\u0000', '\uffff')
  await db.close()
  const files = await inspectStore(dir)
  const view = await FileView.live(dir, files.manifest?.tables ?? [], files.liveLogs, files.names)
  try {
    // Opens the table's handle (asynchronously, once).
    assert.deepEqual(await view.get('k0000'), new Uint8Array(value(0)))
    useSyncPointReads()
    // A key in another block (300-byte values: ~13 to a 4 KB block): its read settles before the event loop turns.
    let turned = false
    setImmediate(() => {
      turned = true
    })
    const got = await view.get('k0399')
    assert.equal(turned, false, 'the block was read through the event loop')
    assert.deepEqual(got, new Uint8Array(value(399)))
    const others = await Promise.all([1, 57, 200, 398].map((n) => view.get(`k${String(n).padStart(4, '0')}`)))
    for (const [i, n] of [1, 57, 200, 398].entries()) assert.deepEqual(others[i], new Uint8Array(value(n)))
    // Blocks are decompressed into one reused buffer: a value handed out is a copy, not a view of it.
    assert.deepEqual(got, new Uint8Array(value(399)), 'a later read changed a value already read')
    assert.equal(await view.get('k0400'), undefined)
  } finally {
    await view.close()
  }
})
