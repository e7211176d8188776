/**
 * The open check: before LevelDB may recover or compact a store (which rewrites its directory: it turns the
 * logs into tables, writes a new MANIFEST, and deletes or reuses the numbers of files it does not know), and
 * before a read-only command reads it, the store's files are read as they are and everything LevelDB would
 * drop or overwrite is accounted for:
 *   - CURRENT names a MANIFEST that reads whole (a torn last edit is a crash and is fine);
 *   - every table the MANIFEST lists is there, at its size, with a readable footer and index;
 *   - every table it does not list (an orphan, which LevelDB deletes, or overwrites when its number comes up
 *     again) holds nothing newer than what the listed tables and the logs hold;
 *   - the logs LevelDB would replay have no damaged record, no gap in their sequence numbers, reach the last
 *     sequence the MANIFEST knows, and are at least as long as they were when the store last synced
 *     (`synced.json`, written after every synced write): a log cut short loses writes that had been
 *     confirmed, which LevelDB would take for a crash;
 *   - no LevelDB file, and not `pieces/`, is a symbolic link.
 * Whatever cannot be proven safe is a problem naming its file; the store is then refused (TR_STORE_CORRUPT)
 * and nothing is changed. The same reading gives read-only commands their view (leveldb-view.ts), so they
 * never open LevelDB at all.
 */
import { randomBytes } from 'node:crypto'
import { lstat, readdir, readFile, rename, stat, unlink, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { ErrorCodes, ToolReplayError } from '../trace/index.ts'
import type { Entry } from './leveldb-format.ts'
import { batchHeader, type LogContents, readLogFile } from './leveldb-log.ts'
import { type Manifest, readManifest } from './leveldb-manifest.ts'
import { scanBlocks, TableDamage, TableFile } from './leveldb-table.ts'
import { FileView, tableName } from './leveldb-view.ts'
import { linkRefused } from './pieces.ts'

/** A problem found in a store's files: the files, and why they cannot be trusted. */
export interface FileProblem {
  files: string[]
  why: string
}

/** A store directory as its files describe it. */
export interface StoreFiles {
  dir: string
  names: Set<string>
  /** True when the directory holds no LevelDB file at all (a new or missing store). */
  empty: boolean
  manifest?: Manifest
  /** The logs LevelDB would replay, oldest first. */
  liveLogs: string[]
  /** Every table file and every log file in the directory. */
  tableFiles: string[]
  logFiles: string[]
  /** LevelDB files (and `pieces`) that are symbolic links. */
  links: string[]
  problems: FileProblem[]
}

/** The file written after every synced write: which log, and how long it was. */
export const SYNCED_FILE = 'synced.json'

const LOG_RE = /^(\d+)\.log$/
const TABLE_RE = /^(\d+)\.(ldb|sst)$/
const MANIFEST_RE = /^MANIFEST-(\d+)$/
const BYTEWISE = 'leveldb.BytewiseComparator'

/** The store's files changed while they were read (another process opened or wrote it): read them again. */
export class StoreChanged extends Error {}

/** Reads and checks the store's files; never writes. Throws StoreChanged when a file vanishes meanwhile. */
export async function inspectStore(dir: string): Promise<StoreFiles> {
  try {
    return await inspect(dir)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new StoreChanged(`a file of the store at ${dir} vanished while it was checked`)
    throw err
  }
}

async function inspect(dir: string): Promise<StoreFiles> {
  const list = await readdir(dir).catch(() => [] as string[])
  const names = new Set(list)
  const tableFiles = list.filter((f) => TABLE_RE.test(f)).sort()
  const logFiles = list.filter((f) => LOG_RE.test(f)).sort()
  const out: StoreFiles = { dir, names, empty: false, liveLogs: [], tableFiles, logFiles, links: [], problems: [] }
  const problem = (files: string[], why: string) => out.problems.push({ files, why })
  const levelFiles = list.filter((f) => TABLE_RE.test(f) || LOG_RE.test(f) || MANIFEST_RE.test(f) || f === 'CURRENT')
  out.empty = levelFiles.length === 0
  for (const f of [...levelFiles, 'pieces']) if ((await lstat(join(dir, f)).catch(() => undefined))?.isSymbolicLink()) out.links.push(f)
  if (out.empty) return out
  const current = names.has('CURRENT') ? (await readFile(join(dir, 'CURRENT'), 'latin1').catch(() => '')).trim() : undefined
  if (current === undefined) {
    problem(['CURRENT'], 'there is no CURRENT file, but LevelDB files are there (LevelDB would create an empty store and delete them)')
    return out
  }
  if (!MANIFEST_RE.test(current)) {
    problem(['CURRENT'], 'it does not name a MANIFEST file')
    return out
  }
  if (!names.has(current)) {
    problem(['CURRENT', current], `CURRENT names ${current}, which is missing`)
    return out
  }
  const m = readManifest(new Uint8Array(await readFile(join(dir, current))))
  out.manifest = m
  if (m.log.damage.length > 0 || m.badEdits > 0) {
    problem([current], `${m.log.damage.length + m.badEdits} of its records are damaged (first at byte ${m.log.damage[0]?.offset ?? '?'})`)
  }
  if (m.log.records.length === 0) problem([current], 'it holds no whole record')
  if (m.comparator !== undefined && m.comparator !== BYTEWISE) problem([current], `it was written with comparator ${m.comparator}`)
  await checkLiveTables(out, m, problem)
  await checkLogs(out, m, problem)
  await checkOrphans(out, m, problem)
  return out
}

async function checkLiveTables(out: StoreFiles, m: Manifest, problem: (files: string[], why: string) => void): Promise<void> {
  for (const t of m.tables) {
    const name = tableName(t.number, out.names)
    if (!out.names.has(name)) {
      problem([name], `the MANIFEST lists this table at level ${t.level}, but it is missing`)
      continue
    }
    const size = (await stat(join(out.dir, name))).size
    if (size !== t.size) {
      problem([name], `it is ${size} bytes, but the MANIFEST says ${t.size} (cut short or overwritten)`)
      continue
    }
    try {
      await (await TableFile.open(join(out.dir, name), name)).close()
    } catch (err) {
      if (!(err instanceof TableDamage)) throw err
      problem([name], err.message.slice(name.length + 2))
    }
  }
}

/** The logs LevelDB would replay: whole, in sequence, as long as the last sync saw them. */
async function checkLogs(out: StoreFiles, m: Manifest, problem: (files: string[], why: string) => void): Promise<void> {
  const numberOf = (f: string) => Number((LOG_RE.exec(f) as RegExpExecArray)[1])
  out.liveLogs = out.logFiles.filter((f) => numberOf(f) >= m.logNumber || numberOf(f) === m.prevLogNumber)
  const synced = await readSynced(out.dir)
  let first: number | undefined
  let last: number | undefined
  const contents = new Map<string, LogContents>()
  for (const [i, name] of out.liveLogs.entries()) {
    const log = await readLogFile(join(out.dir, name))
    contents.set(name, log)
    if (log.damage.length > 0) {
      const d = log.damage[0] as { offset: number; why: string }
      problem([name], `the write-ahead log has ${log.damage.length} damaged record(s), first at byte ${d.offset} (${d.why}); LevelDB would drop them silently`)
    }
    // Only the newest log may end inside a record (a crash while writing it).
    if (log.torn && i < out.liveLogs.length - 1)
      problem([name], `it ends inside a record at byte ${log.torn.offset}, but a newer log follows it: it was cut short`)
    for (const r of log.records) {
      const batch = batchHeader(r.data)
      if (!batch) {
        problem([name], `the record at byte ${r.offset} is not a write batch`)
        continue
      }
      if (last !== undefined && batch.seq !== last + 1)
        problem([name], `sequence numbers jump from ${last} to ${batch.seq} at byte ${r.offset}: writes in between are missing`)
      first ??= batch.seq
      last = batch.seq + batch.count - 1
    }
  }
  if (first !== undefined && first > m.lastSequence + 1)
    problem(out.liveLogs, `the logs start at sequence ${first}, but the MANIFEST ends at ${m.lastSequence}: writes in between are missing`)
  if (first !== undefined && first <= m.lastSequence && (last as number) < m.lastSequence)
    problem(out.liveLogs, `the logs end at sequence ${last}, but the MANIFEST knows writes up to ${m.lastSequence}: the logs were cut short`)
  if (synced === undefined) return
  const name = `${String(synced.log).padStart(6, '0')}.log`
  const log = contents.get(name)
  if (log === undefined) {
    if (synced.log >= m.logNumber) problem([name], `it is missing, but it held writes confirmed as synced (${SYNCED_FILE}) that no table holds`)
  } else if (log.end < synced.bytes) {
    problem(
      [name],
      `its whole records end at byte ${log.end}, but it held ${synced.bytes} bytes of confirmed, synced writes (${SYNCED_FILE}): it was cut short`,
    )
  }
}

/** Tables the MANIFEST does not list: safe only when every entry is also in the store, at least as new. */
async function checkOrphans(out: StoreFiles, m: Manifest, problem: (files: string[], why: string) => void): Promise<void> {
  const live = new Set(m.tables.map((t) => tableName(t.number, out.names)))
  const known = new Map(((await readSynced(out.dir))?.orphans ?? []).map(([name, size, mtime]) => [name, `${size}:${mtime}`]))
  const orphans: string[] = []
  for (const f of out.tableFiles.filter((t) => !live.has(t))) {
    const st = await stat(join(out.dir, f))
    if (known.get(f) !== `${st.size}:${st.mtimeMs}`) orphans.push(f)
  }
  if (orphans.length === 0) return
  const unlisted = () => problem(orphans, 'the MANIFEST does not list these tables (they may hold what is missing); LevelDB would delete them')
  // Already refused for a listed table or a log: the view below would meet that damage (a listed table that is
  // missing would read as one a writer deleted meanwhile, and be retried as a change until TR_STORE_LOCKED).
  if (out.problems.length > 0) return unlisted()
  let view: FileView
  try {
    view = await FileView.live(out.dir, m.tables, out.liveLogs, out.names)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw err
    // The store is refused for what broke the view; the orphans may hold what it lost.
    return unlisted()
  }
  try {
    for (const name of orphans) {
      // Orphans are normal: a table cut off while being written (a flush or compaction stopped by close or a
      // crash) or one a compaction replaced, not yet deleted. What they hold came from tables and logs that
      // are still live, so every entry that can be read must be found there, at least as new. A table whose
      // MANIFEST edit was lost holds entries found nowhere else.
      const read = await readableEntries(join(out.dir, name), name)
      // Unfinished (no footer) with no whole block yet: a flush or compaction killed as it began.
      if (read.entries.length === 0 && read.unfinished) continue
      if (read.entries.length === 0) {
        problem([name], `the MANIFEST does not list it and nothing in it can be read (${read.unreadable ?? 'empty'}); LevelDB would delete it`)
        continue
      }
      let lost = 0
      let example = ''
      const keys = [...new Set(read.entries.map((e) => e.key))].sort()
      const newest = await view.newestSeqs(keys)
      for (const e of read.entries) {
        if ((newest.get(e.key) ?? -1) < e.seq) {
          lost++
          example ||= Buffer.from(e.key, 'latin1').toString('utf8')
        }
      }
      if (lost > 0)
        problem(
          [name],
          `the MANIFEST does not list it, and ${lost} of its ${read.entries.length} readable entries are nowhere else in the store (e.g. "${example}"); LevelDB would delete it or write over it`,
        )
    }
  } finally {
    await view.close()
  }
}

/**
 * The entries of a table that can be read (damaged blocks skipped); `unreadable` says what could not be, and
 * `unfinished` is set for a table without its footer (written up to some block, never finished).
 */
async function readableEntries(path: string, name: string): Promise<{ entries: Entry[]; unreadable?: string; unfinished?: boolean }> {
  let file: TableFile
  try {
    file = await TableFile.open(path, name)
    await file.load()
  } catch (err) {
    if (!(err instanceof TableDamage)) throw err
    const found = scanBlocks(new Uint8Array(await readFile(path)))
    return { entries: found.entries, unreadable: err.message, unfinished: /no table footer|too short/.test(err.message) }
  }
  const entries: Entry[] = []
  let unreadable: string | undefined
  try {
    for (let i = 0; i < file.blocks; i++) {
      try {
        entries.push(...(await file.block(i)))
      } catch (err) {
        unreadable ??= (err as Error).message
      }
    }
  } finally {
    await file.close()
  }
  return unreadable === undefined ? { entries } : { entries, unreadable }
}

/** The last synced position, or undefined when none was recorded (or the file is unreadable). */
interface Synced {
  log: number
  bytes: number
  /** Tables the MANIFEST did not list when the store was last closed cleanly (name, size, mtime). */
  orphans?: Array<[string, number, number]>
}

async function readSynced(dir: string): Promise<Synced | undefined> {
  try {
    const v = JSON.parse(await readFile(join(dir, SYNCED_FILE), 'utf8')) as Partial<Synced>
    if (!Number.isSafeInteger(v.log) || !Number.isSafeInteger(v.bytes)) return undefined
    return { log: v.log as number, bytes: v.bytes as number, ...(Array.isArray(v.orphans) ? { orphans: v.orphans } : {}) }
  } catch {
    return undefined
  }
}

/**
 * Records how long the newest log is, right after a synced write (and with no other write running): a later
 * open refuses the store if that log is found shorter. Best effort: the record is only a floor.
 */
export async function recordSynced(dir: string, orphans?: Array<[string, number, number]>): Promise<void> {
  const logs = (await readdir(dir).catch(() => [] as string[])).filter((f) => LOG_RE.test(f)).sort()
  const newest = logs.at(-1)
  if (newest === undefined) return
  const bytes = (await stat(join(dir, newest)).catch(() => undefined))?.size
  if (bytes === undefined) return
  const tmp = join(dir, `.${SYNCED_FILE}.${randomBytes(4).toString('hex')}.tmp`)
  try {
    await writeFile(tmp, `${JSON.stringify({ log: Number.parseInt(newest, 10), bytes, ...(orphans ? { orphans } : {}) })}\n`)
    await rename(tmp, join(dir, SYNCED_FILE))
  } catch {
    await unlink(tmp).catch(() => {})
  }
}

/** Bytes a store directory takes on disk: LevelDB's files (and ours beside them), and the piece files. */
export async function diskUsage(dir: string): Promise<{ database: number; pieces: number }> {
  let database = 0
  let pieces = 0
  for (const f of await readdir(dir).catch(() => [] as string[])) {
    if (f === 'pieces') {
      for (const sub of await readdir(join(dir, f)).catch(() => [] as string[]))
        for (const p of await readdir(join(dir, f, sub)).catch(() => [] as string[]))
          pieces += (await stat(join(dir, f, sub, p)).catch(() => undefined))?.size ?? 0
    } else {
      const st = await lstat(join(dir, f)).catch(() => undefined)
      if (st?.isFile()) database += st.size
    }
  }
  return { database, pieces }
}

/** Throws TR_STORE_IO when a LevelDB file or `pieces/` is a symbolic link (the store never follows one). */
export function assertNoLinks(files: StoreFiles): void {
  if (files.links.length > 0) throw linkRefused(files.dir, files.links.map((f) => join(files.dir, f)).join(', '))
}

/**
 * After LevelDB closed cleanly (everything it confirmed is in its MANIFEST and logs), records the tables it
 * left unlisted (outputs of a compaction that close stopped): they hold nothing the store needs, and the next
 * open need not read them to prove it. A table that becomes unlisted later (a MANIFEST damaged or replaced) is
 * not on the list, and is checked.
 */
export async function recordClosed(dir: string): Promise<void> {
  try {
    const names = await readdir(dir)
    const current = (await readFile(join(dir, 'CURRENT'), 'latin1')).trim()
    if (!MANIFEST_RE.test(current)) return
    const m = readManifest(new Uint8Array(await readFile(join(dir, current))))
    const set = new Set(names)
    const live = new Set(m.tables.map((t) => tableName(t.number, set)))
    const orphans: Array<[string, number, number]> = []
    for (const f of names.filter((t) => TABLE_RE.test(t) && !live.has(t))) {
      const st = await stat(join(dir, f))
      orphans.push([f, st.size, st.mtimeMs])
    }
    await recordSynced(dir, orphans)
  } catch {
    // Best effort: without the record, the next open checks the orphans itself.
  }
}

/** TR_STORE_CORRUPT naming the problem files; nothing was changed. */
export function filesCorrupt(dir: string, problems: FileProblem[]): ToolReplayError {
  const files = [...new Set(problems.flatMap((p) => p.files))]
  const list = problems
    .slice(0, 5)
    .map((p) => `${p.files.join(', ')}: ${p.why}`)
    .join('; ')
  return new ToolReplayError(
    ErrorCodes.STORE_CORRUPT,
    `The trace store at ${dir} is damaged (${files.join(', ')}): ${list}${problems.length > 5 ? `; and ${problems.length - 5} more` : ''}. Nothing was changed. Run \`tr-proxy fsck --store ${dir} --export-to DIR\` to rescue every trace that is intact on disk, then move the directory aside and \`tr-proxy import\` the rescued files.`,
    { details: { location: dir, files, problems } },
  )
}
