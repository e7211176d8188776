/**
 * Reading a LevelDB MANIFEST ourselves: which table files are live at which level, which logs still hold
 * writes not yet in a table, and the last sequence number the store had given out.
 *
 * @note A MANIFEST is a log-format file of version edits (db/version_edit.cc), each a list of tagged fields:
 * 1 comparator name, 2 log number, 3 next file number, 4 last sequence, 5 compact pointer (level, key),
 * 6 deleted file (level, number), 7 new file (level, number, size, smallest key, largest key), 9 previous
 * log number. The live files are every new file not deleted later.
 */

import { latin1, parseInternalKey, varint } from './leveldb-format.ts'
import { type LogContents, readLog } from './leveldb-log.ts'

/** A live table file as the MANIFEST lists it. */
export interface LiveTable {
  level: number
  number: number
  size: number
  /** Smallest and largest user keys (latin1). */
  smallest: string
  largest: string
}

/** The state a MANIFEST describes. */
export interface Manifest {
  comparator?: string
  logNumber: number
  prevLogNumber: number
  nextFile: number
  lastSequence: number
  tables: LiveTable[]
  /** The log-format reading of the file (damage, a torn tail). */
  log: LogContents
  /** Edits that did not parse. */
  badEdits: number
}

/** Applies the edits of a MANIFEST's bytes. */
export function readManifest(bytes: Uint8Array): Manifest {
  const log = readLog(bytes)
  const m: Manifest = { logNumber: 0, prevLogNumber: 0, nextFile: 0, lastSequence: 0, tables: [], log, badEdits: 0 }
  const live = new Map<string, LiveTable>()
  for (const record of log.records) {
    if (!applyEdit(record.data, m, live)) m.badEdits++
  }
  m.tables = [...live.values()].sort((a, b) => a.level - b.level || a.number - b.number)
  return m
}

function applyEdit(data: Uint8Array, m: Manifest, live: Map<string, LiveTable>): boolean {
  let p = 0
  const num = () => {
    const v = varint(data, p)
    if (!v) throw new Error('bad varint')
    p = v[1]
    return v[0]
  }
  const slice = () => {
    const n = num()
    if (p + n > data.byteLength) throw new Error('bad length')
    const s = data.subarray(p, p + n)
    p += n
    return s
  }
  try {
    while (p < data.byteLength) {
      const tag = num()
      if (tag === 1) m.comparator = latin1(slice())
      else if (tag === 2) m.logNumber = num()
      else if (tag === 3) m.nextFile = num()
      else if (tag === 4) m.lastSequence = num()
      else if (tag === 5) {
        num()
        slice()
      } else if (tag === 6) {
        const level = num()
        live.delete(`${level}:${num()}`)
      } else if (tag === 7) {
        const level = num()
        const number = num()
        const size = num()
        const smallest = parseInternalKey(slice())
        const largest = parseInternalKey(slice())
        if (!smallest || !largest) return false
        live.set(`${level}:${number}`, { level, number, size, smallest: smallest.key, largest: largest.key })
      } else if (tag === 9) m.prevLogNumber = num()
      else return false
    }
    return true
  } catch {
    return false
  }
}
