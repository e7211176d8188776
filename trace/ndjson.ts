/**
 * Newline-delimited JSON (`application/x-ndjson`): Ollama's native streams, one JSON object per line. Parsed
 * into values so diff and the LLM view read such a stream as its events, not as bytes.
 * @note Lines end in LF (a CR before it is dropped); blank lines are skipped; an unterminated last line is
 * kept when it parses (Ollama ends its last object with a newline, a cut stream may not).
 */
import { tryParseJson } from './json-codec.ts'

/** True when a Content-Type names newline-delimited JSON. */
export function isNdjson(contentType: string | undefined): boolean {
  return contentType !== undefined && /^\s*application\/(?:x-)?ndjson\b/i.test(contentType)
}

/** One line of an NDJSON body: its raw text (with its line ending) and its value, when it parses. */
export interface NdjsonLine {
  raw: string
  value?: unknown
}

/** Splits an NDJSON body into its lines; blank lines are kept (as raw text) so the lines join back to the body. */
export function splitNdjson(text: string): NdjsonLine[] {
  const out: NdjsonLine[] = []
  for (const raw of text.match(/[^\n]*\n|[^\n]+$/g) ?? []) {
    const line = raw.replace(/\r?\n$/, '')
    const parsed = line.trim() === '' ? undefined : tryParseJson(line)
    out.push(parsed ? { raw, value: parsed.value } : { raw })
  }
  return out
}

/** The parsed values of an NDJSON body, in order (lines that are not JSON are kept as strings). */
export function parseNdjson(text: string): unknown[] {
  return splitNdjson(text).flatMap((l) => (l.value !== undefined ? [l.value] : l.raw.trim() === '' ? [] : [l.raw.replace(/\r?\n$/, '')]))
}
