/**
 * A streamed response body as segments a patch can rewrite one by one: SSE events (trace/llm/sse-segments.ts),
 * NDJSON lines, or AWS event stream frames. Each segment keeps its recorded bytes; an edited one is
 * rendered again in its own framing (an event's data edited surgically, a line's JSON, a frame's payload with
 * its lengths and CRCs recomputed), so everything not patched stays byte for byte as recorded.
 */
import { encodeEventStreamFrame } from '../eventstream.ts'
import { editJson, tryParseJson } from '../json-codec.ts'
import { splitNdjson } from '../ndjson.ts'
import type { DecodedResponse } from './exchange-bodies.ts'
import { obj, str } from './json-access.ts'
import type { StreamEvent } from './patch-plan.ts'
import { renderSegment, type SegmentEdit, splitSseSegments } from './sse-segments.ts'

/** The segments of a stream, the events a plan reads, and how to render an edited segment. */
export interface StreamBody {
  /** Each segment's recorded bytes, in order; they join to the decoded body. */
  raw: Uint8Array[]
  events: StreamEvent[]
  render(seg: number, edit: SegmentEdit): Uint8Array
}

const enc = new TextEncoder()
const dec = new TextDecoder()

/** The stream form of a decoded response, or undefined when it is not a stream. */
export function streamBody(res: DecodedResponse): StreamBody | undefined {
  if (res.framing === 'eventstream' && res.frames) return frames(res.frames)
  if (res.text === undefined || !res.framing) return undefined
  if (res.framing === 'ndjson') return ndjson(res.text)
  const segments = splitSseSegments(res.text)
  const events: StreamEvent[] = []
  segments.forEach((s, seg) => {
    const data = s.data === undefined ? undefined : obj(tryParseJson(s.data)?.value)
    if (data) events.push({ seg, type: str(data.type) ?? s.event ?? '', data })
  })
  return {
    raw: segments.map((s) => enc.encode(s.raw)),
    events,
    render: (seg, edit) => enc.encode(renderSegment(segments[seg] as (typeof segments)[number], edit)),
  }
}

function ndjson(text: string): StreamBody {
  const lines = splitNdjson(text)
  const events: StreamEvent[] = []
  lines.forEach((l, seg) => {
    const data = obj(l.value)
    if (data) events.push({ seg, type: '', data })
  })
  return {
    raw: lines.map((l) => enc.encode(l.raw)),
    events,
    render: (seg, edit) => {
      const raw = (lines[seg] as (typeof lines)[number]).raw
      const eol = /\r?\n$/.exec(raw)?.[0] ?? ''
      return enc.encode(`${editJson(raw.slice(0, raw.length - eol.length), edit.edits)}${eol}`)
    },
  }
}

function frames(decoded: NonNullable<DecodedResponse['frames']>): StreamBody {
  const { body, list } = decoded
  const raw = list.map((f) => body.subarray(f.offset, f.offset + f.length))
  const events: StreamEvent[] = []
  list.forEach((f, seg) => {
    const data = obj(tryParseJson(dec.decode(f.payload))?.value)
    const type = f.headers[':event-type']
    if (data && f.headers[':message-type'] !== 'exception') events.push({ seg, type: typeof type === 'string' ? type : '', data })
  })
  // Bytes after the last whole frame (a cut stream) stay as they were.
  const end = list.length > 0 ? (list.at(-1)?.offset ?? 0) + (list.at(-1)?.length ?? 0) : 0
  if (end < body.byteLength) raw.push(body.subarray(end))
  return {
    raw,
    events,
    render: (seg, edit) => {
      const f = list[seg]
      if (!f) return raw[seg] as Uint8Array
      return encodeEventStreamFrame(f.rawHeaders, enc.encode(editJson(dec.decode(f.payload), edit.edits)))
    },
  }
}
