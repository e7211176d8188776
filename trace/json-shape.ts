/**
 * The shape of JSON values: which JSON types appear where, with every element of an array merged into one
 * `[*]` node and every object key a child. Two shapes are compared for fields added, removed or retyped,
 * never for values, so what varies from run to run (ids, texts, counts, list lengths) is not a difference.
 * Used by `drift` (trace/shape-drift.ts) to tell an API that changed from one that answered differently.
 */
import { isJsonNumber } from './json-codec.ts'
import { formatJsonPath, type PathSegment } from './json-path.ts'

/** The JSON types a shape tells apart (integers and fractions are both numbers). */
export type JsonType = 'null' | 'boolean' | 'number' | 'string' | 'array' | 'object'

/** The shape of every value merged into it: types seen here, object keys, and array elements as one node. */
export interface JsonShape {
  types: Set<JsonType>
  keys: Map<string, JsonShape>
  /** Every element of every array seen here, merged; undefined while no array here had an element. */
  items: JsonShape | undefined
}

/** A shape stops growing at this many nodes (a huge or map-like body), and says so. */
export const MAX_SHAPE_NODES = 20_000
/** Values nested deeper than this are not walked. */
const MAX_DEPTH = 64

/** A difference between two shapes at one path. */
export interface ShapeDifference {
  kind: 'field_added' | 'field_removed' | 'type_changed'
  /** JSON path, `$.items[*].price`. */
  path: string
  /** The types on the recorded side (for removed and retyped fields), e.g. "number". */
  before?: string
  /** The types on the live side (for added and retyped fields). */
  after?: string
}

/** Builds shapes; one builder bounds the nodes of every shape it builds. */
export class ShapeBuilder {
  #nodes = 0
  /** True once a value was cut short at MAX_SHAPE_NODES or the depth limit. */
  truncated = false

  /** A new, empty shape. */
  empty(): JsonShape {
    this.#nodes++
    return { types: new Set(), keys: new Map(), items: undefined }
  }

  /** Merges `value` into `shape` (or a new one) and returns it. */
  add(value: unknown, shape: JsonShape = this.empty(), depth = 0): JsonShape {
    const type = jsonTypeOf(value)
    shape.types.add(type)
    if (depth >= MAX_DEPTH) {
      if (type === 'array' || type === 'object') this.truncated = true
      return shape
    }
    if (type === 'array') {
      for (const item of value as unknown[]) {
        if (!shape.items && !this.#room()) return shape
        shape.items ??= this.empty()
        this.add(item, shape.items, depth + 1)
      }
    } else if (type === 'object') {
      for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
        let child = shape.keys.get(k)
        if (!child) {
          if (!this.#room()) return shape
          child = this.empty()
          shape.keys.set(k, child)
        }
        this.add(v, child, depth + 1)
      }
    }
    return shape
  }

  #room(): boolean {
    if (this.#nodes < MAX_SHAPE_NODES) return true
    this.truncated = true
    return false
  }
}

/** The shape of one value. */
export function jsonShape(value: unknown): JsonShape {
  return new ShapeBuilder().add(value)
}

/** The JSON type of a parsed value (exact numbers count as numbers). */
export function jsonTypeOf(value: unknown): JsonType {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'array'
  if (isJsonNumber(value)) return 'number'
  if (typeof value === 'boolean') return 'boolean'
  if (typeof value === 'string') return 'string'
  return 'object'
}

/**
 * Fields added, removed or retyped from `before` (recorded) to `after` (live), in path order.
 * Rules, so that values that vary between runs are not reported:
 * - `null` matches any type (an optional value that was absent in one run);
 * - a field is reported where its parent is an object on both sides; children of a field that was added,
 *   removed or retyped are not reported again;
 * - array elements are compared only when both sides had at least one (an empty list says nothing of shape).
 */
export function compareShapes(before: JsonShape, after: JsonShape, limit = 200): ShapeDifference[] {
  const out: ShapeDifference[] = []
  const walk = (a: JsonShape, b: JsonShape, path: PathSegment[]): void => {
    if (out.length >= limit) return
    const ta = typesText(a.types)
    const tb = typesText(b.types)
    if (ta !== '' && tb !== '' && ta !== tb) {
      out.push({ kind: 'type_changed', path: formatJsonPath(path), before: ta, after: tb })
      return
    }
    if (a.types.has('object') && b.types.has('object')) {
      for (const [k, ca] of a.keys) {
        const cb = b.keys.get(k)
        if (cb) walk(ca, cb, [...path, k])
        else out.push({ kind: 'field_removed', path: formatJsonPath([...path, k]), before: typesText(ca.types, true) })
        if (out.length >= limit) return
      }
      for (const [k, cb] of b.keys) {
        if (a.keys.has(k)) continue
        out.push({ kind: 'field_added', path: formatJsonPath([...path, k]), after: typesText(cb.types, true) })
        if (out.length >= limit) return
      }
    }
    if (a.items && b.items) walk(a.items, b.items, [...path, '*'])
  }
  walk(before, after, [])
  return out
}

const TYPE_ORDER: readonly JsonType[] = ['object', 'array', 'string', 'number', 'boolean', 'null']

/** "number" or "number|string"; `null` is left out unless asked for (it matches any type). */
function typesText(types: ReadonlySet<JsonType>, withNull = false): string {
  return TYPE_ORDER.filter((t) => types.has(t) && (withNull || t !== 'null')).join('|')
}
