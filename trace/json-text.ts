/**
 * JSON text read the way a server might read it, token by token, for the two places where the parsed value
 * is not enough: redaction and the secret scan. `JSON.parse` keeps only the last of a repeated key
 * (`{"password":"x","password":"SECRET"}` parses as `{password: "SECRET"}`), so a rewrite that finds its
 * place by value or by the first matching key leaves the other occurrence as it was. Here:
 * - every occurrence of a key is visited, in text order, with its offsets;
 * - keys and strings are compared decoded (`"pa\u0073sword"` is `password`);
 * - comments and trailing commas are tolerated (JSONC, JSON5-leaning parsers accept them), and comments are
 *   handed to the caller;
 * - a sequence of top-level values (JSON Lines) is read value by value;
 * - text cut short (a truncated body) is read as far as it goes, a string cut by the end included;
 * - nothing recurses, so nesting depth costs no stack.
 *
 * @note Tokens come from jsonc-parser's scanner (the VS Code JSON scanner); this file only tracks the path.
 */
import { createScanner } from 'jsonc-parser'

// jsonc-parser's SyntaxKind and ScanError are `const enum`s, which type stripping cannot inline.
const OPEN_BRACE = 1
const CLOSE_BRACE = 2
const OPEN_BRACKET = 3
const CLOSE_BRACKET = 4
const COMMA = 5
const COLON = 6
const NULL = 7
const TRUE = 8
const FALSE = 9
const STRING = 10
const NUMBER = 11
const LINE_COMMENT = 12
const BLOCK_COMMENT = 13
const LINE_BREAK = 14
const TRIVIA = 15
const EOF = 17
const SCAN_OK = 0
const END_OF_COMMENT = 1
const END_OF_STRING = 2

/** What kind of JSON value a place holds. */
export type JsonTextKind = 'object' | 'array' | 'string' | 'number' | 'boolean' | 'null'

/** One value in the text, visited when it is complete (a container after its last member). */
export interface JsonTextValue {
  /** Where it sits in its top-level value; a view that is valid during the callback only. */
  path: ReadonlyArray<string | number>
  /** Which top-level value holds it: 0 for a JSON document, the line for JSON Lines. */
  document: number
  kind: JsonTextKind
  /** Offset and length of its text (a string's quotes included). */
  offset: number
  length: number
  /** A string's decoded text. */
  text?: string
  /** True for a string the end of the text cut short. */
  cut?: boolean
}

/** One key of an object, each time it occurs. */
export interface JsonTextKey {
  /** The path of the object that holds it; a view that is valid during the callback only. */
  path: ReadonlyArray<string | number>
  document: number
  offset: number
  length: number
  /** The decoded key. */
  text: string
}

/** A `//` or `/* *\/` comment: not a value, but text someone can read. */
export interface JsonTextComment {
  offset: number
  length: number
  text: string
}

/** What to call for each value, key and comment. */
export interface JsonTextVisitor {
  value?(value: JsonTextValue): void
  key?(key: JsonTextKey): void
  comment?(comment: JsonTextComment): void
}

/**
 * How far the text read as JSON: `json` (whole, possibly JSONC or a sequence of values), `cut` (JSON up to an
 * end that came too early), `invalid` (something that is not JSON at `end`; what came before was visited).
 */
export interface JsonTextReading {
  status: 'json' | 'cut' | 'invalid'
  /** Complete top-level values read. */
  documents: number
  /** Where reading stopped (everything before was visited): the text's length, or where it stopped being JSON. */
  end: number
}

type Want = 'value' | 'value-or-close' | 'key-or-close' | 'colon' | 'next'
type Frame = { kind: 'object' | 'array'; offset: number; next: number }

/**
 * Reads JSON text and calls `visitor` for every value, key and comment, repeated keys each time.
 * @example
 * readJsonText('{"a":1,"a":2}', { value: (v) => console.log(v.path, v.offset) }) // ['a'] 5, ['a'] 11, [] 0
 */
export function readJsonText(text: string, visitor: JsonTextVisitor): JsonTextReading {
  return new JsonTextReader(text, visitor).read()
}

class JsonTextReader {
  readonly #text: string
  readonly #visitor: JsonTextVisitor
  readonly #scanner: ReturnType<typeof createScanner>
  readonly #path: Array<string | number> = []
  readonly #frames: Frame[] = []
  #want: Want = 'value'
  #documents = 0
  /** Where a token was flawed but still readable (a bad escape, a raw control character in a string): not JSON. */
  #flawed: number | undefined

  constructor(text: string, visitor: JsonTextVisitor) {
    this.#text = text
    this.#visitor = visitor
    this.#scanner = createScanner(text, false)
  }

  read(): JsonTextReading {
    const scanner = this.#scanner
    for (;;) {
      const token = scanner.scan()
      const offset = scanner.getTokenOffset()
      const error = scanner.getTokenError()
      if (token === TRIVIA || token === LINE_BREAK) continue
      if (token === LINE_COMMENT || token === BLOCK_COMMENT) {
        this.#visitor.comment?.({ offset, length: scanner.getTokenLength(), text: this.#text.slice(offset, offset + scanner.getTokenLength()) })
        if (error === END_OF_COMMENT) return this.#stop('cut', this.#text.length)
        continue
      }
      if (token === EOF) return this.#stop(this.#atEnd(), this.#text.length)
      if (error !== SCAN_OK && error !== END_OF_STRING) this.#flawed ??= offset
      const stopped = this.#step(token, offset, error === END_OF_STRING)
      if (stopped) return stopped
    }
  }

  /** Takes one token; a reading when it ends the text's JSON. */
  #step(token: number, offset: number, cut: boolean): JsonTextReading | undefined {
    const want = this.#want
    if ((want === 'key-or-close' && token === CLOSE_BRACE) || (want === 'value-or-close' && token === CLOSE_BRACKET)) {
      this.#close(token)
      return undefined
    }
    if (want === 'key-or-close') {
      if (token !== STRING || cut) return this.#stop(cut ? 'cut' : 'invalid', offset)
      const key = this.#scanner.getTokenValue()
      this.#visitor.key?.({ path: this.#path, document: this.#documents, offset, length: this.#scanner.getTokenLength(), text: key })
      this.#path.push(key)
      this.#want = 'colon'
      return undefined
    }
    if (want === 'colon') {
      if (token !== COLON) return this.#stop('invalid', offset)
      this.#want = 'value'
      return undefined
    }
    const frame = this.#frames.at(-1)
    if (want === 'next' && frame !== undefined) {
      if (token === COMMA) this.#want = frame.kind === 'object' ? 'key-or-close' : 'value-or-close'
      else if (!this.#close(token)) return this.#stop('invalid', offset)
      return undefined
    }
    // A value: where one is wanted, or the next top-level value of a sequence.
    return this.#value(token, offset, cut)
  }

  #value(token: number, offset: number, cut: boolean): JsonTextReading | undefined {
    if (token === OPEN_BRACE || token === OPEN_BRACKET) {
      this.#enter()
      this.#frames.push({ kind: token === OPEN_BRACE ? 'object' : 'array', offset, next: 0 })
      this.#want = token === OPEN_BRACE ? 'key-or-close' : 'value-or-close'
      return undefined
    }
    const kind = scalarKind(token)
    if (kind === undefined) return this.#stop('invalid', offset)
    this.#enter()
    const value: JsonTextValue = { path: this.#path, document: this.#documents, kind, offset, length: this.#scanner.getTokenLength() }
    if (kind === 'string') value.text = this.#scanner.getTokenValue()
    if (cut) {
      this.#visitor.value?.({ ...value, cut: true })
      return this.#stop('cut', this.#text.length)
    }
    this.#visitor.value?.(value)
    this.#leave()
    return undefined
  }

  /** Closes the innermost container if `token` closes it; false when it does not. */
  #close(token: number): boolean {
    const frame = this.#frames.at(-1)
    if (frame === undefined || token !== (frame.kind === 'object' ? CLOSE_BRACE : CLOSE_BRACKET)) return false
    this.#frames.pop()
    const end = this.#scanner.getTokenOffset() + this.#scanner.getTokenLength()
    this.#visitor.value?.({ path: this.#path, document: this.#documents, kind: frame.kind, offset: frame.offset, length: end - frame.offset })
    this.#leave()
    return true
  }

  /** Into a value: an array member's place is its index (an object member's key was pushed with the key). */
  #enter(): void {
    const frame = this.#frames.at(-1)
    if (frame?.kind === 'array') this.#path.push(frame.next++)
  }

  /** After a value: back in its container, or at the top level, where another value may follow. */
  #leave(): void {
    if (this.#frames.length > 0) this.#path.pop()
    else this.#documents++
    this.#want = 'next'
  }

  #atEnd(): JsonTextReading['status'] {
    if (this.#frames.length === 0 && this.#want === 'next') return 'json'
    return this.#documents === 0 && this.#frames.length === 0 && this.#want === 'value' ? 'invalid' : 'cut'
  }

  #stop(status: JsonTextReading['status'], end: number): JsonTextReading {
    // A flawed token was read past (everything up to `end` was visited), but the text is not JSON.
    return { status: this.#flawed === undefined ? status : 'invalid', documents: this.#documents, end }
  }
}

function scalarKind(token: number): JsonTextKind | undefined {
  if (token === STRING) return 'string'
  if (token === NUMBER) return 'number'
  if (token === TRUE || token === FALSE) return 'boolean'
  if (token === NULL) return 'null'
  return undefined
}
