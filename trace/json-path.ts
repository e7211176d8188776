import { ErrorCodes, ToolReplayError } from './errors.ts'
import { cloneJson, isExactNumber, isJsonNumber, jsonEqual } from './json-codec.ts'

/**
 * A small JSONPath subset: `$`, `.name`, `['name']`, `[3]`, `[*]`, `.*`.
 * Used for identity (ignored body paths), redaction, fork patches and diffs.
 * Filters and recursive descent are left out on purpose: a patch must select exactly one place.
 */
export type PathSegment = string | number | '*'
const WILDCARD = Symbol('wildcard')
type Segment = string | number | typeof WILDCARD

/** Parses a JSONPath; throws TR_INVALID_OPTION naming the path and the position that failed. */
export function parseJsonPath(path: string): PathSegment[] {
  return parseSegments(path).map((s) => (s === WILDCARD ? '*' : s))
}

function parseSegments(path: string): Segment[] {
  const fail = (why: string): never => {
    throw new ToolReplayError(
      ErrorCodes.INVALID_OPTION,
      `Invalid JSON path "${path}": ${why}. Use forms like $.a.b, $.items[0].id, $.messages[*].id or $['odd key'].`,
    )
  }
  if (!path.startsWith('$')) fail('it must start with "$"')
  const out: Segment[] = []
  let i = 1
  while (i < path.length) {
    const ch = path[i]
    if (ch === '.') {
      i++
      if (path[i] === '*') {
        out.push(WILDCARD)
        i++
        continue
      }
      const m = /^[A-Za-z_$][\w$-]*/.exec(path.slice(i))
      if (!m) fail(`expected a name at position ${i}`)
      out.push((m as RegExpExecArray)[0])
      i += (m as RegExpExecArray)[0].length
    } else if (ch === '[') {
      const rest = path.slice(i)
      let m: RegExpExecArray | null
      if ((m = /^\[(\d+)\]/.exec(rest))) out.push(Number(m[1]))
      else if ((m = /^\[\*\]/.exec(rest))) out.push(WILDCARD)
      else if ((m = /^\['((?:[^'\\]|\\.)*)'\]/.exec(rest))) out.push((m[1] as string).replace(/\\(.)/g, '$1'))
      else if ((m = /^\["((?:[^"\\]|\\.)*)"\]/.exec(rest))) out.push((m[1] as string).replace(/\\(.)/g, '$1'))
      else fail(`unreadable bracket at position ${i}`)
      i += (m as RegExpExecArray)[0].length
    } else {
      fail(`unexpected "${ch}" at position ${i}`)
    }
  }
  return out
}

/** Formats segments back to a path: `$.a[0]['odd key']`. */
export function formatJsonPath(segments: ReadonlyArray<PathSegment>): string {
  let out = '$'
  for (const s of segments) {
    if (typeof s === 'number') out += `[${s}]`
    else if (s === '*') out += '[*]'
    else if (/^[A-Za-z_$][\w$-]*$/.test(s)) out += `.${s}`
    else out += `['${s.replace(/['\\]/g, '\\$&')}']`
  }
  return out
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v) && !isExactNumber(v)

/** Every concrete path (and value) a possibly-wildcarded path selects in `value`. */
export function selectJsonPath(value: unknown, path: string | ReadonlyArray<PathSegment>): Array<{ path: PathSegment[]; value: unknown }> {
  const segs = typeof path === 'string' ? parseJsonPath(path) : path
  let current: Array<{ path: PathSegment[]; value: unknown }> = [{ path: [], value }]
  for (const seg of segs) {
    const next: Array<{ path: PathSegment[]; value: unknown }> = []
    for (const { path: p, value: v } of current) {
      if (seg === '*') {
        if (Array.isArray(v)) for (let i = 0; i < v.length; i++) next.push({ path: [...p, i], value: v[i] })
        else if (isObject(v)) for (const k of Object.keys(v)) next.push({ path: [...p, k], value: v[k] })
      } else if (typeof seg === 'number') {
        if (Array.isArray(v) && seg < v.length) next.push({ path: [...p, seg], value: v[seg] })
      } else if (isObject(v) && Object.hasOwn(v, seg)) {
        next.push({ path: [...p, seg], value: v[seg] })
      }
    }
    current = next
  }
  return current
}

/**
 * True when a concrete place (`path`, as readJsonText reports it) is one that `pattern` selects: same length,
 * each segment equal or a wildcard. Array indexes match number segments only, object keys string segments only.
 */
export function jsonPathMatches(pattern: ReadonlyArray<PathSegment>, path: ReadonlyArray<string | number>): boolean {
  if (pattern.length !== path.length) return false
  for (let i = 0; i < pattern.length; i++) {
    const want = pattern[i]
    if (want !== '*' && want !== path[i]) return false
  }
  return true
}

/** Returns a copy of `value` with every place the path selects removed (or replaced by `replacement`). */
export function replaceAtJsonPath(value: unknown, path: string | ReadonlyArray<PathSegment>, replacement?: { value: unknown }): unknown {
  const segs = typeof path === 'string' ? parseJsonPath(path) : path
  if (segs.length === 0) return replacement ? replacement.value : undefined
  const copy = cloneJson(value)
  const hits = selectJsonPath(copy, segs)
  for (const hit of hits) {
    const parent = getAt(copy, hit.path.slice(0, -1))
    const last = hit.path.at(-1) as string | number
    if (replacement) (parent as Record<string | number, unknown>)[last] = cloneJson(replacement.value)
    else if (Array.isArray(parent))
      parent[last as number] = null // keep indexes stable for later hits
    else delete (parent as Record<string, unknown>)[last as string]
  }
  return copy
}

/**
 * Sets one concrete path (no wildcards), creating the last key of an existing object.
 * Throws TR_INVALID_PATCH when the parent does not exist.
 */
export function setAtJsonPath(value: unknown, path: string, newValue: unknown): unknown {
  const segs = parseJsonPath(path)
  if (segs.includes('*')) throw new ToolReplayError(ErrorCodes.INVALID_PATCH, `JSON path "${path}" has a wildcard; a patch must name exactly one place.`)
  if (segs.length === 0) return cloneJson(newValue)
  const copy = cloneJson(value)
  const parentPath = segs.slice(0, -1)
  const found = selectJsonPath(copy, parentPath)
  const parent = found[0]?.value
  const last = segs.at(-1) as string | number
  if (found.length !== 1 || !(isObject(parent) || (Array.isArray(parent) && typeof last === 'number' && last <= parent.length))) {
    throw new ToolReplayError(
      ErrorCodes.INVALID_PATCH,
      `JSON path "${path}" does not exist in the body: "${formatJsonPath(parentPath)}" is not an object or array there. Check the path against \`tr-proxy show\`.`,
    )
  }
  ;(parent as Record<string | number, unknown>)[last] = cloneJson(newValue)
  return copy
}

function getAt(value: unknown, segs: ReadonlyArray<PathSegment>): unknown {
  let v = value
  for (const s of segs) v = (v as Record<string | number, unknown>)[s as string | number]
  return v
}

/** One place where two JSON values differ. */
export interface JsonDifference {
  path: string
  kind: 'changed' | 'added' | 'removed' | 'type'
  before?: unknown
  after?: unknown
}

/** Structural differences between two JSON values, in document order; stops after `limit`. */
export function diffJson(a: unknown, b: unknown, limit = 50): JsonDifference[] {
  const out: JsonDifference[] = []
  const walk = (x: unknown, y: unknown, path: PathSegment[]) => {
    if (out.length >= limit) return
    if (Object.is(x, y) || (isJsonNumber(x) && isJsonNumber(y) && jsonEqual(x, y))) return
    if (Array.isArray(x) && Array.isArray(y)) {
      const n = Math.max(x.length, y.length)
      for (let i = 0; i < n; i++) {
        if (i >= x.length) out.push({ path: formatJsonPath([...path, i]), kind: 'added', after: y[i] })
        else if (i >= y.length) out.push({ path: formatJsonPath([...path, i]), kind: 'removed', before: x[i] })
        else walk(x[i], y[i], [...path, i])
        if (out.length >= limit) return
      }
      return
    }
    if (isObject(x) && isObject(y)) {
      const keys = [...new Set([...Object.keys(x), ...Object.keys(y)])]
      for (const k of keys) {
        if (!Object.hasOwn(y, k)) out.push({ path: formatJsonPath([...path, k]), kind: 'removed', before: x[k] })
        else if (!Object.hasOwn(x, k)) out.push({ path: formatJsonPath([...path, k]), kind: 'added', after: y[k] })
        else walk(x[k], y[k], [...path, k])
        if (out.length >= limit) return
      }
      return
    }
    const kind = typeOf(x) === typeOf(y) ? 'changed' : 'type'
    out.push({ path: formatJsonPath(path), kind, before: x, after: y })
  }
  walk(a, b, [])
  return out
}

function typeOf(v: unknown): string {
  return v === null ? 'null' : Array.isArray(v) ? 'array' : isJsonNumber(v) ? 'number' : typeof v
}
