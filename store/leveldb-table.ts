/**
 * Reading LevelDB table files (.ldb/.sst) ourselves, read-only: what lets a read-only command see a store
 * without opening it with LevelDB (which rewrites files on every open), lets the open check prove an orphan
 * table holds nothing the store would lose, and lets fsck rescue what a damaged store still holds.
 *
 * @note Format (leveldb/doc/table_format.md, table/format.cc): data blocks, a filter block, a metaindex
 * block, an index block, then a 48-byte footer (two block handles, padding, magic 0xdb4775248b80fb57). Each
 * block is followed by a 5-byte trailer: compression type (0 none, 1 snappy) and the masked CRC-32C of the
 * contents and that type byte. A block holds prefix-compressed entries (shared, unshared, value length as
 * varints, key delta, value) and ends with its restart offsets. Keys in data blocks are internal keys: the
 * user key then 8 bytes of `sequence << 8 | type` (1 value, 0 deletion). Unlike LevelDB's default reads,
 * every block's CRC is checked here. A block's own bytes (trailer, entries, point search) are leveldb-block.ts's.
 */
import { readSync } from 'node:fs'
import { type FileHandle, open } from 'node:fs/promises'
import { blockContents, blockEntries, seekEntry, TRAILER } from './leveldb-block.ts'
import { crc32cStep, type Entry, parseInternalKey, unmaskCrc, varint } from './leveldb-format.ts'

const FOOTER = 48
const MAGIC_LO = 0x8b80fb57
const MAGIC_HI = 0xdb477524

/** Where a table cannot be read, and why (for messages that name the file). */
export class TableDamage extends Error {
  readonly file: string
  constructor(file: string, why: string) {
    super(`${file}: ${why}`)
    this.file = file
  }
}

interface Handle {
  offset: number
  size: number
}

function handleAt(bytes: Uint8Array, p: number): [Handle, number] | undefined {
  const o = varint(bytes, p)
  const s = o && varint(bytes, o[1])
  return o && s ? [{ offset: o[0], size: s[0] }, s[1]] : undefined
}

/** A table's bloom filter block (table/filter_block.cc): one filter per 2 KiB of data-block offsets. */
interface Filter {
  data: Uint8Array
  view: DataView
  offsets: number
  count: number
  baseLg: number
}

const FILTER_KEY = 'filter.leveldb.BuiltinBloomFilter2'
const READ_AHEAD = 256 * 1024

/** LevelDB's Hash (util/hash.cc), which its bloom filter uses with seed 0xbc9f1d34. */
function leveldbHash(bytes: Uint8Array, seed: number): number {
  const m = 0xc6a4a793
  let h = (seed ^ Math.imul(bytes.byteLength, m)) >>> 0
  let i = 0
  for (; i + 4 <= bytes.byteLength; i += 4) {
    const w = ((bytes[i] as number) | ((bytes[i + 1] as number) << 8) | ((bytes[i + 2] as number) << 16) | ((bytes[i + 3] as number) << 24)) >>> 0
    h = (h + w) >>> 0
    h = Math.imul(h, m) >>> 0
    h = (h ^ (h >>> 16)) >>> 0
  }
  const rest = bytes.byteLength - i
  if (rest > 0) {
    if (rest === 3) h = (h + ((bytes[i + 2] as number) << 16)) >>> 0
    if (rest >= 2) h = (h + ((bytes[i + 1] as number) << 8)) >>> 0
    h = (h + (bytes[i] as number)) >>> 0
    h = Math.imul(h, m) >>> 0
    h = (h ^ (h >>> 24)) >>> 0
  }
  return h
}

/** A key's hash for the bloom filters (the same in every table: a point read takes it once). */
export function bloomHash(key: Uint8Array): number {
  return leveldbHash(key, 0xbc9f1d34)
}

/** The bloom filter's answer (util/bloom.cc KeyMayMatch) for a key of this bloomHash: false means the key is certainly absent. */
function bloomMayMatch(hash: number, filter: Uint8Array, start: number, limit: number): boolean {
  if (limit - start < 2) return false
  const bits = (limit - start - 1) * 8
  const k = filter[limit - 1] as number
  if (k > 30) return true
  let h = hash
  const delta = ((h >>> 17) | (h << 15)) >>> 0
  for (let j = 0; j < k; j++) {
    const bit = h % bits
    if (((filter[start + (bit >>> 3)] as number) & (1 << (bit % 8))) === 0) return false
    h = (h + delta) >>> 0
  }
  return true
}

/** One index entry: the data block it points at and a key at or past that block's last key. */
interface IndexEntry {
  last: string
  handle: Handle
}

/**
 * A table file opened for reading. Opening reads only its footer; the index (and the bloom filter) are read
 * on first use with `load()`, blocks on demand, so a store of many tables costs what is read.
 */
export class TableFile {
  readonly path: string
  readonly name: string
  readonly size: number
  readonly #indexHandle: Handle
  readonly #metaHandle: Handle
  #index: IndexEntry[] = []
  #loaded: Promise<void> | undefined
  #indexRead = false
  #filter: Promise<Filter | undefined> | undefined
  /** The filter once read: null when the table has none. */
  #filterRead: Filter | null | undefined
  /** Bytes read ahead while blocks are read in order (a scan), so a scan reads the file in big reads. */
  #window: { offset: number; bytes: Uint8Array } | undefined
  #lastBlock = -2

  private constructor(path: string, name: string, size: number, index: Handle, meta: Handle) {
    this.path = path
    this.name = name
    this.size = size
    this.#indexHandle = index
    this.#metaHandle = meta
  }

  /** Opens a table: checks its footer (TableDamage when the table is cut short or its end overwritten). */
  static async open(path: string, name: string): Promise<TableFile> {
    return withHandle(path, async (fh) => {
      const size = (await fh.stat()).size
      if (size < FOOTER) throw new TableDamage(name, `only ${size} bytes, too short for a table (cut short?)`)
      const footer = await readAt(fh, size - FOOTER, FOOTER)
      const fv = new DataView(footer.buffer, footer.byteOffset, FOOTER)
      if (fv.getUint32(40, true) !== MAGIC_LO || fv.getUint32(44, true) !== MAGIC_HI)
        throw new TableDamage(name, 'no table footer at its end (cut short or overwritten)')
      const meta = handleAt(footer, 0)
      const index = meta && handleAt(footer, meta[1])
      if (!index || index[0].offset + index[0].size + TRAILER > size) throw new TableDamage(name, 'its footer points outside the file')
      return new TableFile(path, name, size, index[0], meta[0])
    })
  }

  /** Reads the index once (TableDamage when it is damaged); the other methods need it. */
  load(): Promise<void> {
    this.#loaded ??= this.#readIndex()
    return this.#loaded
  }

  async #readIndex(): Promise<void> {
    const h = this.#indexHandle
    const raw = await withHandle(this.path, (fh) => readAt(fh, h.offset, h.size + TRAILER))
    let entries: Array<[Uint8Array, Uint8Array]>
    try {
      entries = blockEntries(blockContents(raw, h.size))
    } catch (why) {
      throw new TableDamage(this.name, `its index block is damaged (${String(why)})`)
    }
    const out: IndexEntry[] = []
    for (const [k, v] of entries) {
      const parsed = parseInternalKey(k)
      const handle = handleAt(v, 0)
      if (!parsed || !handle || handle[0].offset + handle[0].size + TRAILER > this.size)
        throw new TableDamage(this.name, 'its index block points outside the file')
      out.push({ last: parsed.key, handle: handle[0] })
    }
    this.#index = out
    this.#indexRead = true
  }

  /**
   * False when block `i` certainly does not hold the key of this bloomHash, by the table's bloom filter. A
   * boolean at once when the index and filter were read (every read after the first: a point read asks each
   * table it passes), else a promise.
   */
  mayContain(i: number, hash: number): boolean | Promise<boolean> {
    if (this.#filterRead !== undefined) return this.#mayContain(this.#filterRead, i, hash)
    return this.#readFilter().then((f) => this.#mayContain(f, i, hash))
  }

  async #readFilter(): Promise<Filter | null> {
    await this.load()
    this.#filter ??= withHandle(this.path, (fh) => readFilter(fh, this.#metaHandle, this.size))
    this.#filterRead = (await this.#filter) ?? null
    return this.#filterRead
  }

  #mayContain(f: Filter | null, i: number, hash: number): boolean {
    const entry = this.#index[i]
    if (f === null || entry === undefined) return true
    const index = Math.floor(entry.handle.offset / 2 ** f.baseLg)
    if (index >= f.count) return true
    const start = f.view.getUint32(f.offsets + index * 4, true)
    const limit = f.view.getUint32(f.offsets + index * 4 + 4, true)
    if (start <= limit && limit <= f.offsets) return bloomMayMatch(hash, f.data, start, limit)
    return start !== limit
  }

  /** True once `load()` has read the index. */
  get loaded(): boolean {
    return this.#indexRead
  }

  /** How many data blocks the index lists (after `load()`). */
  get blocks(): number {
    return this.#index.length
  }

  /** A key at or past the table's last key (from its index, after `load()`). */
  get largest(): string {
    return this.#index.at(-1)?.last ?? ''
  }

  /** The index of the first block that may hold `key` or later keys (after `load()`). */
  seekBlock(key: string): number {
    let lo = 0
    let hi = this.#index.length
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if ((this.#index[mid] as IndexEntry).last < key) lo = mid + 1
      else hi = mid
    }
    return lo
  }

  /** The entries of data block `i` (after `load()`); throws TableDamage when it is damaged. */
  async block(i: number): Promise<Entry[]> {
    const h = (this.#index[i] as IndexEntry).handle
    const raw = await this.#raw(h, i === this.#lastBlock + 1)
    this.#lastBlock = i
    try {
      return decodeEntries(blockEntries(blockContents(raw, h.size)))
    } catch (why) {
      throw this.#damage(i, why)
    }
  }

  /**
   * Data block `i`'s contents, checked (CRC-32C) and decompressed, for a point read (`seekEntry`); after `load()`.
   * Read on its own, not as part of a scan: the read-ahead of a scan of this table is left as it is.
   */
  async contents(i: number): Promise<Uint8Array> {
    const h = (this.#index[i] as IndexEntry).handle
    const raw = await this.#raw(h, false)
    try {
      return blockContents(raw, h.size)
    } catch (why) {
      throw this.#damage(i, why)
    }
  }

  /**
   * The first entry at or after `key` in data block `i`, its value a copy: the block is read, decompressed into
   * a buffer kept for the next read and searched with no wait between, so nothing else reuses that buffer
   * meanwhile. For sync point reads (an export: a block per body, nowhere near the last), where keeping each
   * block allocated 4 KiB per body for the collector to find.
   */
  async seek(i: number, key: Uint8Array): Promise<Entry | undefined> {
    const h = (this.#index[i] as IndexEntry).handle
    const raw = await this.#raw(h, false)
    try {
      const e = seekEntry(blockContents(raw, h.size, true), key)
      return e && { ...e, value: e.value.slice() }
    } catch (why) {
      throw this.#damage(i, why)
    }
  }

  #damage(i: number, why: unknown): TableDamage {
    const h = (this.#index[i] as IndexEntry).handle
    return new TableDamage(
      this.name,
      `data block ${i + 1} of ${this.#index.length} (bytes ${h.offset}-${h.offset + h.size + TRAILER}) is damaged (${String(why)})`,
    )
  }

  /** A block's bytes and trailer: from the read-ahead window, or read (with read-ahead when reading in order). */
  async #raw(h: Handle, sequential: boolean): Promise<Uint8Array> {
    const w = this.#window
    const end = h.offset + h.size + TRAILER
    if (w && h.offset >= w.offset && end <= w.offset + w.bytes.byteLength) return w.bytes.subarray(h.offset - w.offset, end - w.offset)
    if (!sequential) return withHandle(this.path, (fh) => readAt(fh, h.offset, h.size + TRAILER, pointReadsSync))
    const length = Math.max(h.size + TRAILER, Math.min(READ_AHEAD, this.size - h.offset))
    const bytes = await withHandle(this.path, (fh) => readAt(fh, h.offset, length))
    this.#window = { offset: h.offset, bytes }
    return bytes.subarray(0, h.size + TRAILER)
  }

  /** Releases the file's handle (it is reopened if the table is read again). */
  async close(): Promise<void> {
    this.#window = undefined
    await closeHandle(this.path)
  }
}

/** The table's bloom filter, or undefined when it has none or it cannot be read (then every block may match). */
async function readFilter(fh: FileHandle, meta: Handle, size: number): Promise<Filter | undefined> {
  try {
    if (meta.offset + meta.size + TRAILER > size) return undefined
    const entries = blockEntries(blockContents(await readAt(fh, meta.offset, meta.size + TRAILER), meta.size))
    const found = entries.find(([k]) => Buffer.from(k).toString('latin1') === FILTER_KEY)
    const h = found && handleAt(found[1], 0)?.[0]
    if (!h || h.offset + h.size + TRAILER > size) return undefined
    const data = blockContents(await readAt(fh, h.offset, h.size + TRAILER), h.size)
    if (data.byteLength < 5) return undefined
    const offsets = new DataView(data.buffer, data.byteOffset, data.byteLength).getUint32(data.byteLength - 5, true)
    if (offsets > data.byteLength - 5) return undefined
    return {
      data,
      view: new DataView(data.buffer, data.byteOffset, data.byteLength),
      offsets,
      count: (data.byteLength - 5 - offsets) / 4,
      baseLg: data[data.byteLength - 1] as number,
    }
  } catch {
    return undefined
  }
}

/**
 * Open file handles, shared and bounded (a big store has more tables than a process may open files), least
 * recently used first; a handle in use is never closed under its reader.
 */
const handles = new Map<string, { fh: Promise<FileHandle>; users: number }>()
const MAX_HANDLES = 128

async function withHandle<T>(path: string, fn: (fh: FileHandle) => Promise<T>): Promise<T> {
  let h = handles.get(path)
  if (h) handles.delete(path)
  else {
    h = { fh: open(path, 'r'), users: 0 }
    // A failed open is not kept.
    h.fh.catch(() => handles.get(path) === h && handles.delete(path))
  }
  handles.set(path, h)
  h.users++
  try {
    return await fn(await h.fh)
  } finally {
    h.users--
    for (const [p, other] of handles) {
      if (handles.size <= MAX_HANDLES) break
      if (other.users > 0) continue
      handles.delete(p)
      void other.fh.then((fh) => fh.close()).catch(() => {})
    }
  }
}

async function closeHandle(path: string): Promise<void> {
  const h = handles.get(path)
  if (!h || h.users > 0) return
  handles.delete(path)
  await h.fh.then((fh) => fh.close()).catch(() => {})
}

function decodeEntries(raw: Array<[Uint8Array, Uint8Array]>): Entry[] {
  const out: Entry[] = []
  for (const [k, v] of raw) {
    const ik = parseInternalKey(k)
    if (!ik) throw 'bad internal key'
    out.push({ ...ik, value: v })
  }
  return out
}

let pointReadsSync = false

/** True after useSyncPointReads: a point read then also decompresses into one buffer and copies the value out (TableFile.seek). */
export function syncPointReads(): boolean {
  return pointReadsSync
}

/**
 * From now on, this process reads the single blocks of point reads (a body by its digest) synchronously. An
 * export reads one such block per body, and the asynchronous read's round trip through libuv's pool cost
 * more than the read (a copy of ~4 KB from the page cache): 12 of the 106 s of a profiled million-exchange
 * export; 129/127 s became 107/93 s. Each such block is also decompressed into one reused buffer and the
 * value copied out (TableFile.seek), rather than 4 KiB per body left for the collector. For a process that
 * runs one streaming command (tr-proxy export), as cli/heap-growth.ts's setting; a server must not, since a
 * read from a cold disk then holds its event loop.
 */
export function useSyncPointReads(): void {
  pointReadsSync = true
}

async function readAt(fh: FileHandle, offset: number, length: number, sync = false): Promise<Uint8Array> {
  const buf = Buffer.allocUnsafe(length)
  let got = 0
  while (got < length) {
    const bytesRead = sync ? readSync(fh.fd, buf, got, length - got, offset + got) : (await fh.read(buf, got, length - got, offset + got)).bytesRead
    if (bytesRead === 0) break
    got += bytesRead
  }
  return new Uint8Array(buf.buffer, buf.byteOffset, got)
}

/**
 * The data blocks of a table whose footer or index is gone (a table cut short, overwritten at its end): blocks
 * are found from the start of the file by their trailers (a CRC-32C that matches the bytes before it), so
 * every whole block before the damage is read. Stops at the first place no block can be found.
 */
export function scanBlocks(bytes: Uint8Array, maxBlock = 4 * 1024 * 1024): { entries: Entry[]; end: number } {
  const entries: Entry[] = []
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const found: Handle[] = []
  let start = 0
  for (;;) {
    let end = -1
    let crc = 0xffffffff
    const limit = Math.min(bytes.byteLength - TRAILER, start + maxBlock)
    // The trailer's type byte is at p and the CRC (covering bytes start..p) right after it.
    for (let p = start; p <= limit; p++) {
      crc = crc32cStep(crc, bytes[p] as number)
      const type = bytes[p]
      if ((type === 0 || type === 1) && p > start && (crc ^ 0xffffffff) >>> 0 === unmaskCrc(view.getUint32(p + 1, true))) {
        try {
          const raw = blockEntries(blockContents(bytes.subarray(start, p + TRAILER), p - start))
          // The index block comes after the data blocks: its values are the handles of blocks already read.
          const first = raw[0] && handleAt(raw[0][1], 0)?.[0]
          if (first && found.some((h) => h.offset === first.offset && h.size === first.size)) return { entries, end: start }
          entries.push(...decodeEntries(raw))
          found.push({ offset: start, size: p - start })
          end = p
          break
        } catch {
          // A chance CRC match, or the index/metaindex (values are handles, not internal keys): keep looking.
        }
      }
    }
    if (end === -1) return { entries, end: start }
    start = end + TRAILER
  }
}
