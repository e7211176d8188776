/**
 * The one JSON codec: every place that reads, compares, hashes or rewrites a JSON body goes through here
 * (request identity, diff, SSE events, fork patches, redaction, trace files, the store).
 *
 * Numbers are kept exact. A number whose source text a double would print differently
 * (`12345678901234567890`, `1.50`, `1e3`, `-0`) is parsed as a `JSON.rawJSON` value holding that text, so
 * `stringifyJson` prints it back byte for byte and two big IDs that differ in the last digit never compare
 * equal. Other numbers stay plain numbers. Rewrites are surgical (`editJson`): only the bytes of the
 * edited values change; whitespace, key order and escapes elsewhere are kept. Where the parsed value is not
 * enough — redaction and the secret scan must see every occurrence of a repeated key, comments, text cut
 * short — the text is read token by token by json-text.ts, with the same scanner.
 *
 * @note Uses the native JSON.parse source-text access and JSON.rawJSON (TC39 "JSON.parse source text
 * access", V8 11.4+, Node >= 21), and jsonc-parser (the VS Code JSON scanner) for the offsets of values.
 */
import { findNodeAtLocation, modify, type Node, parseTree } from 'jsonc-parser'

type RawJson = { readonly rawJSON: string }

// Not yet in TypeScript's lib for our target.
const JSONX = JSON as unknown as {
  rawJSON(text: string): RawJson
  isRawJSON(value: unknown): value is RawJson
  parse(text: string, reviver: (this: unknown, key: string, value: unknown, context?: { source?: string }) => unknown): unknown
}

function exactNumbers(this: unknown, _key: string, value: unknown, context?: { source?: string }): unknown {
  if (typeof value !== 'number' || context?.source === undefined) return value
  return context.source === String(value) ? value : JSONX.rawJSON(context.source)
}

/**
 * Number spellings a double may print differently (String(n) !== the text): an exponent, a fraction ending
 * in 0, 16 or more digits and dots in a row (more significant digits than a double keeps), -0, and a fraction
 * below 1e-6. Any other JSON number prints back as written, so text without these parses exactly without the
 * reviver (which costs more than the parse). Matches inside strings only send the text the slow way.
 */
const INEXACT_NUMBER = /\d[eE]|\.\d*0(?!\d)|\d[\d.]{15}|-0(?![.\d])|\.0{6}/

/** Parses JSON text, keeping every number's exact text where a double would change it. Throws SyntaxError. */
export function parseJson(text: string): unknown {
  return INEXACT_NUMBER.test(text) ? JSONX.parse(text, exactNumbers) : JSON.parse(text)
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true })

/** Parses JSON bytes (UTF-8); undefined when they are not UTF-8 or not JSON. */
export function tryParseJson(input: string | Uint8Array): { value: unknown } | undefined {
  let text: string
  if (typeof input === 'string') text = input
  else {
    try {
      text = strictUtf8.decode(input)
    } catch {
      return undefined
    }
  }
  try {
    return { value: parseJson(text) }
  } catch {
    return undefined
  }
}

/** True for a number parsed from text a double could not reproduce (it prints back as that text). */
export function isExactNumber(value: unknown): value is RawJson {
  return JSONX.isRawJSON(value)
}

/** A number kept as its exact JSON text, e.g. exactNumber('12345678901234567890'). */
export function exactNumber(text: string): unknown {
  return JSONX.rawJSON(text)
}

/** True for a JSON number, plain or exact. */
export function isJsonNumber(value: unknown): value is number | RawJson {
  return typeof value === 'number' || JSONX.isRawJSON(value)
}

/** JSON text of a value; exact numbers print as their source text. */
export function stringifyJson(value: unknown, space?: number): string {
  const out = JSON.stringify(value, undefined, space)
  if (out === undefined) throw new TypeError('stringifyJson: value is not representable as JSON')
  return out
}

/**
 * RFC 8785 (JCS) canonical JSON: sorted keys, no whitespace, ECMAScript number formatting; everything
 * that is hashed goes through here so equal values always hash equal. Extension: an integer too large for a
 * double keeps all its digits (RFC 8785 would round it), so big IDs never collide.
 */
export function canonicalJson(value: unknown): string {
  // A value whose objects all hold their keys in sorted order (as the trace-file reader builds exchanges) is
  // one JSON.stringify, which writes exactly this text; anything else is walked, and the walk checks no more.
  return sortedPlain(value) ? JSON.stringify(value) : walkCanonical(value)
}

/**
 * True when JSON.stringify writes `value` canonically: only strings, finite numbers, booleans, null, arrays
 * and plain objects whose keys (undefined members aside, which both leave out) are in ascending order. An
 * object with index-like keys lists them first, in numeric order, so "10" before "9" fails the check; an exact
 * number (its prototype is null) fails it too.
 */
function sortedPlain(value: unknown): boolean {
  if (typeof value === 'string' || typeof value === 'boolean' || value === null) return true
  if (typeof value === 'number') return Number.isFinite(value)
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) if (value[i] !== undefined && !sortedPlain(value[i])) return false
    return true
  }
  if (typeof value !== 'object' || Object.getPrototypeOf(value) !== Object.prototype) return false
  let previous: string | undefined
  for (const k in value) {
    if (previous !== undefined && !(previous < k)) return false
    previous = k
    const v = (value as Record<string, unknown>)[k]
    if (v !== undefined && !sortedPlain(v)) return false
  }
  return true
}

function walkCanonical(value: unknown): string {
  if (value === null || typeof value === 'boolean' || typeof value === 'string') return JSON.stringify(value)
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new TypeError('canonicalJson: non-finite numbers are not JSON')
    return JSON.stringify(value)
  }
  if (JSONX.isRawJSON(value)) return canonicalNumber(value.rawJSON)
  // Loops and appends (every request identity and trace digest comes through here).
  if (Array.isArray(value)) {
    let out = '['
    for (let i = 0; i < value.length; i++) out += (i === 0 ? '' : ',') + (value[i] === undefined ? 'null' : walkCanonical(value[i]))
    return `${out}]`
  }
  if (typeof value === 'object') {
    const o = value as Record<string, unknown>
    let out = '{'
    for (const k of Object.keys(o).sort()) {
      const v = o[k]
      if (v !== undefined) out += `${out.length === 1 ? '' : ','}${JSON.stringify(k)}:${walkCanonical(v)}`
    }
    return `${out}}`
  }
  throw new TypeError(`canonicalJson: a ${typeof value} is not representable as JSON`)
}

/** The canonical text of a number's JSON source: integers exactly, others as ECMAScript prints the double. */
function canonicalNumber(source: string): string {
  if (/^-?\d+$/.test(source)) return BigInt(source).toString()
  return JSON.stringify(Number(source))
}

/** True when two JSON values are equal as JSON (object key order and number spelling aside). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (Object.is(a, b)) return true
  if (isJsonNumber(a) && isJsonNumber(b)) return canonicalJson(a) === canonicalJson(b)
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false
  return canonicalJson(a) === canonicalJson(b)
}

/** A deep copy of a JSON value (exact numbers are immutable and shared). structuredClone cannot copy them. */
export function cloneJson<T>(value: T): T {
  if (value === null || typeof value !== 'object' || JSONX.isRawJSON(value)) return value
  if (Array.isArray(value)) return value.map(cloneJson) as T
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(value)) out[k] = cloneJson(v)
  return out as T
}

/**
 * A copy of a JSON value with object keys sorted at every depth and undefined members dropped: the
 * stable layout of files people review (manifests, trace files); unlike canonicalJson it keeps formatting
 * free for the caller.
 */
export function sortKeysDeep(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeysDeep)
  if (value === null || typeof value !== 'object' || JSONX.isRawJSON(value)) return value
  const out: Record<string, unknown> = {}
  for (const k of Object.keys(value).sort()) {
    const v = (value as Record<string, unknown>)[k]
    if (v !== undefined) out[k] = sortKeysDeep(v)
  }
  return out
}

/** One surgical change: set the value at a concrete path (no wildcards), or remove it (`remove: true`). */
export type JsonEdit = { path: ReadonlyArray<string | number>; value: unknown } | { path: ReadonlyArray<string | number>; remove: true }

/**
 * Applies edits to JSON text in order, changing only the bytes of the values they touch: everything
 * else (whitespace, key order, escapes, the spelling of numbers) stays as it was. A set on a missing key of
 * an existing object adds it; an edit whose parent does not exist throws a TypeError naming the path.
 * @example
 * editJson('{"id":12345678901234567890, "secret":"x"}', [{ path: ['secret'], value: '[REDACTED]' }])
 * // '{"id":12345678901234567890, "secret":"[REDACTED]"}'
 */
export function editJson(text: string, edits: ReadonlyArray<JsonEdit>): string {
  let out = text
  for (const edit of edits) {
    const tree = parseTree(out)
    if (tree === undefined) throw new TypeError('editJson: the text is not JSON')
    const path = [...edit.path]
    const node = path.length === 0 ? tree : findNodeAtLocation(tree, path)
    if ('remove' in edit) {
      if (node === undefined) continue
      out = applyChanges(out, modify(out, path, undefined, {}))
      continue
    }
    const replacement = stringifyJson(edit.value)
    if (node !== undefined) {
      const span = valueSpan(node)
      out = `${out.slice(0, span.offset)}${replacement}${out.slice(span.offset + span.length)}`
      continue
    }
    const parent = path.length === 1 ? tree : findNodeAtLocation(tree, path.slice(0, -1))
    const last = path.at(-1)
    const fits = parent !== undefined && ((parent.type === 'object' && typeof last === 'string') || (parent.type === 'array' && typeof last === 'number'))
    if (!fits) throw new TypeError(`editJson: ${JSON.stringify(path)} has no parent object or array to add to`)
    // jsonc-parser serializes with JSON.stringify, which prints exact numbers as their text.
    out = applyChanges(out, modify(out, path, edit.value, { isArrayInsertion: parent.type === 'array' }))
  }
  return out
}

function valueSpan(node: Node): { offset: number; length: number } {
  return { offset: node.offset, length: node.length }
}

function applyChanges(text: string, changes: ReadonlyArray<{ offset: number; length: number; content: string }>): string {
  let out = text
  for (const c of [...changes].sort((a, b) => b.offset - a.offset)) out = `${out.slice(0, c.offset)}${c.content}${out.slice(c.offset + c.length)}`
  return out
}
