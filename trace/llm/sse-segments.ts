/**
 * An event stream as the raw text of its events, so a patch can rewrite the data of a few events and
 * leave every other byte (comments, `event:` lines, line endings, `[DONE]`) as it was recorded, and so the
 * rewritten body can be cut into as many chunks, at the same events, as the recording.
 */
import { concatBytes } from '../body.ts'
import type { BodyChunk } from '../exchange.ts'
import { editJson, type JsonEdit } from '../json-codec.ts'

/** One event's raw text, up to and including the blank line that ends it. */
export interface SseSegment {
  raw: string
  /** The `event:` field, when the event has one. */
  event?: string
  /** The data lines joined with "\n" (absent for a comment-only block or an unterminated tail). */
  data?: string
}

const LINE = /[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$/g

/** Splits an event stream into its events (and a trailing unterminated part, which has no data). */
export function splitSseSegments(text: string): SseSegment[] {
  const out: SseSegment[] = []
  let raw = ''
  let data: string[] = []
  let event: string | undefined
  for (const line of text.match(LINE) ?? []) {
    raw += line
    const content = line.replace(/(?:\r\n|\r|\n)$/, '')
    if (content === '' && line !== content) {
      const seg: SseSegment = { raw }
      if (event !== undefined) seg.event = event
      if (data.length > 0) seg.data = data.join('\n')
      out.push(seg)
      raw = ''
      data = []
      event = undefined
      continue
    }
    const { field, value } = fieldOf(content)
    if (field === 'data') data.push(value)
    else if (field === 'event') event = value
  }
  // An unterminated tail is never dispatched by an SSE parser: kept as bytes, never edited.
  if (raw !== '') out.push({ raw })
  return out
}

function fieldOf(line: string): { field: string; value: string } {
  if (line.startsWith(':')) return { field: '', value: '' }
  const colon = line.indexOf(':')
  if (colon === -1) return { field: line, value: '' }
  const value = line.slice(colon + 1)
  return { field: line.slice(0, colon), value: value.startsWith(' ') ? value.slice(1) : value }
}

/** What to change in one event: JSON edits of its data, and optionally its `event:` name. */
export interface SegmentEdit {
  edits: JsonEdit[]
  event?: string
}

/** The raw text of an event with its data edited (surgically: only the edited values change) and its name replaced. */
export function renderSegment(seg: SseSegment, edit: SegmentEdit | undefined): string {
  if (!edit || seg.data === undefined) return seg.raw
  const data = edit.edits.length > 0 ? editJson(seg.data, edit.edits) : seg.data
  let wroteData = false
  let out = ''
  for (const line of seg.raw.match(LINE) ?? []) {
    const eol = /(?:\r\n|\r|\n)$/.exec(line)?.[0] ?? ''
    const content = line.slice(0, line.length - eol.length)
    const { field } = fieldOf(content)
    if (field === 'data') {
      // A multi-line data field becomes one line: edited JSON is written without newlines.
      if (!wroteData) out += `data:${content.startsWith('data: ') ? ' ' : ''}${data}${eol}`
      wroteData = true
    } else if (field === 'event' && edit.event !== undefined) out += `event:${content.startsWith('event: ') ? ' ' : ''}${edit.event}${eol}`
    else out += line
  }
  return out
}

const enc = new TextEncoder()

/** A stream's segment as bytes: an SSE event's text, an NDJSON line, an AWS event stream frame. */
export type Segment = string | Uint8Array

const bytesOf = (s: Segment): Uint8Array => (typeof s === 'string' ? enc.encode(s) : s)

/**
 * Cuts a rewritten stream into as many chunks as the recording, at the same places: a recorded chunk that
 * ended at the end of event k ends at the end of rewritten event k; one that ended inside an event ends at
 * the same proportion of the rewritten event. Each chunk keeps its recorded time.
 */
export function rechunkLike(
  before: ReadonlyArray<Segment>,
  after: ReadonlyArray<Segment>,
  chunks: ReadonlyArray<BodyChunk>,
): Array<{ bytes: Uint8Array; atMs: number }> {
  const bytes = concatBytes(after.map(bytesOf))
  const oldLens = before.map((s) => bytesOf(s).byteLength)
  const newLens = after.map((s) => bytesOf(s).byteLength)
  const oldStarts = starts(oldLens)
  const newStarts = starts(newLens)
  const out: Array<{ bytes: Uint8Array; atMs: number }> = []
  let cum = 0
  let from = 0
  let s = 0
  chunks.forEach((c, i) => {
    cum += c.size
    while (s < oldLens.length - 1 && (oldStarts[s] as number) + (oldLens[s] as number) < cum) s++
    const r = cum - (oldStarts[s] as number)
    const oldLen = oldLens[s] ?? 0
    const newLen = newLens[s] ?? 0
    let to = (newStarts[s] ?? 0) + (r >= oldLen ? newLen : Math.round((r / Math.max(oldLen, 1)) * newLen))
    if (i === chunks.length - 1) to = bytes.byteLength
    to = Math.min(Math.max(to, from), bytes.byteLength)
    out.push({ bytes: bytes.subarray(from, to), atMs: c.atMs })
    from = to
  })
  if (from < bytes.byteLength) out.push({ bytes: bytes.subarray(from), atMs: chunks.at(-1)?.atMs ?? 0 })
  return out
}

/** One chunk per event, at times spread over the recorded chunks (for compressed recordings, whose chunk boundaries say nothing about events). */
export function chunkPerEvent(after: ReadonlyArray<Segment>, chunks: ReadonlyArray<BodyChunk>): Array<{ bytes: Uint8Array; atMs: number }> {
  return after.map((s, i) => {
    const c = chunks[Math.min(chunks.length - 1, Math.floor((i * chunks.length) / Math.max(after.length, 1)))]
    return { bytes: bytesOf(s), atMs: c?.atMs ?? 0 }
  })
}

function starts(lens: number[]): number[] {
  const out: number[] = []
  let n = 0
  for (const l of lens) {
    out.push(n)
    n += l
  }
  return out
}

/**
 * Splits `text` into as many pieces as `like`, so a re-encoded stream keeps the recording's rhythm: a text
 * no longer than the original fills the pieces in order with the original piece sizes (token-sized
 * deltas, the later ones empty, as when a model stops early); a longer text is spread in proportion to
 * the original sizes. Sizes count code points, so a surrogate pair is never cut. If every original
 * piece was empty, the text goes into the first.
 */
export function splitLike(text: string, like: ReadonlyArray<string>): string[] {
  const chars = Array.from(text)
  const weights = like.map((p) => Array.from(p).length)
  const total = weights.reduce((a, b) => a + b, 0)
  if (like.length === 0) return []
  if (total === 0) return like.map((_, i) => (i === 0 ? text : ''))
  const out: string[] = []
  let cum = 0
  let from = 0
  weights.forEach((w, i) => {
    cum += w
    const end = chars.length <= total ? cum : Math.round((cum / total) * chars.length)
    const to = i === weights.length - 1 ? chars.length : Math.min(end, chars.length)
    out.push(chars.slice(from, Math.max(to, from)).join(''))
    from = Math.max(to, from)
  })
  return out
}
