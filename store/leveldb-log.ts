/**
 * A read-only check of LevelDB's write-ahead log files, run before LevelDB opens a store. LevelDB's own
 * recovery (without paranoid checks, which `level` does not expose) skips a damaged log record and then
 * rewrites the log: the exchanges in it vanish without a word. Checking every record's CRC first lets a
 * damaged store be refused, with its files left as they are.
 *
 * @note Log format (leveldb/doc/log_format.md): 32 KiB blocks of records `crc32c (4, masked) | length (2) |
 * type (1) | data`; the CRC covers type and data. A block tail under 7 bytes is zero padding. A record cut
 * short or torn at the end of the file is the normal trace of a crash mid-write (or of a write still in
 * progress in the owning process), not damage: only a bad record followed by good ones is reported.
 */
import { readFile } from 'node:fs/promises'

const BLOCK = 32 * 1024
const HEADER = 7
const MAX_TYPE = 4

const CRC32C_TABLE = (() => {
  const table = new Uint32Array(256)
  for (let n = 0; n < 256; n++) {
    let c = n
    for (let k = 0; k < 8; k++) c = c & 1 ? 0x82f63b78 ^ (c >>> 1) : c >>> 1
    table[n] = c >>> 0
  }
  return table
})()

/** CRC-32C (Castagnoli), as LevelDB uses. */
export function crc32c(bytes: Uint8Array, start = 0, end = bytes.byteLength): number {
  let crc = 0xffffffff
  for (let i = start; i < end; i++) crc = (CRC32C_TABLE[(crc ^ (bytes[i] as number)) & 0xff] as number) ^ (crc >>> 8)
  return (crc ^ 0xffffffff) >>> 0
}

/** LevelDB stores CRCs masked, so a CRC of data that holds CRCs is not itself trivial. */
function unmask(masked: number): number {
  const rot = (masked - 0xa282ead8) >>> 0
  return ((rot >>> 17) | (rot << 15)) >>> 0
}

/** A damaged record: where it is and why. */
export interface LogDamage {
  offset: number
  why: string
}

/** Checks one log file's records; returns the damaged ones (empty when the log is intact). */
export async function checkLogFile(path: string): Promise<LogDamage[]> {
  const bytes = new Uint8Array(await readFile(path))
  return checkLog(bytes)
}

/** Checks log bytes; pure, for tests. */
export function checkLog(bytes: Uint8Array): LogDamage[] {
  const damage: LogDamage[] = []
  let lastGood = -1
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  let offset = 0
  while (offset < bytes.byteLength) {
    const blockEnd = Math.min(bytes.byteLength, (Math.floor(offset / BLOCK) + 1) * BLOCK)
    if (blockEnd - offset < HEADER) {
      offset = blockEnd // trailer padding
      continue
    }
    const length = view.getUint16(offset + 4, true)
    const type = bytes[offset + 6] as number
    if (type === 0 && length === 0) {
      // Zero type and length: preallocated space, never written. Only zeros may follow in this block.
      offset = blockEnd
      continue
    }
    const end = offset + HEADER + length
    // Records never cross a block boundary (long data is split into fragments), so this is damage.
    const blockLimit = (Math.floor(offset / BLOCK) + 1) * BLOCK
    if (end > blockLimit || type > MAX_TYPE || type === 0) {
      damage.push({ offset, why: end > blockLimit ? 'a record runs past its block' : `unknown record type ${type}` })
      offset = blockEnd
      continue
    }
    if (end > bytes.byteLength) break // cut short by a crash: LevelDB drops it, as it should
    const expected = unmask(view.getUint32(offset, true))
    if (crc32c(bytes, offset + 6, end) !== expected) damage.push({ offset, why: 'checksum mismatch' })
    else lastGood = offset
    offset = end
  }
  return damage.filter((d) => d.offset < lastGood)
}
