/** The decoded bodies of an exchange, as the LLM view and LLM patches read them. */
import { bodyBytes, tryUtf8 } from '../body.ts'
import { decodeContentEncoding } from '../content-encoding.ts'
import { decodeEventStream, type EventStreamFrame, eventStreamFramesAsJson, isAwsEventStream } from '../eventstream.ts'
import type { BodyRef, Exchange, HeaderPairs, RecordedResponse, Trace } from '../exchange.ts'
import { headerValue } from '../header-pairs.ts'
import { tryParseJson } from '../json-codec.ts'
import { isNdjson, parseNdjson } from '../ndjson.ts'
import { isEventStream, parseSse, sseEventsAsJson } from '../sse.ts'
import type { LlmStreamEvent } from './llm-types.ts'

/** A body's bytes after Content-Encoding is undone; undefined when absent or undecodable. */
export function decodedBytes(trace: Pick<Trace, 'bodies' | 'meta'>, ref: BodyRef | null | undefined, headers: HeaderPairs): Uint8Array | undefined {
  if (!ref) return undefined
  const raw = trace.bodies.get(ref.digest)
  if (raw === undefined) return undefined
  try {
    return decodeContentEncoding(bodyBytes(trace, ref), headerValue(headers, 'content-encoding'))
  } catch {
    return undefined
  }
}

/** A body as text after Content-Encoding is undone; undefined when absent, undecodable or not UTF-8. */
export function decodedText(trace: Pick<Trace, 'bodies' | 'meta'>, ref: BodyRef | null | undefined, headers: HeaderPairs): string | undefined {
  const bytes = decodedBytes(trace, ref, headers)
  return bytes === undefined ? undefined : tryUtf8(bytes)
}

/** The JSON request body as an object, or undefined. */
export function requestJson(trace: Pick<Trace, 'bodies' | 'meta'>, x: Exchange): Record<string, unknown> | undefined {
  const text = decodedText(trace, x.request.body, x.request.headers)
  if (text === undefined) return undefined
  const v = tryParseJson(text)?.value
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined
}

/** How a streamed response frames its events. */
export type StreamFraming = 'sse' | 'eventstream' | 'ndjson'

/** A response body read for the LLM view: its events when it is a stream, else its JSON. */
export interface DecodedResponse {
  head: RecordedResponse
  text: string | undefined
  json?: unknown
  events?: LlmStreamEvent[]
  framing?: StreamFraming
  /** The frames of an AWS event stream, with the decoded body they sit in (for patches). */
  frames?: { body: Uint8Array; list: EventStreamFrame[]; complete: boolean }
}

/** The recorded response (or the partial response of a recorded error) with its body decoded. */
export function decodedResponse(trace: Pick<Trace, 'bodies' | 'meta'>, x: Exchange): DecodedResponse | undefined {
  const head = x.outcome.kind === 'response' ? x.outcome.response : x.outcome.error.partial
  if (!head) return undefined
  const contentType = headerValue(head.headers, 'content-type')
  if (isAwsEventStream(contentType)) {
    const bytes = decodedBytes(trace, head.body, head.headers)
    if (bytes === undefined) return { head, text: undefined }
    const decoded = decodeEventStream(bytes)
    const events = eventStreamFramesAsJson(decoded.frames).map((e) => {
      const ev: LlmStreamEvent = { data: e.data }
      if (e.event !== undefined) ev.event = e.event
      if (e.exception) ev.exception = true
      return ev
    })
    return { head, text: undefined, events, framing: 'eventstream', frames: { body: bytes, list: decoded.frames, complete: decoded.complete } }
  }
  const text = decodedText(trace, head.body, head.headers)
  const out: DecodedResponse = { head, text }
  if (text === undefined) return out
  if (isNdjson(contentType)) {
    out.events = parseNdjson(text).map((data) => ({ data }))
    out.framing = 'ndjson'
    return out
  }
  if (isEventStream(contentType) || /^(?:data|event|:)[^\n]*\n/.test(text.trimStart())) {
    out.framing = 'sse'
    out.events = sseEventsAsJson(parseSse(text)).map((e) => {
      const ev: LlmStreamEvent = { data: e.data }
      if (typeof e.event === 'string') ev.event = e.event
      return ev
    })
  } else {
    const parsed = tryParseJson(text)
    if (parsed) out.json = parsed.value
  }
  return out
}
