/**
 * Portable trace files: deterministic, reviewable JSON to commit and share (`tr-proxy export/import`).
 *
 * Layout: 2-space JSON, fixed key order, one object per exchange, headers as [name, value] pairs and
 * no timestamps, so re-exporting an unchanged trace gives the same bytes and diffs show real changes.
 * Bodies sit inline in the most readable form that is still exact:
 *   "text"    UTF-8 text of a text-like, uncompressed body
 *   "events"  an event stream (text/event-stream) as its chunks, [{ atMs, text }], so timing is visible
 *   "base64"  other bodies up to `inlineLimit` bytes
 *   "blob"    bigger ones, as `blobs/<sha256>` next to the file (content-addressed, shared by traces)
 *   "ref"     "sha256:<digest>": the same bytes as an earlier body of this file with that digest. A body
 *             is written out once per file; every later occurrence (a retried request, 2000 polls that got
 *             the same answer) keeps only its digest, size and chunk timing. Files with a ref say
 *             `"version": 2`, so an older Tool Replay refuses them by version instead of by field.
 * Each body keeps its sha256 and the file keeps `digest` (traceDigest), so an edit anywhere is detected.
 * Import also checks every exchange against trace/validate.ts (statuses, header syntax, framing).
 *
 * Files of any length are written and read as streams (trace-file-export.ts, trace-file-read.ts): the
 * fields before `exchanges` come first, then one exchange at a time, and the digest is compared once the
 * last exchange is read, before a caller commits anything. Memory is bounded by the biggest exchange and
 * the number of distinct bodies, not by the file.
 */
import { createReadStream } from 'node:fs'
import { ErrorCodes, exchangeProblem, parseJson, ToolReplayError, type Trace } from '../trace/index.ts'
import { traceSource, type WrittenTraceFile, writeTraceFileFrom } from './trace-file-export.ts'
import { type TraceFileOptions, traceDigest } from './trace-file-format.ts'
import { TraceFileReader } from './trace-file-read.ts'
import { checkHeader, digestMismatch, mapLedger, Validator } from './trace-file-validator.ts'

export type { ExportedTrace, TraceSource, WrittenTraceFile } from './trace-file-export.ts'
export { exportTrace, storedTraceSource, traceFileDigest, traceSource, writeTraceFileFrom } from './trace-file-export.ts'
export type { TraceFileExchange, TraceFileOptions, TraceFileReadOptions } from './trace-file-format.ts'
export { DEFAULT_INLINE_LIMIT, TRACE_FILE_FORMAT, TRACE_FILE_VERSIONS, TraceDigester, traceDigest } from './trace-file-format.ts'
export { TraceFileReader } from './trace-file-read.ts'

/**
 * Writes a trace file and its blobs, streamed; each file is written to a temp name and renamed, so a reader
 * never sees half a file.
 */
export async function writeTraceFile(path: string, trace: Trace, options: TraceFileOptions = {}): Promise<WrittenTraceFile> {
  return withWriteErrors(path, () => writeTraceFileFrom(path, traceSource(trace), options))
}

/** Runs a write of `path`, turning a file-system failure into TR_STORE_IO naming the file. */
export async function withWriteErrors<T>(path: string, write: () => Promise<T>): Promise<T> {
  try {
    return await write()
  } catch (err) {
    if (err instanceof ToolReplayError) throw err
    throw new ToolReplayError(
      ErrorCodes.STORE_IO,
      `Failed to write trace file ${path}: ${(err as Error).message}. Check the directory exists and is writable.`,
      { cause: err },
    )
  }
}

/** Reads and fully verifies a trace file and the blobs it refers to (streamed; the trace is then held whole). */
export async function readTraceFile(path: string): Promise<Trace> {
  const reader = await TraceFileReader.open(path)
  const exchanges = []
  const bodies = new Map<string, Uint8Array>()
  for await (const { exchange, bodies: own } of reader.exchanges()) {
    exchanges.push(exchange)
    for (const [d, b] of own) bodies.set(d, b)
  }
  return { meta: reader.meta, exchanges, bodies }
}

/**
 * Parses trace-file text strictly: schema, every body's sha256, and the trace digest.
 * Throws TR_TRACE_FILE_INVALID or TR_TRACE_DIGEST_MISMATCH naming the file and the field.
 */
export function parseTraceFile(text: string, blobs: ReadonlyMap<string, Uint8Array> = new Map(), options: { file?: string } = {}): Trace {
  const file = options.file ?? '<trace file>'
  const v = new Validator(file)
  let raw: unknown
  try {
    raw = parseJson(text)
  } catch (err) {
    v.fail('(top level)', `is not valid JSON (${(err as Error).message})`)
  }
  const top = v.object(raw, '', ['format', 'version', 'digest', 'meta', 'exchanges'])
  const { digest, meta } = checkHeader(v, top)
  const bodies = new Map<string, Uint8Array>()
  const ledger = mapLedger(blobs, bodies)
  const exchanges = v.array(top.exchanges, 'exchanges').map((x, i) => v.exchange(x, `exchanges[${i}]`, ledger))
  const actual = traceDigest({ meta, exchanges })
  if (actual !== digest) throw digestMismatch(file, digest, actual)
  // Valid by construction: what passes here replays on both capture paths without crashing or hanging.
  const seqs = new Set<number>()
  exchanges.forEach((x, i) => {
    const found = exchangeProblem(x, bodies)
    if (found) v.fail(`exchanges[${i}].${found.path}`, found.problem)
    if (seqs.has(x.seq)) v.fail(`exchanges[${i}].seq`, `repeats seq ${x.seq}; every exchange of a trace has its own`)
    seqs.add(x.seq)
  })
  return { meta, exchanges, bodies }
}

/**
 * traceFileBlobDigests of the file at `path`, read as a stream (a piece at a time, with enough of the piece
 * before it kept to find a name cut in two), so a file of any size is scanned in bounded memory.
 */
export async function traceFileBlobDigestsIn(path: string): Promise<Set<string>> {
  const out = new Set<string>()
  let carry = ''
  for await (const piece of createReadStream(path, { encoding: 'utf8', highWaterMark: 1024 * 1024 })) {
    const text = carry + (piece as string)
    for (const d of traceFileBlobDigests(text)) out.add(d)
    // Longer than one `"blob": "blobs/<sha256>"`, so a name cut at the end is whole in the next text.
    carry = text.slice(-128)
  }
  return out
}

/** The digests of the bodies a trace file keeps in `blobs/` beside it (what to fetch or copy along with the file). */
export function traceFileBlobDigests(text: string): Set<string> {
  const out = new Set<string>()
  for (const m of text.matchAll(/"blob": "blobs\/([0-9a-f]{64})"/g)) out.add(m[1] as string)
  return out
}
