/**
 * Issue 17, "Why" 1 and 5: a damaged store is never made worse by opening it, read-only commands change no
 * file, and `fsck --export-to` rescues every trace whose exchanges are intact on disk, naming the damaged files.
 *
 * One real store is built (two traces big enough to be flushed into LevelDB tables, then, after a reopen,
 * three in the write-ahead log, one with a body in a piece file) and copied once per kind of damage. For each
 * kind: `ls` is refused (67) unless the store is still consistent, no file of the store changes (every file's
 * SHA-256 and the listing, pieces included), fsck names the damaged file, and every trace the damage did not
 * reach is rescued byte for byte; whatever else is rescued is identical to what was recorded.
 */
import assert from 'node:assert/strict'
import { createHash, randomBytes } from 'node:crypto'
import { cpSync, readdirSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { before, describe, test } from 'node:test'
import { runCli } from '../cli/index.ts'
import { openStore, readTraceFile, type TraceStore } from '../store/index.ts'
import { bodyFromBytes, type Exchange, TRACE_FORMAT_VERSION, type Trace } from '../trace/index.ts'
import { tempDir } from './support/proxy-harness.ts'

const root = tempDir('tr-damage-')
const base = join(root, 'base')
/** The store as the first session left it (its MANIFEST and CURRENT are an older copy's). */
const firstSession = join(root, 'first-session')
const originals = new Map<string, Trace>()
/** A body of each trace, to find where its bytes are on disk. */
const probe = new Map<string, Buffer>()
const ALL = ['old-1', 'old-2', 'new-1', 'new-2', 'big']

async function record(store: TraceStore, name: string, n: number, size: number, bigAt = -1): Promise<void> {
  const rec = await store.beginTrace({ name, format: TRACE_FORMAT_VERSION })
  for (let i = 0; i < n; i++) {
    const bytes = randomBytes(i === bigAt ? 600 * 1024 : size)
    if (i === 0 || i === bigAt) probe.set(i === bigAt ? `${name}:big` : name, bytes)
    const body = bodyFromBytes(bytes)
    const x: Exchange = {
      seq: i,
      request: { method: 'GET', url: `https://api.test/${name}/${i}`, headers: [], body: null },
      outcome: { kind: 'response', response: { status: 200, statusText: 'OK', headers: [], body: body.ref, trailers: [] } },
      timing: { startMs: i, headersMs: 1 },
    }
    await rec.append(x, new Map([[body.ref.digest, body.bytes]]))
  }
  await rec.close()
}

const cli = async (...argv: string[]) => {
  const out: string[] = []
  const err: string[] = []
  const code = await runCli(argv, { out: (t) => out.push(t), err: (t) => err.push(t) })
  return { code, out: out.join('\n'), err: err.join('\n') }
}

/** Every file under `dir` (pieces too) with its SHA-256; LOCK and the socket are LevelDB's and ours to hold. */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {}
  for (const f of readdirSync(dir, { recursive: true }).map(String).sort()) {
    const p = join(dir, f)
    if (f === 'LOCK' || f.endsWith('.sock') || !statSync(p).isFile()) continue
    out[f] = createHash('sha256').update(readFileSync(p)).digest('hex')
  }
  return out
}

/** The store file holding `bytes` (random, so they are stored as they are). */
function fileHolding(dir: string, bytes: Buffer): string {
  const needle = bytes.subarray(bytes.byteLength >> 1, (bytes.byteLength >> 1) + 32)
  for (const f of readdirSync(dir, { recursive: true }).map(String)) {
    if (statSync(join(dir, f)).isFile() && readFileSync(join(dir, f)).includes(needle)) return f
  }
  throw new Error('bytes not found in the store')
}

function overwrite(path: string, at: number, n = 16): void {
  const bytes = readFileSync(path)
  bytes.fill(0x41, at, at + n)
  writeFileSync(path, bytes)
}

const only = (dir: string, re: RegExp) => readdirSync(dir).filter((f) => re.test(f))

before(async () => {
  // Session 1: two traces of 4.8 MB each, more than LevelDB's write buffer: they are flushed into tables.
  let store = await openStore(base)
  await record(store, 'old-1', 400, 12 * 1024)
  await record(store, 'old-2', 400, 12 * 1024)
  await store.close()
  cpSync(base, firstSession, { recursive: true })
  // Session 2 (LevelDB turns the log into a table when it opens): small traces that stay in the log.
  store = await openStore(base)
  await record(store, 'new-1', 30, 2000)
  await record(store, 'new-2', 30, 2000)
  await record(store, 'big', 3, 2000, 1)
  await store.close()
  for (const name of ALL) {
    const file = join(root, 'originals', `${name}.trace.json`)
    assert.equal((await cli('export', name, '--out', file, '--store', base)).code, 0)
    originals.set(name, await readTraceFile(file))
  }
})

interface Kind {
  name: string
  /** Damages the copy; returns the files fsck must name. */
  damage(dir: string): string[]
  /** The store is still consistent (the damage is in bodies): it opens, and fsck finds the damaged bodies. */
  opens?: boolean
  /** Traces the damage cannot have reached: rescued whole, byte for byte. */
  whole: string[]
}

const KINDS: Kind[] = [
  {
    name: 'a body overwritten inside a table',
    damage: (dir) => {
      const f = fileHolding(dir, probe.get('old-1') as Buffer)
      overwrite(join(dir, f), readFileSync(join(dir, f)).indexOf((probe.get('old-1') as Buffer).subarray(6000, 6032)))
      return [f]
    },
    opens: true,
    whole: ['old-2', 'new-1', 'new-2', 'big'],
  },
  {
    name: 'a table deleted',
    damage: (dir) => {
      const f = fileHolding(dir, probe.get('old-1') as Buffer)
      rmSync(join(dir, f))
      return [f]
    },
    whole: ['new-1', 'new-2', 'big'],
  },
  {
    // Issue 31: a store not closed cleanly keeps tables its MANIFEST does not list (a compaction's output);
    // the check that reads them then met the missing table, took it for a file vanishing under a writer, and
    // retried until TR_STORE_LOCKED, with nothing rescued.
    name: 'a table deleted, beside a table the MANIFEST does not list',
    damage: (dir) => {
      const f = fileHolding(dir, probe.get('old-1') as Buffer)
      const tables = only(dir, /\.ldb$/).sort()
      const other = tables.find((t) => t !== f) as string
      const next = Number.parseInt(tables.at(-1) as string, 10) + 100
      cpSync(join(dir, other), join(dir, `${String(next).padStart(6, '0')}.ldb`))
      rmSync(join(dir, f))
      return [f]
    },
    whole: ['new-1', 'new-2', 'big'],
  },
  {
    name: 'a table cut in half',
    damage: (dir) => {
      const f = fileHolding(dir, probe.get('old-1') as Buffer)
      truncateSync(join(dir, f), statSync(join(dir, f)).size >> 1)
      return [f]
    },
    whole: ['new-1', 'new-2', 'big'],
  },
  {
    name: 'the MANIFEST damaged',
    damage: (dir) => {
      const [m] = only(dir, /^MANIFEST-/) as [string]
      overwrite(join(dir, m), statSync(join(dir, m)).size >> 1, 4)
      return [m]
    },
    whole: ALL,
  },
  {
    name: 'the MANIFEST cut in half',
    damage: (dir) => {
      const [m] = only(dir, /^MANIFEST-/) as [string]
      truncateSync(join(dir, m), statSync(join(dir, m)).size >> 1)
      return [m]
    },
    whole: ALL,
  },
  {
    name: 'the MANIFEST deleted',
    damage: (dir) => {
      const [m] = only(dir, /^MANIFEST-/) as [string]
      rmSync(join(dir, m))
      return [m]
    },
    whole: ALL,
  },
  {
    name: 'CURRENT deleted',
    damage: (dir) => {
      rmSync(join(dir, 'CURRENT'))
      return ['CURRENT']
    },
    whole: ALL,
  },
  {
    name: 'an older MANIFEST (a copy taken mid-write): tables it does not list hold a trace',
    damage: (dir) => {
      for (const m of only(dir, /^MANIFEST-|^CURRENT$/)) rmSync(join(dir, m))
      for (const m of only(firstSession, /^MANIFEST-|^CURRENT$/)) cpSync(join(firstSession, m), join(dir, m))
      return [only(dir, /\.ldb$/).at(-1) as string]
    },
    whole: ALL,
  },
  {
    name: 'a write-ahead-log record damaged',
    damage: (dir) => {
      const [log] = only(dir, /\.log$/) as [string]
      overwrite(join(dir, log), statSync(join(dir, log)).size >> 1, 1)
      return [log]
    },
    whole: ['old-1', 'old-2'],
  },
  {
    name: 'the write-ahead log cut in half',
    damage: (dir) => {
      const [log] = only(dir, /\.log$/) as [string]
      truncateSync(join(dir, log), statSync(join(dir, log)).size >> 1)
      return [log]
    },
    whole: ['old-1', 'old-2', 'new-1'],
  },
  {
    name: 'the write-ahead log deleted',
    damage: (dir) => {
      const [log] = only(dir, /\.log$/) as [string]
      rmSync(join(dir, log))
      return [log]
    },
    whole: ['old-1', 'old-2'],
  },
  {
    name: 'a piece file overwritten',
    damage: (dir) => {
      const f = fileHolding(dir, probe.get('big:big') as Buffer)
      overwrite(join(dir, f), 1000)
      return []
    },
    opens: true,
    whole: ['old-1', 'old-2', 'new-1', 'new-2'],
  },
  {
    name: 'a piece file deleted',
    damage: (dir) => {
      rmSync(join(dir, fileHolding(dir, probe.get('big:big') as Buffer)))
      return []
    },
    opens: true,
    whole: ['old-1', 'old-2', 'new-1', 'new-2'],
  },
]

// The kinds share nothing but the read-only base store and originals (each damages its own copy), so they run a
// few at a time: much of each one's time is the store waiting out a damaged open (it retries for a second in
// case another process is writing), which overlaps; four keep the rescued traces in memory bounded.
describe('a damaged store', { concurrency: 4 }, () => {
  for (const kind of KINDS) {
    test(`damage: ${kind.name} — nothing changes on disk, fsck names it and rescues every intact trace`, async (t) => {
      const dir = join(root, kind.name.replace(/\W+/g, '-'), 'store')
      cpSync(base, dir, { recursive: true })
      const named = kind.damage(dir)
      const before = snapshot(dir)

      const ls = await cli('ls', '--store', dir)
      if (kind.opens) assert.equal(ls.code, 0, ls.err)
      else {
        assert.equal(ls.code, 67, `ls must refuse the store: ${ls.out}`)
        assert.match(ls.err, /TR_STORE_CORRUPT/, 'damage, not a lock')
        for (const f of named) assert.match(ls.err, new RegExp(f.replace('.', '\\.')), 'the refusal names the damaged file')
        assert.match(ls.err, /Nothing was changed/)
      }

      const rescued = join(dir, '..', 'rescued')
      const fsck = await cli('fsck', '--store', dir, '--export-to', rescued)
      assert.equal(fsck.code, 67, fsck.out)
      for (const f of named) assert.match(fsck.err, new RegExp(f.replace('.', '\\.')), `fsck names ${f}`)
      if (kind.opens) assert.match(fsck.err, /is damaged|is missing/)
      assert.deepEqual(snapshot(dir), before, 'no file of the store changed, none was added or removed')

      // Every rescued exchange is exactly what was recorded; the traces the damage did not reach are whole.
      const files = readdirSync(rescued).filter((f) => f.endsWith('.trace.json'))
      // Each rescued file read once, for both checks below.
      const read = new Map<string, Trace>()
      for (const file of files) read.set(file, await readTraceFile(join(rescued, file)))
      for (const name of kind.whole) {
        assert.ok(files.includes(`${name}.trace.json`), `${name} rescued as complete (got ${files.join(', ')})`)
        const got = read.get(`${name}.trace.json`) as Trace
        const want = originals.get(name) as Trace
        assert.deepEqual(got.meta, want.meta, `${name}: not labelled partial\n${fsck.err}`)
        assert.deepEqual(got.exchanges, want.exchanges)
        assert.deepEqual(got.bodies, want.bodies)
      }
      const counts: string[] = []
      for (const file of files) {
        const got = read.get(file) as Trace
        counts.push(`${file.replace('.trace.json', '')} ${got.exchanges.length}`)
        for (const x of got.exchanges) {
          const [, trace, i] = /^https:\/\/api\.test\/([^/]+)\/(\d+)$/.exec(x.request.url) as RegExpExecArray
          const want = originals.get(trace as string) as Trace
          assert.deepEqual(x, want.exchanges[Number(i)], `${file}: ${x.request.url} as recorded`)
        }
        for (const [digest, bytes] of got.bodies) assert.equal(createHash('sha256').update(bytes).digest('hex'), digest)
      }
      // For the closing note: what was rescued (of old-1 400, old-2 400, new-1 30, new-2 30, big 3 exchanges).
      t.diagnostic(`ls exit ${ls.code}; rescued: ${counts.join(', ')}`)
    })
  }
})

test('read-only commands change no file: ls, show, export, diff, scan and fsck on a healthy store', async () => {
  const dir = join(root, 'read-only', 'store')
  cpSync(base, dir, { recursive: true })
  const before = snapshot(dir)
  const out = join(root, 'read-only')
  const runs = [
    ['ls'],
    ['show', 'new-1'],
    ['show', 'big', '--exchange', '1'],
    ['export', 'old-1', '--out', join(out, 'old-1.json')],
    ['diff', 'new-1', 'new-2'],
    ['scan'],
    ['fsck'],
  ]
  for (const argv of runs) {
    const r = await cli(...argv, '--store', dir)
    assert.equal(r.code, 0, `${argv.join(' ')}: ${r.err}`)
    assert.deepEqual(snapshot(dir), before, `${argv.join(' ')} changed no file`)
  }
  assert.deepEqual(
    readdirSync(dir).sort(),
    Object.keys(before)
      .filter((f) => !f.includes('/'))
      .concat('LOCK', 'pieces')
      .sort(),
  )
})

test('the store never follows a symbolic link out of its directory: a linked pieces/ or pieces/<xx>/ is refused, nothing is written there', async () => {
  const outside = join(root, 'outside')
  const { mkdirSync, renameSync, symlinkSync } = await import('node:fs')
  mkdirSync(outside, { recursive: true })
  // pieces/ itself a link: every open refuses (TR_STORE_IO, exit 68), writes nothing outside.
  const linked = join(root, 'linked', 'store')
  mkdirSync(linked, { recursive: true })
  symlinkSync(outside, join(linked, 'pieces'))
  await assert.rejects(
    (async () => {
      const s = await openStore(linked)
      await record(s, 'x', 2, 40 * 1024)
    })(),
    (err: unknown) => (err as { code?: string }).code === 'TR_STORE_IO' && /symbolic link/.test((err as Error).message),
  )
  assert.deepEqual(readdirSync(outside), [])

  // A subfolder of pieces/ moved out and linked back: reading through it and writing into it are refused.
  const dir = join(root, 'sublink', 'store')
  cpSync(base, dir, { recursive: true })
  const piece = fileHolding(dir, probe.get('big:big') as Buffer)
  const sub = piece.split('/')[1] as string
  renameSync(join(dir, 'pieces', sub), join(outside, sub))
  symlinkSync(join(outside, sub), join(dir, 'pieces', sub))
  const show = await cli('export', 'big', '--out', join(root, 'sublink', 'big.json'), '--store', dir)
  assert.equal(show.code, 68, show.err)
  assert.match(show.err, /TR_STORE_IO: .*symbolic link at .*pieces\/[0-9a-f]{2}/)
  const before = readdirSync(join(outside, sub))
  const store = await openStore(dir)
  const writer = (await store.beginTrace({ name: 'again', format: TRACE_FORMAT_VERSION })).bodyWriter()
  writer.write(probe.get('big:big') as Buffer)
  await assert.rejects(writer.finish(), (err: unknown) => (err as { code?: string }).code === 'TR_STORE_IO')
  await store.close()
  assert.deepEqual(readdirSync(join(outside, sub)), before, 'nothing written through the link')
})
