/**
 * What every part of the trace-file code shares: the format's names and versions, the trace digest (whole or
 * fed an exchange at a time) and the file's JSON layout. See trace-file.ts for the format itself.
 */
import { createHash, type Hash } from 'node:crypto'
import { canonicalJson, type Exchange, sha256, TRACE_FORMAT_VERSION, type Trace, type TraceMeta } from '../trace/index.ts'

/** The `format` field of every trace file. */
export const TRACE_FILE_FORMAT = 'tool-replay-trace'

/**
 * File versions this reader accepts: 1, and 2 (1 plus `ref` bodies). A writer emits 2 only for a file that
 * holds a ref, so a file without repeated bodies stays byte-identical to what version-1 writers produced.
 */
export const TRACE_FILE_VERSIONS: readonly number[] = [1, 2]
export const REF_VERSION = 2

/** Binary bodies up to this many bytes are inlined as base64; bigger ones go to `blobs/`. */
export const DEFAULT_INLINE_LIMIT = 64 * 1024

/** Options for exporting a trace file. */
export interface TraceFileOptions {
  /** Largest binary body inlined as base64, in bytes. Default 64 KiB. */
  inlineLimit?: number
}

/** One exchange of a trace file and the bytes of its bodies, verified. */
export interface TraceFileExchange {
  exchange: Exchange
  /** Bodies whose bytes first appear in this exchange; with `refBytes`, every body it references. */
  bodies: Map<string, Uint8Array>
  /** The exchange's canonical JSON, as the trace digest took it (TraceDigester.addCanonical). */
  canonical: string
}

/** Options for reading a trace file. */
export interface TraceFileReadOptions {
  /** Also hand out the bytes of bodies that are refs to earlier ones (default false). */
  refBytes?: boolean
  /** Memory for bodies kept for refs (their bytes and about 400 bytes each around them) before one is read again from the file. Default REF_CACHE_BYTES (8 MiB). */
  cacheBytes?: number
  /**
   * Files of at least this many bytes are read and verified in a worker thread (trace-file-thread.ts) while the
   * caller takes the exchanges on; the exchanges and errors are the same. Default: never.
   */
  workerFrom?: number
}

/**
 * SHA-256 of a trace's canonical JSON (meta and exchanges), independent of any file formatting.
 * Bodies count through the sha256 each BodyRef holds; forks record it as `lineage.sourceDigest`.
 */
export function traceDigest(trace: Pick<Trace, 'meta' | 'exchanges'>): string {
  return sha256(canonicalJson({ format: TRACE_FORMAT_VERSION, meta: trace.meta, exchanges: trace.exchanges }))
}

/**
 * traceDigest fed one exchange at a time, so a trace of any length is hashed without holding it: the same
 * bytes canonicalJson gives for the whole (keys sorted: `exchanges`, then `format`, then `meta`).
 */
export class TraceDigester {
  readonly #hash: Hash = createHash('sha256')
  #count = 0

  constructor() {
    this.#hash.update('{"exchanges":[')
  }

  /** Adds the next exchange; returns its canonical JSON (to hand to another digester of the same exchange). */
  add(x: Exchange): string {
    const text = canonicalJson(x)
    this.addCanonical(text)
    return text
  }

  /** Adds the next exchange by its canonical JSON, as `add` returned it. */
  addCanonical(text: string): void {
    this.#hash.update(this.#count === 0 ? text : `,${text}`)
    this.#count++
  }

  get count(): number {
    return this.#count
  }

  digest(meta: TraceMeta): string {
    this.#hash.update(`],"format":${canonicalJson(TRACE_FORMAT_VERSION)},"meta":${canonicalJson(meta)}}`)
    return this.#hash.digest('hex')
  }
}

/**
 * JSON with 2-space indent, except that a header pair, a chunk entry or any other small array or object
 * of scalars stays on one line: a trace file reads like a transcript and a re-recording diffs line by line.
 */
export function formatJson(value: unknown, indent = ''): string {
  // Loops and appends, not entries/filter/map/join: an export formats every exchange of a trace.
  if (value === null || typeof value !== 'object') return JSON.stringify(value)
  const inner = `${indent}  `
  if (Array.isArray(value)) {
    const n = value.length
    if (n === 0) return '[]'
    let flat = true
    for (let i = 0; i < n && flat; i++) flat = isScalar(value[i])
    if (flat) {
      let line = '['
      for (let i = 0; i < n; i++) line += (i === 0 ? '' : ', ') + (JSON.stringify(value[i]) ?? '')
      line += ']'
      if (line.length + indent.length <= 120) return line
    }
    let out = '[\n'
    for (let i = 0; i < n; i++) out += (i === 0 ? '' : ',\n') + inner + formatJson(value[i], inner)
    return `${out}\n${indent}]`
  }
  const o = value as Record<string, unknown>
  let count = 0
  let scalars = true
  for (const k in o) {
    const v = o[k]
    if (v === undefined) continue
    count++
    if (!isScalar(v)) scalars = false
  }
  if (count === 0) return '{}'
  if (count <= 4 && scalars) {
    let line = '{ '
    let first = true
    for (const k in o) {
      const v = o[k]
      if (v === undefined) continue
      line += `${first ? '' : ', '}${JSON.stringify(k)}: ${JSON.stringify(v)}`
      first = false
    }
    line += ' }'
    if (line.length + indent.length <= 120) return line
  }
  let out = '{\n'
  let first = true
  for (const k in o) {
    const v = o[k]
    if (v === undefined) continue
    out += `${first ? '' : ',\n'}${inner}${JSON.stringify(k)}: ${formatJson(v, inner)}`
    first = false
  }
  return `${out}\n${indent}}`
}

function isScalar(v: unknown): boolean {
  return v === null || typeof v !== 'object'
}

/**
 * The file's text around its exchanges, exactly as formatJson lays out the whole file: `head` + each
 * exchange (indented, joined by `,\n`) + `tail`; an empty trace is `empty`.
 */
export function fileFrame(version: number, digest: string, meta: unknown): { head: string; tail: string; empty: string } {
  const top = `{\n  "format": ${JSON.stringify(TRACE_FILE_FORMAT)},\n  "version": ${version},\n  "digest": ${JSON.stringify(digest)},\n  "meta": ${formatJson(meta, '  ')},\n  "exchanges": `
  return { head: `${top}[\n`, tail: '\n  ]\n}\n', empty: `${top}[]\n}\n` }
}

/** One exchange as it sits in the file's `exchanges` array. */
export function fileElement(x: unknown): string {
  return `    ${formatJson(x, '    ')}`
}
