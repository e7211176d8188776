/**
 * `schema_drift`: the upstream's JSON with fields changed the way APIs drift (a type changes, a field goes
 * missing, an extra one appears, a key is renamed). Applied with the JSON codec's surgical edits, so
 * everything the spec does not touch keeps its bytes.
 */
import {
  editJson,
  exactNumber,
  formatJsonPath,
  isExactNumber,
  isJsonNumber,
  parseJsonPath,
  selectJsonPath,
  stringifyJson,
  tryParseJson,
} from '../trace/index.ts'
import type { DriftChange } from './fault-rules.ts'

/**
 * Applies drift changes to JSON text in order. Returns the new text and what was changed ("renamed
 * $.shipment.id to shipment_id"); `changed` is empty when the body is not JSON or no path matched.
 */
export function driftJson(text: string, changes: ReadonlyArray<DriftChange>): { text: string; changed: string[] } {
  let out = text
  const changed: string[] = []
  for (const change of changes) {
    const parsed = tryParseJson(out)
    if (parsed === undefined) return { text, changed: [] }
    if (change.op === 'add') {
      const segs = parseJsonPath(change.path)
      const parent = selectJsonPath(parsed.value, segs.slice(0, -1))[0]?.value
      const last = segs.at(-1)
      const fits =
        typeof last === 'string' &&
        parent !== null &&
        typeof parent === 'object' &&
        !Array.isArray(parent) &&
        !isExactNumber(parent) &&
        !Object.hasOwn(parent, last)
      if (!fits) continue
      out = editJson(out, [{ path: segs as Array<string | number>, value: change.value }])
      changed.push(`added ${change.path}`)
      continue
    }
    // Later hits first, so removing an array element cannot shift the index of one still to edit.
    for (const hit of selectJsonPath(parsed.value, change.path).reverse()) {
      const path = hit.path as Array<string | number>
      const where = formatJsonPath(hit.path)
      if (change.op === 'remove') {
        out = editJson(out, [{ path, remove: true }])
        changed.push(`removed ${where}`)
      } else if (change.op === 'rename') {
        const parentPath = path.slice(0, -1)
        const parent = selectJsonPath(tryParseJson(out)?.value, parentPath)[0]?.value as Record<string, unknown> | undefined
        if (parent === undefined || Object.hasOwn(parent, change.to)) continue
        out = editJson(out, [
          { path, remove: true },
          { path: [...parentPath, change.to], value: hit.value },
        ])
        changed.push(`renamed ${where} to ${change.to}`)
      } else {
        const value = convert(hit.value, change.to)
        if (value === NO_CHANGE) continue
        out = editJson(out, [{ path, value }])
        changed.push(`changed ${where} to ${change.to}`)
      }
    }
  }
  return { text: out, changed }
}

const NO_CHANGE = Symbol('no change')

/** A value of another JSON type carrying as much of the original as that type can. */
function convert(v: unknown, to: string): unknown {
  const type = v === null ? 'null' : Array.isArray(v) ? 'array' : isJsonNumber(v) ? 'number' : typeof v
  if (type === to) return NO_CHANGE
  switch (to) {
    case 'string':
      return type === 'string' ? v : stringifyJson(v)
    case 'number':
      if (typeof v === 'string' && /^-?\d+(\.\d+)?([eE][+-]?\d+)?$/.test(v.trim())) return Number.isSafeInteger(Number(v)) ? Number(v) : exactNumber(v.trim())
      if (typeof v === 'boolean') return v ? 1 : 0
      return Array.isArray(v) ? v.length : 0
    case 'boolean':
      if (typeof v === 'string') return v === 'true' || (v !== '' && v !== 'false' && v !== '0')
      return isJsonNumber(v) ? Number(isExactNumber(v) ? v.rawJSON : v) !== 0 : v !== null
    case 'null':
      return null
    case 'array':
      return [v]
    default:
      return { value: v }
  }
}
