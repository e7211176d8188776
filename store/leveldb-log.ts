/**
 * Reading LevelDB's log-format files ourselves, read-only: the write-ahead logs (`NNNNNN.log`, whose records
 * are write batches) and the MANIFEST (whose records are version edits). LevelDB's own recovery (without
 * paranoid checks, which `level` does not expose) skips a damaged record, treats a log cut short as a crash,
 * and then rewrites the directory: what was in the lost part vanishes without a word. Reading the records
 * first lets the store refuse a damaged store with its files left as they are, and lets fsck rescue them.
 *
 * @note Log format (leveldb/doc/log_format.md): 32 KiB blocks of physical records `crc32c (4, masked) |
 * length (2) | type (1) | data`; the CRC covers type and data; types FULL 1, FIRST 2, MIDDLE 3, LAST 4 (a
 * logical record longer than a block is split into fragments). A block tail under 7 bytes is zero padding.
 * A write batch is `sequence (8) | count (4)` then `count` records: `1 | varstring key | varstring value` or
 * `0 | varstring key`.
 */
import { readFile } from 'node:fs/promises'
import { crc32c, type Entry, latin1, unmaskCrc, varint } from './leveldb-format.ts'

const BLOCK = 32 * 1024
const HEADER = 7
const FULL = 1
const FIRST = 2
const LAST = 4

/** A damaged record: where it is and why. */
export interface LogDamage {
  offset: number
  why: string
}

/** A whole logical record and where it lies in the file. */
export interface LogRecord {
  offset: number
  end: number
  data: Uint8Array
}

/** What a log file holds. */
export interface LogContents {
  records: LogRecord[]
  /** Damaged records with whole records after them (LevelDB would skip them silently). */
  damage: LogDamage[]
  /** Where the last whole record ends. */
  end: number
  /** Set when the file ends inside a record (a crash mid-write, or a file cut short). */
  torn?: { offset: number; why: string }
}

/** Reads a log file's records. */
export async function readLogFile(path: string): Promise<LogContents> {
  return readLog(new Uint8Array(await readFile(path)))
}

/** Reads log bytes into whole logical records; pure, for tests. */
export function readLog(bytes: Uint8Array): LogContents {
  const records: LogRecord[] = []
  const bad: LogDamage[] = []
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  let parts: Uint8Array[] = []
  let partStart = -1
  let end = 0
  let torn: LogContents['torn']
  const drop = (offset: number, why: string) => {
    bad.push({ offset, why })
    parts = []
    partStart = -1
  }
  let offset = 0
  while (offset < bytes.byteLength) {
    const blockEnd = Math.min(bytes.byteLength, (Math.floor(offset / BLOCK) + 1) * BLOCK)
    const blockLimit = (Math.floor(offset / BLOCK) + 1) * BLOCK
    if (blockLimit - offset < HEADER) {
      offset = blockEnd // trailer padding
      continue
    }
    if (bytes.byteLength - offset < HEADER) {
      torn = { offset, why: 'the file ends inside a record header' }
      break
    }
    const length = view.getUint16(offset + 4, true)
    const type = bytes[offset + 6] as number
    if (type === 0 && length === 0) {
      // Zero type and length: preallocated space, never written. Only zeros may follow in this block.
      offset = blockEnd
      continue
    }
    const recEnd = offset + HEADER + length
    // Records never cross a block boundary (long data is split into fragments), so this is damage.
    if (recEnd > blockLimit || type > LAST || type === 0) {
      drop(offset, recEnd > blockLimit ? 'a record runs past its block' : `unknown record type ${type}`)
      offset = blockEnd
      continue
    }
    if (recEnd > bytes.byteLength) {
      torn = { offset, why: 'the file ends inside a record' }
      break
    }
    if (crc32c(bytes, offset + 6, recEnd) !== unmaskCrc(view.getUint32(offset, true))) {
      drop(offset, 'checksum mismatch')
      offset = recEnd
      continue
    }
    const data = bytes.subarray(offset + HEADER, recEnd)
    if (type === FULL || type === FIRST) {
      if (parts.length > 0) drop(partStart, 'a record was never finished')
      if (type === FULL) {
        records.push({ offset, end: recEnd, data })
        end = recEnd
      } else {
        parts = [data]
        partStart = offset
      }
    } else if (parts.length === 0) {
      drop(offset, 'a record fragment without its start')
    } else {
      parts.push(data)
      if (type === LAST) {
        records.push({ offset: partStart, end: recEnd, data: Buffer.concat(parts) })
        end = recEnd
        parts = []
        partStart = -1
      }
    }
    offset = recEnd
  }
  if (torn === undefined && parts.length > 0) torn = { offset: partStart, why: 'the file ends inside a record' }
  // A damaged record is damage only when whole records follow it; at the very end it is the crash's torn write.
  const damage = bad.filter((d) => d.offset < end)
  const tail = bad.filter((d) => d.offset >= end)
  if (torn === undefined && tail.length > 0) torn = tail[0] as LogDamage
  const out: LogContents = { records, damage, end }
  if (torn) out.torn = torn
  return out
}

/** A write batch: its first sequence number, how many sequence numbers it takes, and its entries. */
export interface WriteBatch {
  seq: number
  count: number
  entries: Entry[]
}

/** A write batch's sequence number and count, read from its header alone. */
export function batchHeader(data: Uint8Array): { seq: number; count: number } | undefined {
  if (data.byteLength < 12) return undefined
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength)
  return { seq: view.getUint32(4, true) * 2 ** 32 + view.getUint32(0, true), count: view.getUint32(8, true) }
}

/** Parses a write batch record; undefined when it does not parse (damage). */
export function parseBatch(data: Uint8Array): WriteBatch | undefined {
  if (data.byteLength < 12) return undefined
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength)
  const seq = view.getUint32(4, true) * 2 ** 32 + view.getUint32(0, true)
  const count = view.getUint32(8, true)
  const entries: Entry[] = []
  let p = 12
  for (let i = 0; i < count; i++) {
    const type = data[p++]
    if (type !== 0 && type !== 1) return undefined
    const k = varint(data, p)
    if (!k || k[1] + k[0] > data.byteLength) return undefined
    const key = latin1(data, k[1], k[1] + k[0])
    p = k[1] + k[0]
    let value: Uint8Array = new Uint8Array(0)
    if (type === 1) {
      const v = varint(data, p)
      if (!v || v[1] + v[0] > data.byteLength) return undefined
      value = data.subarray(v[1], v[1] + v[0])
      p = v[1] + v[0]
    }
    entries.push({ key, seq: seq + i, put: type === 1, value })
  }
  return p === data.byteLength ? { seq, count, entries } : undefined
}
