import { tryParseJson } from './json-codec.ts'

/**
 * Server-sent events (text/event-stream) parsed into events, so diff compares streams as events
 * rather than bytes: chunk boundaries, comments and keep-alives do not count as differences.
 * @note Follows the WHATWG "event stream interpretation" rules: lines end in CRLF, LF or CR; a blank
 * line dispatches; `:` starts a comment; one leading space after the colon is dropped; `data` lines
 * join with "\n"; an event with no data is not dispatched; an unterminated last event is dropped.
 */

/** One dispatched event. `event` is omitted for the default type ("message"). */
export interface SseEvent {
  event?: string
  data: string
  id?: string
  retry?: number
}

/** True when a Content-Type names an event stream. */
export function isEventStream(contentType: string | undefined): boolean {
  return contentType !== undefined && /^\s*text\/event-stream\b/i.test(contentType)
}

/** Parses a whole event stream into its dispatched events. Pure. */
export function parseSse(text: string): SseEvent[] {
  const out: SseEvent[] = []
  let data: string[] = []
  let hasData = false
  let event: string | undefined
  let id: string | undefined
  let retry: number | undefined
  // A BOM at the very start is not part of the first field name.
  const body = text.startsWith('\uFEFF') ? text.slice(1) : text
  const lines = body.split(/\r\n|\r|\n/)
  // The last element is what followed the final line terminator: an incomplete line, never dispatched.
  lines.pop()
  for (const line of lines) {
    if (line === '') {
      if (hasData) {
        const e: SseEvent = { data: data.join('\n') }
        if (event !== undefined && event !== '' && event !== 'message') e.event = event
        if (id !== undefined) e.id = id
        if (retry !== undefined) e.retry = retry
        out.push(e)
      }
      data = []
      hasData = false
      event = undefined
      retry = undefined
      // `id` persists across events per the spec (last event id), but we report it only where it was set.
      id = undefined
      continue
    }
    if (line.startsWith(':')) continue
    const colon = line.indexOf(':')
    const field = colon === -1 ? line : line.slice(0, colon)
    let value = colon === -1 ? '' : line.slice(colon + 1)
    if (value.startsWith(' ')) value = value.slice(1)
    if (field === 'data') {
      data.push(value)
      hasData = true
    } else if (field === 'event') event = value
    else if (field === 'id') {
      if (!value.includes('\0')) id = value
    } else if (field === 'retry') {
      if (/^\d+$/.test(value)) retry = Number(value)
    }
  }
  return out
}

/**
 * Events as JSON values for comparison: `data` parsed as JSON where it is JSON (OpenAI-style streams),
 * kept as a string otherwise ("[DONE]").
 */
export function sseEventsAsJson(events: ReadonlyArray<SseEvent>): Array<Record<string, unknown>> {
  return events.map((e) => {
    const out: Record<string, unknown> = {}
    if (e.event !== undefined) out.event = e.event
    if (e.id !== undefined) out.id = e.id
    if (e.retry !== undefined) out.retry = e.retry
    out.data = parseMaybeJson(e.data)
    return out
  })
}

function parseMaybeJson(text: string): unknown {
  const t = text.trimStart()
  if (!(t.startsWith('{') || t.startsWith('['))) return text
  return tryParseJson(text)?.value ?? text
}
