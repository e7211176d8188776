/**
 * A LevelDB table's blocks, read ourselves (see leveldb-table.ts for the file around them): the trailer's CRC and
 * compression (snappy, through snappyjs), and the prefix-compressed entries with their restart array, decoded
 * whole (`blockEntries`) or searched for one key (`seekEntry`, a point read).
 */
import { createRequire } from 'node:module'
import { crc32c, type Entry, parseInternalKey, unmaskCrc, varintAt, varintEnd } from './leveldb-format.ts'

/** Bytes after every block: its compression type and the masked CRC-32C of the contents and that byte. */
export const TRAILER = 5
/** A block's restart array: how many restarts, and where the entries end. Throws a string saying why. */
function restartArray(block: Uint8Array): { view: DataView; restarts: number; limit: number } {
  if (block.byteLength < 4) throw 'block too short'
  const view = new DataView(block.buffer, block.byteOffset, block.byteLength)
  const restarts = view.getUint32(block.byteLength - 4, true)
  const limit = block.byteLength - 4 - 4 * restarts
  if (restarts === 0 || limit < 0) throw 'bad restart array'
  return { view, restarts, limit }
}

/** The header entryHeader read last: key bytes shared with the entry before, key bytes of its own, value length, where its own key bytes start. */
const header = { shared: 0, nonShared: 0, valueLength: 0, start: 0 }

/** Reads the header of the entry at `p` into `header` (no object per entry); throws a string when it is cut short or runs past `limit`. */
function entryHeader(block: Uint8Array, p: number, limit: number): typeof header {
  const shared = varintAt(block, p, limit)
  const nonShared = shared < 0 ? -1 : varintAt(block, varintEnd, limit)
  const valueLength = nonShared < 0 ? -1 : varintAt(block, varintEnd, limit)
  if (valueLength < 0) throw 'bad entry header'
  if (varintEnd + nonShared + valueLength > limit) throw 'bad entry length'
  header.shared = shared
  header.nonShared = nonShared
  header.valueLength = valueLength
  header.start = varintEnd
  return header
}

/** The entry at `p`: its key made whole from `prev`'s shared bytes, its value (a view) and where the next begins. */
function entryAt(block: Uint8Array, p: number, limit: number, prev: Uint8Array): { key: Uint8Array; value: Uint8Array; next: number } {
  const { shared, nonShared, valueLength, start } = entryHeader(block, p, limit)
  if (shared > prev.byteLength) throw 'bad entry length'
  const key = new Uint8Array(shared + nonShared)
  key.set(prev.subarray(0, shared))
  key.set(block.subarray(start, start + nonShared), shared)
  const next = start + nonShared + valueLength
  return { key, value: block.subarray(start + nonShared, next), next }
}

/** The entries of a block, in order; throws a string saying why when the block does not parse. */
export function blockEntries(block: Uint8Array): Array<[key: Uint8Array, value: Uint8Array]> {
  const { limit } = restartArray(block)
  const out: Array<[Uint8Array, Uint8Array]> = []
  let prev: Uint8Array = new Uint8Array(0)
  for (let p = 0; p < limit; ) {
    const e = entryAt(block, p, limit, prev)
    out.push([e.key, e.value])
    prev = e.key
    p = e.next
  }
  return out
}

/**
 * The first entry of a block whose user key is >= `key` (latin1 bytes), or undefined when every entry is below
 * it: a point read, as LevelDB's Get seeks. The restart array is binary-searched for the last restart whose key
 * is below `key`, and only the entries from there on are decoded (at most one restart interval, 16 entries by
 * default), where `blockEntries` decodes the whole block. Each entry's key is rebuilt in one scratch buffer and
 * compared there (an export makes a point read per body: no allocation per entry). Throws a string saying why
 * when the block does not parse.
 */
export function seekEntry(block: Uint8Array, key: Uint8Array): Entry | undefined {
  const { view, restarts, limit } = restartArray(block)
  // A restart's entry shares nothing with the one before: its key is whole in the block.
  let lo = 0
  let hi = restarts - 1
  while (lo < hi) {
    const mid = (lo + hi + 1) >>> 1
    const { shared, nonShared, start } = entryHeader(block, view.getUint32(limit + 4 * mid, true), limit)
    if (shared !== 0 || nonShared < 8) throw 'bad restart entry'
    if (compareBytes(block, start, start + nonShared - 8, key) < 0) lo = mid
    else hi = mid - 1
  }
  let length = 0
  for (let p = view.getUint32(limit + 4 * lo, true); p < limit; ) {
    const { shared, nonShared, valueLength, start } = entryHeader(block, p, limit)
    if (shared > length) throw 'bad entry length'
    length = shared + nonShared
    if (scratch.byteLength < length) scratch = growScratch(scratch, length)
    scratch.set(block.subarray(start, start + nonShared), shared)
    if (length < 8) throw 'bad internal key'
    p = start + nonShared + valueLength
    if (compareBytes(scratch, 0, length - 8, key) >= 0) {
      const ik = parseInternalKey(scratch.subarray(0, length))
      if (!ik) throw 'bad internal key'
      return { ...ik, value: block.subarray(start + nonShared, p) }
    }
  }
  return undefined
}

/** The key seekEntry is rebuilding (keys share prefixes with the entry before them). */
let scratch: Uint8Array = new Uint8Array(256)

function growScratch(old: Uint8Array, length: number): Uint8Array {
  const grown = new Uint8Array(Math.max(length, old.byteLength * 2))
  grown.set(old)
  return grown
}

/** Bytes `a[start, end)` against `b`, as LevelDB's bytewise comparator orders them. */
function compareBytes(a: Uint8Array, start: number, end: number, b: Uint8Array): number {
  const n = Math.min(end - start, b.byteLength)
  for (let i = 0; i < n; i++) {
    const d = (a[start + i] as number) - (b[i] as number)
    if (d !== 0) return d
  }
  return end - start - b.byteLength
}

/**
 * Checks a block's trailer and returns its contents, decompressed; throws a string saying why. With `reuse`,
 * a compressed block is decompressed into one buffer kept for the next call (valid until then).
 */
export function blockContents(raw: Uint8Array, size: number, reuse = false): Uint8Array {
  if (raw.byteLength < size + TRAILER) throw 'block cut short'
  const view = new DataView(raw.buffer, raw.byteOffset, raw.byteLength)
  if (crc32c(raw, 0, size + 1) !== unmaskCrc(view.getUint32(size + 1, true))) throw 'block checksum mismatch'
  const type = raw[size]
  const data = raw.subarray(0, size)
  if (type === 0) return data
  if (type === 1) {
    try {
      return reuse ? uncompressReused(data) : snappy().uncompress(data)
    } catch {
      throw 'compressed block does not decompress'
    }
  }
  throw `unknown block compression ${type}`
}

/** The buffer uncompressReused writes into. */
let contentsScratch = new Uint8Array(64 * 1024)

/** snappyjs's decompressor writing into contentsScratch, so a point read allocates no block. */
function uncompressReused(data: Uint8Array): Uint8Array {
  const d = new (snappyDecompressor())(data)
  const length = d.readUncompressedLength()
  if (length < 0) throw new Error('bad length')
  if (contentsScratch.byteLength < length) contentsScratch = new Uint8Array(Math.max(length, contentsScratch.byteLength * 2))
  const out = contentsScratch.subarray(0, length)
  if (!d.uncompressToBuffer(out)) throw new Error('bad stream')
  return out
}

type Decompressor = new (data: Uint8Array) => { readUncompressedLength(): number; uncompressToBuffer(out: Uint8Array): boolean }
let decompressorClass: Decompressor | undefined
/** snappyjs's decompressor class (the module behind its `uncompress`), loaded at first use. */
function snappyDecompressor(): Decompressor {
  decompressorClass ??= (createRequire(import.meta.url)('snappyjs/snappy_decompressor') as { SnappyDecompressor: Decompressor }).SnappyDecompressor
  return decompressorClass
}

/** snappyjs, loaded the first time a compressed block is read (fsck and read-only commands, not every import). */
let snappyModule: { uncompress(data: Uint8Array): Uint8Array } | undefined
function snappy(): { uncompress(data: Uint8Array): Uint8Array } {
  snappyModule ??= createRequire(import.meta.url)('snappyjs') as { uncompress(data: Uint8Array): Uint8Array }
  return snappyModule
}
