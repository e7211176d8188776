/**
 * A read-only view of a LevelDB directory built from its files, without LevelDB: the tables and the writes of
 * the logs merged as LevelDB merges them (for each key, the entry with the highest sequence number; a
 * deletion hides older values). Nothing is written, renamed or deleted.
 *
 * Two ways to build one: `live` uses the tables the MANIFEST lists and the logs LevelDB would replay (what
 * LevelDB itself would show: read-only commands and the open check); `rescue` uses every table and log in the
 * directory whatever the MANIFEST says, skips what is damaged and records it (fsck on a damaged store).
 */
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { seekEntry } from './leveldb-block.ts'
import type { Entry } from './leveldb-format.ts'
import { parseBatch, readLogFile } from './leveldb-log.ts'
import type { LiveTable } from './leveldb-manifest.ts'
import { bloomHash, scanBlocks, syncPointReads, TableDamage, TableFile } from './leveldb-table.ts'

/** A range of latin1 keys. */
export interface RawRange {
  gte?: string
  gt?: string
  lt: string
}

/** A source of entries in key order (newest first within a key). */
interface Source {
  smallest: string
  largest: string
  /** A cursor at the first entry at or after `start`. */
  cursor(view: FileView, start: string): Cursor
  /** False when the source certainly does not hold `key` (of this bloomHash), by bloom filters, so a point read skips it. */
  mayContain?(key: string, hash: number): boolean | Promise<boolean>
  /** The first entry at or after `key` (`bytes` is the same key), decoding no more of a block than that (tables). */
  seek?(view: FileView, key: string, bytes: Uint8Array): Promise<Entry | undefined>
  /** The first entry at or after `key`, found without waiting (entries in memory). */
  find?(key: string): Entry | undefined
}

/** A table with its key range. */
interface RangedTable {
  file: TableFile
  smallest: string
  largest: string
}

/** Walks a source block by block; `entries[i]` is the current entry. */
interface Cursor {
  entries: Entry[]
  i: number
  /** Loads the next block; false when the source has no more. */
  more(): Promise<boolean>
}

const BLOCK_CACHE_BYTES = 16 * 1024 * 1024

/** The view. Close it to release its file handles. */
export class FileView {
  readonly dir: string
  /** What could not be read (rescue only): `file: why`. */
  readonly damage: string[] = []
  readonly #rescue: boolean
  readonly #sources: Source[]
  readonly #tables: TableFile[]
  readonly #cache = new Map<string, { entries: Entry[]; bytes: number }>()
  #cacheBytes = 0
  /** Blocks read by point reads, checked and decompressed but not decoded (see `contents`). */
  readonly #contents = new Map<string, Uint8Array>()
  #contentsBytes = 0

  private constructor(dir: string, rescue: boolean, sources: Source[], tables: TableFile[], damage: string[]) {
    this.dir = dir
    this.#rescue = rescue
    this.#sources = sources
    this.#tables = tables
    this.damage.push(...damage)
  }

  /** The view LevelDB would serve: `tables` as the MANIFEST lists them, `logs` (file names) in order. */
  static async live(dir: string, tables: LiveTable[], logs: string[], names?: Set<string>): Promise<FileView> {
    const opened: TableFile[] = []
    try {
      const ranged: RangedTable[] = []
      for (const t of tables) {
        const name = tableName(t.number, names)
        const file = await TableFile.open(join(dir, name), name)
        opened.push(file)
        ranged.push({ file, smallest: t.smallest, largest: t.largest })
      }
      const sources = chains(ranged)
      const mem = await logEntries(dir, logs, [], false)
      if (mem.length > 0) sources.push(memSource(mem))
      return new FileView(dir, false, sources, opened, [])
    } catch (err) {
      for (const f of opened) await f.close()
      throw err
    }
  }

  /** Every table and log in the directory, read as far as they can be (what could not be is in `damage`). */
  static async rescue(dir: string, tableNames: string[], logs: string[]): Promise<FileView> {
    const damage: string[] = []
    const opened: TableFile[] = []
    const ranged: RangedTable[] = []
    const sources: Source[] = []
    for (const name of tableNames) {
      try {
        const file = await TableFile.open(join(dir, name), name)
        opened.push(file)
        await file.load()
        const first = await firstKey(file)
        if (first !== undefined) ranged.push({ file, smallest: first, largest: file.largest })
      } catch (err) {
        // No footer or index: read the blocks that are whole from the start of the file.
        const why = err instanceof TableDamage ? err.message : `${name}: ${(err as Error).message}`
        const bytes = await readFile(join(dir, name)).catch(() => undefined)
        const found = bytes ? scanBlocks(new Uint8Array(bytes)) : { entries: [], end: 0 }
        damage.push(`${why}; ${found.entries.length} entries read from its first ${found.end} bytes`)
        if (found.entries.length > 0) sources.push(memSource(found.entries))
      }
    }
    sources.push(...chains(ranged))
    const mem = await logEntries(dir, logs, damage, true)
    if (mem.length > 0) sources.push(memSource(mem))
    return new FileView(dir, true, sources, opened, damage)
  }

  /** The newest entry of `key` (a deletion included), or undefined. */
  async newest(key: string): Promise<Entry | undefined> {
    let best: Entry | undefined
    let bytes: Uint8Array | undefined
    let hash: number | undefined
    for (const s of this.#sources) {
      if (key < s.smallest || key > s.largest) continue
      if (s.mayContain) {
        bytes ??= Buffer.from(key, 'latin1')
        hash ??= bloomHash(bytes)
        const may = s.mayContain(key, hash)
        if (may === false || (may !== true && !(await may))) continue
      }
      let e: Entry | undefined
      // The logs' writes are asked for by every point read (their keys span the store's): no cursor and no wait for them.
      if (s.find) e = s.find(key)
      else if (s.seek) e = await s.seek(this, key, (bytes ??= Buffer.from(key, 'latin1')))
      else {
        const c = s.cursor(this, key)
        if (await fill(c)) e = c.entries[c.i]
      }
      if (e?.key === key && (best === undefined || e.seq > best.seq)) best = e
    }
    return best
  }

  /**
   * The newest sequence number (a deletion included) of each of `keys`, given in ascending order: one forward
   * walk per source that reads each block at most once, so checking a whole table against the store costs
   * about what reading both costs (the open check's orphans).
   */
  async newestSeqs(keys: string[]): Promise<Map<string, number>> {
    const out = new Map<string, number>()
    for (const s of this.#sources) {
      let c: Cursor | undefined
      for (const key of keys) {
        if (key < s.smallest || key > s.largest) continue
        // Forward only: a cursor whose block is behind `key` is re-seeked there (blocks in between are skipped).
        if (c === undefined || (c.entries.at(-1) as Entry | undefined)?.key === undefined || (c.entries.at(-1) as Entry).key < key) {
          c = s.cursor(this, key)
          if (!(await fill(c))) {
            c = undefined
            continue
          }
        } else c.i = lowerBound(c.entries, key)
        const e = c.entries[c.i]
        if (e?.key === key && e.seq > (out.get(key) ?? -1)) out.set(key, e.seq)
      }
    }
    return out
  }

  /** The value of `key`, or undefined when it is absent or deleted. */
  async get(key: string): Promise<Uint8Array | undefined> {
    const e = await this.newest(key)
    return e?.put ? e.value : undefined
  }

  /** Visits the live keys of `range` in order; `visit` returns false to stop. */
  async scan(range: RawRange, visit: (key: string, value: Uint8Array) => boolean | undefined): Promise<void> {
    const start = range.gte ?? range.gt ?? ''
    const cursors: Cursor[] = []
    for (const s of this.#sources) {
      if (s.largest < start || s.smallest >= range.lt) continue
      const c = s.cursor(this, start)
      if (await fill(c)) cursors.push(c)
    }
    for (;;) {
      let best: Entry | undefined
      for (let k = cursors.length - 1; k >= 0; k--) if ((cursors[k] as Cursor).i >= (cursors[k] as Cursor).entries.length) cursors.splice(k, 1)
      for (const c of cursors) {
        const e = c.entries[c.i]
        if (e && (best === undefined || e.key < best.key || (e.key === best.key && e.seq > best.seq))) best = e
      }
      if (best === undefined || best.key >= range.lt) return
      const key = best.key
      const skip = range.gt !== undefined && key <= range.gt
      if (!skip && best.put && visit(key, best.value) === false) return
      // Past every version of this key in every source.
      for (const c of cursors) {
        while (c.i < c.entries.length && (c.entries[c.i] as Entry).key === key) {
          c.i++
          if (c.i >= c.entries.length) await fill(c)
        }
      }
    }
  }

  /** A table's block through the cache. */
  async block(file: TableFile, i: number): Promise<Entry[] | undefined> {
    const id = `${file.name}:${i}`
    const hit = this.#cache.get(id)
    if (hit) {
      // Refresh its place: Map order is the eviction order.
      this.#cache.delete(id)
      this.#cache.set(id, hit)
      return hit.entries
    }
    let entries: Entry[]
    try {
      entries = await file.block(i)
    } catch (err) {
      if (!this.#rescue || !(err instanceof TableDamage)) throw err
      this.damage.push(err.message)
      entries = []
    }
    const bytes = entries.reduce((n, e) => n + e.key.length + e.value.byteLength + 48, 0)
    this.#cache.set(id, { entries, bytes })
    this.#cacheBytes += bytes
    if (this.#cacheBytes <= BLOCK_CACHE_BYTES) return entries
    // Down to 3/4 in one pass: each pass is a new Map iterator, which walks every entry deleted (a refreshed
    // hit is one) since the map last compacted itself; a pass per insert costs that walk per block read.
    for (const [k, v] of this.#cache) {
      if (this.#cacheBytes <= (BLOCK_CACHE_BYTES * 3) / 4) break
      this.#cache.delete(k)
      this.#cacheBytes -= v.bytes
    }
    return entries
  }

  /**
   * The first entry at or after `key` in a table's block, for a point read: the block's contents come through
   * a cache of their own (checked and decompressed once), and only the entries near `key` are decoded. Reading a
   * body by its digest this way, not as a cursor that decodes and caches the whole block, is what makes an
   * export (a body per exchange, in digest order nowhere near exchange order) cost a block read per body.
   */
  async seekIn(file: TableFile, i: number, key: Uint8Array): Promise<Entry | undefined> {
    if (syncPointReads() && !this.#rescue) return file.seek(i, key)
    const id = `${file.name}:${i}`
    let contents = this.#contents.get(id)
    if (contents === undefined) {
      try {
        contents = await file.contents(i)
      } catch (err) {
        if (!this.#rescue || !(err instanceof TableDamage)) throw err
        this.damage.push(err.message)
        contents = new Uint8Array(0)
      }
      this.#contents.set(id, contents)
      this.#contentsBytes += contents.byteLength + 64
      if (this.#contentsBytes > BLOCK_CACHE_BYTES) {
        // Oldest first, down to 3/4 in one pass (see `block`).
        for (const [k, v] of this.#contents) {
          if (this.#contentsBytes <= (BLOCK_CACHE_BYTES * 3) / 4) break
          this.#contents.delete(k)
          this.#contentsBytes -= v.byteLength + 64
        }
      }
    }
    if (contents.byteLength === 0) return undefined
    try {
      return seekEntry(contents, key)
    } catch (why) {
      const err = new TableDamage(file.name, `data block ${i + 1} of ${file.blocks} is damaged (${String(why)})`)
      if (!this.#rescue) throw err
      this.damage.push(err.message)
      return undefined
    }
  }

  async close(): Promise<void> {
    for (const f of this.#tables) await f.close().catch(() => {})
    this.#cache.clear()
    this.#contents.clear()
  }
}

/** The name LevelDB gives table `number` (.ldb; .sst in old stores, whichever exists is opened). */
export function tableName(number: number, names?: Set<string>): string {
  const base = String(number).padStart(6, '0')
  return names?.has(`${base}.sst`) ? `${base}.sst` : `${base}.ldb`
}

async function fill(c: Cursor): Promise<boolean> {
  while (c.i >= c.entries.length) if (!(await c.more())) return false
  return true
}

/**
 * Tables grouped into chains of tables whose key ranges do not overlap (LevelDB's levels 1 and up are such
 * chains already), so a scan merges a few cursors rather than one per table.
 */
function chains(tables: RangedTable[]): Source[] {
  const sorted = [...tables].sort((a, b) => (a.smallest < b.smallest ? -1 : a.smallest > b.smallest ? 1 : 0))
  const out: RangedTable[][] = []
  for (const t of sorted) {
    const chain = out.find((c) => (c.at(-1) as RangedTable).largest < t.smallest)
    if (chain) chain.push(t)
    else out.push([t])
  }
  return out.map(chainSource)
}

function chainSource(tables: RangedTable[]): Source {
  return {
    smallest: (tables[0] as RangedTable).smallest,
    largest: (tables.at(-1) as RangedTable).largest,
    mayContain(key, hash) {
      const t = tables[firstTableFrom(tables, key)]
      if (t === undefined || key < t.smallest) return false
      const inTable = (): boolean | Promise<boolean> => {
        const block = t.file.seekBlock(key)
        return block < t.file.blocks && t.file.mayContain(block, hash)
      }
      return t.file.loaded ? inTable() : t.file.load().then(inTable)
    },
    async seek(view, key, bytes) {
      for (let t = firstTableFrom(tables, key), b = -1; t < tables.length; ) {
        const file = (tables[t] as RangedTable).file
        await file.load()
        if (b === -1) b = file.seekBlock(key)
        if (b >= file.blocks) {
          t++
          b = 0
          continue
        }
        // Past the block's last entry only when the index's separator is loose: the next block then starts past it.
        const e = await view.seekIn(file, b++, bytes)
        if (e !== undefined) return e
      }
      return undefined
    },
    cursor(view, start) {
      // The first table that may hold `start` or later keys; its index is read when the cursor first moves.
      let t = firstTableFrom(tables, start)
      let next = -1
      const c: Cursor = {
        entries: [],
        i: 0,
        async more() {
          for (;;) {
            if (t >= tables.length) return false
            const file = (tables[t] as RangedTable).file
            await file.load()
            if (next === -1) next = file.seekBlock(start)
            if (next < file.blocks) break
            t++
            next = 0
          }
          if (t >= tables.length) return false
          c.entries = (await view.block((tables[t] as RangedTable).file, next++)) ?? []
          c.i = lowerBound(c.entries, start)
          return true
        },
      }
      return c
    },
  }
}

/** Entries already in memory (the logs' writes, or the blocks of a table read without its index), sorted. */
function memSource(entries: Entry[]): Source {
  entries.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : b.seq - a.seq))
  return {
    smallest: (entries[0] as Entry).key,
    largest: (entries.at(-1) as Entry).key,
    find: (key) => entries[lowerBound(entries, key)],
    cursor(_view, start) {
      let done = false
      const c: Cursor = {
        entries: [],
        i: 0,
        async more() {
          if (done) return false
          done = true
          c.entries = entries
          c.i = lowerBound(entries, start)
          return true
        },
      }
      return c
    },
  }
}

/** Index of the first table of a chain whose last key is >= `key`. */
function firstTableFrom(tables: RangedTable[], key: string): number {
  let lo = 0
  let hi = tables.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if ((tables[mid] as RangedTable).largest < key) lo = mid + 1
    else hi = mid
  }
  return lo
}

/** Index of the first entry whose key is >= `key`. */
function lowerBound(entries: Entry[], key: string): number {
  let lo = 0
  let hi = entries.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if ((entries[mid] as Entry).key < key) lo = mid + 1
    else hi = mid
  }
  return lo
}

async function firstKey(file: TableFile): Promise<string | undefined> {
  for (let i = 0; i < file.blocks; i++) {
    const entries = await file.block(i).catch(() => [])
    if (entries.length > 0) return (entries[0] as Entry).key
  }
  return undefined
}

/** Every write of the logs, in order (whole records only; in rescue, damaged ones skipped and noted). */
async function logEntries(dir: string, logs: string[], damage: string[], rescue: boolean): Promise<Entry[]> {
  const out: Entry[] = []
  for (const name of logs) {
    const contents = await readLogFile(join(dir, name))
    if (rescue) for (const d of contents.damage) damage.push(`${name}: a damaged record at byte ${d.offset} (${d.why}) was skipped`)
    if (rescue && contents.torn) damage.push(`${name}: ends inside a record at byte ${contents.torn.offset}; the writes before it were read`)
    for (const r of contents.records) {
      const batch = parseBatch(r.data)
      if (batch) out.push(...batch.entries)
      else if (rescue) damage.push(`${name}: the record at byte ${r.offset} is not a write batch`)
      else throw new TableDamage(name, `the record at byte ${r.offset} is not a write batch`)
    }
  }
  return out
}
