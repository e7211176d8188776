/** The decoded bodies of an exchange, as the LLM view and LLM patches read them. */
import { bodyBytes, tryUtf8 } from '../body.ts'
import { decodeContentEncoding } from '../content-encoding.ts'
import type { BodyRef, Exchange, HeaderPairs, RecordedResponse, Trace } from '../exchange.ts'
import { headerValue } from '../header-pairs.ts'
import { tryParseJson } from '../json-codec.ts'
import { isEventStream, parseSse, sseEventsAsJson } from '../sse.ts'
import type { LlmStreamEvent } from './llm-types.ts'

/** A body as text after Content-Encoding is undone; undefined when absent, undecodable or not UTF-8. */
export function decodedText(trace: Pick<Trace, 'bodies' | 'meta'>, ref: BodyRef | null | undefined, headers: HeaderPairs): string | undefined {
  if (!ref) return undefined
  const raw = trace.bodies.get(ref.digest)
  if (raw === undefined) return undefined
  try {
    return tryUtf8(decodeContentEncoding(bodyBytes(trace, ref), headerValue(headers, 'content-encoding')))
  } catch {
    return undefined
  }
}

/** The JSON request body as an object, or undefined. */
export function requestJson(trace: Pick<Trace, 'bodies' | 'meta'>, x: Exchange): Record<string, unknown> | undefined {
  const text = decodedText(trace, x.request.body, x.request.headers)
  if (text === undefined) return undefined
  const v = tryParseJson(text)?.value
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined
}

/** A response body read for the LLM view: its events when it is an event stream, else its JSON. */
export interface DecodedResponse {
  head: RecordedResponse
  text: string | undefined
  json?: unknown
  events?: LlmStreamEvent[]
}

/** The recorded response (or the partial response of a recorded error) with its body decoded. */
export function decodedResponse(trace: Pick<Trace, 'bodies' | 'meta'>, x: Exchange): DecodedResponse | undefined {
  const head = x.outcome.kind === 'response' ? x.outcome.response : x.outcome.error.partial
  if (!head) return undefined
  const text = decodedText(trace, head.body, head.headers)
  const out: DecodedResponse = { head, text }
  if (text === undefined) return out
  if (isEventStream(headerValue(head.headers, 'content-type')) || /^(?:data|event|:)[^\n]*\n/.test(text.trimStart())) {
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
