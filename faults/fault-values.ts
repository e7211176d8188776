/** The values of a faults file as its reader (faults-file.ts) carries and names them. */
import { exactNumber, isExactNumber } from '../trace/index.ts'

/** Converts YAML's BigInts back to numbers (or exact JSON numbers) in a value the rules carry through. */
export function plain(v: unknown): unknown {
  if (typeof v === 'bigint') return Number.isSafeInteger(Number(v)) ? Number(v) : exactNumber(v.toString())
  if (Array.isArray(v)) return v.map(plain)
  if (v !== null && typeof v === 'object' && !isExactNumber(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)]))
  return v
}

/** A value as a problem names it: "missing", a number as written, "a list [...]", "an object", or its JSON. */
export function describe(v: unknown): string {
  if (v === undefined) return 'missing'
  if (typeof v === 'bigint') return v.toString()
  if (isExactNumber(v)) return v.rawJSON
  if (Array.isArray(v)) return `a list ${JSON.stringify(plain(v)).slice(0, 60)}`
  if (v !== null && typeof v === 'object') return 'an object'
  return JSON.stringify(v)
}

/** Levenshtein distance, for "did you mean" suggestions. */
export function editDistance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    let prev = row[0] as number
    row[0] = i
    for (let j = 1; j <= b.length; j++) {
      const cur = row[j] as number
      row[j] = Math.min(cur + 1, (row[j - 1] as number) + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1))
      prev = cur
    }
  }
  return row[b.length] as number
}
