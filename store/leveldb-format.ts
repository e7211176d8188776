/**
 * The primitives LevelDB's files share, for reading them ourselves (leveldb-log.ts, leveldb-table.ts):
 * CRC-32C as LevelDB masks it, varints, internal keys. Keys are kept as latin1 strings (one character per
 * byte), so comparing them as strings compares their bytes, as LevelDB's bytewise comparator does.
 */

/** One entry of a table or a log: a user key (bytes as a latin1 string, so string order is byte order). */
export interface Entry {
  key: string
  seq: number
  /** false for a deletion. */
  put: boolean
  value: Uint8Array
}

/**
 * CRC-32C tables for slicing by 8 (eight bytes per step): table k (at k * 256) is the CRC of a byte followed by
 * k zero bytes. Byte at a time, the CRC of a 4 KiB block cost about what reading it did; this is some 4x faster.
 */
const CRC32C_TABLES = (() => {
  const t = new Uint32Array(8 * 256)
  for (let n = 0; n < 256; n++) {
    let c = n
    for (let k = 0; k < 8; k++) c = c & 1 ? 0x82f63b78 ^ (c >>> 1) : c >>> 1
    t[n] = c >>> 0
  }
  for (let n = 0; n < 256; n++)
    for (let k = 1; k < 8; k++) t[k * 256 + n] = ((t[(k - 1) * 256 + n] as number) >>> 8) ^ (t[(t[(k - 1) * 256 + n] as number) & 0xff] as number)
  return t
})()
const CRC32C_TABLE = CRC32C_TABLES.subarray(0, 256)

/** CRC-32C (Castagnoli), as LevelDB uses. */
export function crc32c(bytes: Uint8Array, start = 0, end = bytes.byteLength): number {
  const t = CRC32C_TABLES
  let crc = 0xffffffff
  let i = start
  for (; i + 8 <= end; i += 8) {
    const lo = (crc ^ ((bytes[i] as number) | ((bytes[i + 1] as number) << 8) | ((bytes[i + 2] as number) << 16) | ((bytes[i + 3] as number) << 24))) >>> 0
    crc =
      (t[1792 + (lo & 0xff)] as number) ^
      (t[1536 + ((lo >>> 8) & 0xff)] as number) ^
      (t[1280 + ((lo >>> 16) & 0xff)] as number) ^
      (t[1024 + (lo >>> 24)] as number) ^
      (t[768 + (bytes[i + 4] as number)] as number) ^
      (t[512 + (bytes[i + 5] as number)] as number) ^
      (t[256 + (bytes[i + 6] as number)] as number) ^
      (t[bytes[i + 7] as number] as number)
  }
  for (; i < end; i++) crc = (t[(crc ^ (bytes[i] as number)) & 0xff] as number) ^ (crc >>> 8)
  return (crc ^ 0xffffffff) >>> 0
}

/** One byte more of a running CRC-32C (start with 0xffffffff, finish with `^ 0xffffffff`). */
export function crc32cStep(crc: number, byte: number): number {
  return ((CRC32C_TABLE[(crc ^ byte) & 0xff] as number) ^ (crc >>> 8)) >>> 0
}

/** LevelDB stores CRCs masked, so a CRC of data that holds CRCs is not itself trivial. */
export function unmaskCrc(masked: number): number {
  const rot = (masked - 0xa282ead8) >>> 0
  return ((rot >>> 17) | (rot << 15)) >>> 0
}

/** Reads a varint32/64 at `p`; returns [value, next offset] or undefined when it runs past `end`. */
export function varint(bytes: Uint8Array, p: number, end = bytes.byteLength): [number, number] | undefined {
  const value = varintAt(bytes, p, end)
  return value < 0 ? undefined : [value, varintEnd]
}

/** Where the varint varintAt read last ended. */
export let varintEnd = 0

/** The varint at `p`, -1 when it runs past `end`; sets varintEnd past it. `varint` without an array per call (a block's entries). */
export function varintAt(bytes: Uint8Array, p: number, end = bytes.byteLength): number {
  let result = 0
  let mul = 1
  for (let i = 0; i < 10 && p < end; i++) {
    const b = bytes[p++] as number
    result += (b & 0x7f) * mul
    if ((b & 0x80) === 0) {
      varintEnd = p
      return result
    }
    mul *= 128
  }
  return -1
}

/** Splits an internal key (user key + 8-byte tag). */
export function parseInternalKey(bytes: Uint8Array): { key: string; seq: number; put: boolean } | undefined {
  if (bytes.byteLength < 8) return undefined
  const n = bytes.byteLength - 8
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const lo = view.getUint32(n, true)
  const hi = view.getUint32(n + 4, true)
  const type = lo & 0xff
  if (type > 1) return undefined
  return { key: latin1(bytes, 0, n), seq: hi * 2 ** 24 + (lo >>> 8), put: type === 1 }
}

/** Bytes as a latin1 string: one character per byte, so comparing strings compares bytes. */
export function latin1(bytes: Uint8Array, start = 0, end = bytes.byteLength): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset + start, end - start).toString('latin1')
}
