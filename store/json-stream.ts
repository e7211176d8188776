/**
 * A streamed reader of one JSON object whose `arrayKey` field is a big array: the other fields are handed
 * out whole, the array one element at a time, so a file of any length is read in memory bounded by its
 * largest element. Works on bytes (JSON's structural characters are ASCII, and UTF-8 never puts an ASCII
 * byte inside a multi-byte character), linear in the input: each byte is looked at once.
 */
import { parseJson } from '../trace/index.ts'

/** What the scanner found: a field of the top object, the start of the array, one of its elements, the end. */
export type JsonStreamEvent =
  | { kind: 'field'; key: string; value: unknown }
  | { kind: 'array-start' }
  | { kind: 'element'; value: unknown; offset: number; length: number }
  | { kind: 'array-end' }
  | { kind: 'end' }

/** Thrown for bytes that are not the JSON expected; `offset` is the byte where it went wrong. */
export class JsonStreamError extends Error {
  readonly offset: number
  constructor(message: string, offset: number) {
    super(`${message} at byte ${offset}`)
    this.offset = offset
  }
}

/** Where the reader is: numbers, not an enum (sources run with type stripping only). */
const S = { Start: 0, KeyOrEnd: 1, Key: 2, Colon: 3, Value: 4, AfterValue: 5, ElementOrEnd: 6, AfterElement: 7, Done: 8 } as const
type S = (typeof S)[keyof typeof S]

const [QUOTE, BACKSLASH, COMMA, COLON, LBRACE, RBRACE, LBRACKET, RBRACKET] = [0x22, 0x5c, 0x2c, 0x3a, 0x7b, 0x7d, 0x5b, 0x5d]

function isSpace(b: number): boolean {
  return b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09
}

/** Push parser: `push(chunk)` returns the events that chunk completed; `end()` checks nothing is left open. */
export class JsonObjectStream {
  readonly #arrayKey: string
  #state: S = S.Start
  #pos = 0
  #keys = new Set<string>()
  #key = ''
  // The value being read: its bytes so far, nesting depth, string and escape state, whether it is a scalar.
  #parts: Uint8Array[] = []
  #start = 0
  #depth = 0
  #inString = false
  #escape = false
  #scalar = false
  #inArray = false
  #valueOffset = 0

  /** Elements are parsed with this (default parseJson, which keeps numbers a double cannot hold exactly). */
  readonly #parseElement: (text: string) => unknown

  constructor(arrayKey: string, parseElement: (text: string) => unknown = parseJson) {
    this.#arrayKey = arrayKey
    this.#parseElement = parseElement
  }

  push(chunk: Uint8Array): JsonStreamEvent[] {
    const out: JsonStreamEvent[] = []
    const base = this.#pos
    for (let i = 0; i < chunk.length; i++) {
      const b = chunk[i] as number
      switch (this.#state) {
        case S.Value:
          i = this.#scanValue(chunk, i, base, out)
          break
        case S.Key:
          i = this.#scanValue(chunk, i, base, out)
          break
        default:
          if (isSpace(b)) break
          this.#structural(b, chunk, i, base, out)
          // A key or an element starts at this byte; a field's value after the colon starts later.
          if (this.#reading()) i = this.#scanValue(chunk, i, base, out)
      }
    }
    if (this.#reading()) this.#parts.push(chunk.subarray(this.#start))
    this.#start = 0
    this.#pos = base + chunk.length
    return out
  }

  end(): JsonStreamEvent[] {
    const out: JsonStreamEvent[] = []
    if (this.#state !== S.Done) throw new JsonStreamError('Unexpected end of JSON input', this.#pos)
    out.push({ kind: 'end' })
    return out
  }

  /** A byte between values: the punctuation the state allows, else an error. */
  #structural(b: number, chunk: Uint8Array, i: number, base: number, out: JsonStreamEvent[]): void {
    const fail = (): never => {
      throw new JsonStreamError(`Unexpected ${JSON.stringify(String.fromCharCode(b))}`, base + i)
    }
    switch (this.#state) {
      case S.Start:
        if (b !== LBRACE) fail()
        this.#state = S.KeyOrEnd
        return
      case S.KeyOrEnd:
        if (b === RBRACE && this.#keys.size === 0) {
          this.#state = S.Done
          return
        }
        if (b !== QUOTE) fail()
        this.#begin(chunk, i, base, S.Key)
        return
      case S.Colon:
        if (b !== COLON) fail()
        this.#state = S.Value
        // The value starts at the next byte that is not space; #scanValue skips to it.
        this.#parts = []
        this.#depth = -1
        return
      case S.AfterValue:
        if (b === COMMA) this.#state = S.KeyOrEnd
        else if (b === RBRACE) this.#state = S.Done
        else fail()
        return
      case S.ElementOrEnd:
      case S.AfterElement:
        if (b === RBRACKET && (this.#state === S.AfterElement || !this.#sawComma)) {
          this.#inArray = false
          this.#state = S.AfterValue
          out.push({ kind: 'array-end' })
        } else if (this.#state === S.AfterElement && b === COMMA) {
          this.#state = S.ElementOrEnd
          this.#sawComma = true
        } else if (this.#state === S.ElementOrEnd) {
          this.#sawComma = false
          this.#begin(chunk, i, base, S.Value)
        } else fail()
        return
      default:
        fail()
    }
  }

  #sawComma = false

  /** Inside a key or a value (not before the value of a field). */
  #reading(): boolean {
    return this.#state === S.Key || (this.#state === S.Value && this.#depth !== -1)
  }

  #begin(_chunk: Uint8Array, i: number, base: number, state: S): void {
    this.#state = state
    this.#parts = []
    this.#start = i
    this.#valueOffset = base + i
    this.#depth = 0
    this.#inString = false
    this.#escape = false
    this.#scalar = false
  }

  /** Reads the current value (or key) from `i` on; returns the index of its last byte in this chunk. */
  #scanValue(chunk: Uint8Array, from: number, base: number, out: JsonStreamEvent[]): number {
    let i = from
    if (this.#depth === -1) {
      // After a colon: skip space, then see whether this value is the big array.
      while (i < chunk.length && isSpace(chunk[i] as number)) i++
      if (i === chunk.length) return i - 1
      if (this.#key === this.#arrayKey && chunk[i] === LBRACKET) {
        this.#inArray = true
        this.#sawComma = false
        this.#state = S.ElementOrEnd
        out.push({ kind: 'array-start' })
        return i
      }
      this.#begin(chunk, i, base, S.Value)
    }
    // The state lives in locals while the loop runs (every byte of the file passes here) and goes back on exit.
    let depth = this.#depth
    let inString = this.#inString
    let escaped = this.#escape
    let scalar = this.#scalar
    let end = -1
    const n = chunk.length
    for (; i < n; i++) {
      if (inString) {
        // A string's bytes in a loop of their own: most of a file is strings.
        if (escaped) {
          escaped = false
          continue
        }
        for (; i < n; i++) {
          const c = chunk[i] as number
          if (c === BACKSLASH) {
            if (++i === n) escaped = true
          } else if (c === QUOTE) break
        }
        if (i >= n) break
        inString = false
        if (depth === 0 && !scalar) {
          end = i + 1
          break
        }
        continue
      }
      const b = chunk[i] as number
      if (scalar) {
        if (isSpace(b) || b === COMMA || b === RBRACE || b === RBRACKET) {
          end = i
          break
        }
      } else if (b === QUOTE) inString = true
      else if (b === LBRACE || b === LBRACKET) depth++
      else if (b === RBRACE || b === RBRACKET) {
        depth--
        if (depth === 0) {
          end = i + 1
          break
        }
        if (depth < 0) throw new JsonStreamError('Unexpected close', base + i)
      } else if (depth === 0 && !isSpace(b)) scalar = true
    }
    this.#depth = depth
    this.#inString = inString
    this.#escape = escaped
    this.#scalar = scalar
    return end === -1 ? i - 1 : this.#finish(chunk, end, base, out) - 1
  }

  /** The value ends before `end`: parse it and emit it; returns `end`. */
  #finish(chunk: Uint8Array, end: number, base: number, out: JsonStreamEvent[]): number {
    this.#parts.push(chunk.subarray(this.#start, end))
    const bytes = this.#parts.length === 1 ? (this.#parts[0] as Uint8Array) : Buffer.concat(this.#parts)
    this.#parts = []
    const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8')
    let value: unknown
    try {
      value = this.#inArray && this.#state !== S.Key ? this.#parseElement(text) : parseJson(text)
    } catch (err) {
      throw new JsonStreamError((err as Error).message, this.#valueOffset)
    }
    const length = base + end - this.#valueOffset
    if (this.#state === S.Key) {
      if (typeof value !== 'string') throw new JsonStreamError('Expected a key', this.#valueOffset)
      if (this.#keys.has(value)) throw new JsonStreamError(`Duplicate key ${JSON.stringify(value)}`, this.#valueOffset)
      this.#keys.add(value)
      this.#key = value
      this.#state = S.Colon
    } else if (this.#inArray) {
      out.push({ kind: 'element', value, offset: this.#valueOffset, length })
      this.#state = S.AfterElement
    } else {
      out.push({ kind: 'field', key: this.#key, value })
      this.#state = S.AfterValue
    }
    this.#start = end
    return end
  }
}
