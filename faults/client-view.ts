/**
 * What the app gets when a fault acts after the upstream answered or mid-body, computed from the upstream's
 * whole response. Pure: a capture path that buffers the response hands it over and delivers the result;
 * one that streams can use StreamCutter for the mid-body faults instead.
 */
import { cutBody, decodeContentEncoding, type HeaderPairs, headerValue, isEventStream, tryUtf8 } from '../trace/index.ts'
import type { FaultAction, FaultFailure } from './fault-decision.ts'
import { driftJson } from './schema-drift.ts'

/** A whole response: head, body and trailers. */
export interface BufferedResponse {
  status: number
  statusText: string
  headers: HeaderPairs
  body: Uint8Array
  trailers: HeaderPairs
}

/**
 * What to deliver: a response (after `delayMs`), or a failure, optionally after a response head and part
 * of its body (`partial`).
 */
export type ClientView = { kind: 'response'; response: BufferedResponse; delayMs: number } | { kind: 'error'; error: FaultFailure; partial?: BufferedResponse }

/**
 * The view plus whether the fault applied. A fault that could not apply (drift on a body that is not JSON,
 * a cut on a stream shorter than the cut point) leaves the response as it was, says why in `note`, and must
 * not count as triggered.
 */
export interface AppliedFault {
  view: ClientView
  applied: boolean
  note: string
}

/** Applies an action of the after-response or mid-body phase to the upstream's whole response. */
export function applyAfterResponse(action: FaultAction, upstream: BufferedResponse): AppliedFault {
  const unchanged = (note: string): AppliedFault => ({ view: { kind: 'response', response: upstream, delayMs: 0 }, applied: false, note })
  switch (action.do) {
    case 'forward-then-fail':
      return { view: { kind: 'error', error: action.error }, applied: true, note: `the app got ${action.error.code} instead of ${upstream.status}` }
    case 'forward-then-respond':
      return {
        view: { kind: 'response', response: { ...action.response, trailers: [] }, delayMs: 0 },
        applied: true,
        note: `the app got ${action.response.status} instead of ${upstream.status}`,
      }
    case 'forward-then-delay':
      return { view: { kind: 'response', response: upstream, delayMs: action.delayMs }, applied: true, note: `held the response ${action.delayMs} ms` }
    case 'forward-then-drift':
      return drift(action.changes, upstream) ?? unchanged('the response is not JSON, or no drift path matched it')
    case 'forward-then-cut':
      return cut(action, upstream, unchanged)
    default:
      throw new TypeError(`applyAfterResponse: "${action.do}" acts before forwarding; carry it out before the request is sent`)
  }
}

function drift(changes: Extract<FaultAction, { do: 'forward-then-drift' }>['changes'], upstream: BufferedResponse): AppliedFault | undefined {
  let body: Uint8Array
  try {
    body = decodeContentEncoding(upstream.body, headerValue(upstream.headers, 'content-encoding'))
  } catch {
    return undefined
  }
  const text = tryUtf8(body)
  if (text === undefined) return undefined
  const result = driftJson(text, changes)
  if (result.changed.length === 0) return undefined
  const bytes = new TextEncoder().encode(result.text)
  // The body is now decoded and a different length: drop the coding and the upstream's framing, say the new length.
  const headers = withoutHeaders(upstream.headers, ['content-encoding', 'content-length', 'transfer-encoding'])
  headers.push(['content-length', String(bytes.byteLength)])
  return { view: { kind: 'response', response: { ...upstream, headers, body: bytes }, delayMs: 0 }, applied: true, note: result.changed.join(', ') }
}

function cut(action: Extract<FaultAction, { do: 'forward-then-cut' }>, upstream: BufferedResponse, unchanged: (note: string) => AppliedFault): AppliedFault {
  if ('events' in action.after) {
    if (!isEventStream(headerValue(upstream.headers, 'content-type'))) return unchanged('the response is not an event stream (text/event-stream)')
    const coding = headerValue(upstream.headers, 'content-encoding')
    if (coding !== undefined && coding.trim().toLowerCase() !== 'identity') return unchanged(`the event stream is ${coding}-encoded; cut it with afterBytes`)
  }
  const result = cutBody(upstream.body, action.after)
  const at = 'events' in action.after ? `${result.events} event(s)` : `${result.body.byteLength} byte(s)`
  // A clean end must lose something; a reset after the last byte is still a reset.
  if (action.error ? !result.reached : !result.cut) return unchanged(`the body ended before the cut point (${at})`)
  // The declared length no longer holds: a clean end is a chunked end, and a reset is a reset anyway.
  const partial = { ...upstream, headers: withoutHeaders(upstream.headers, ['content-length']), body: result.body, trailers: [] }
  if (action.error) return { view: { kind: 'error', error: action.error, partial }, applied: true, note: `reset after ${at}` }
  return { view: { kind: 'response', response: partial, delayMs: 0 }, applied: true, note: `ended cleanly after ${at}` }
}

function withoutHeaders(headers: HeaderPairs, names: string[]): HeaderPairs {
  return headers.filter(([k]) => !names.includes(k.toLowerCase()))
}
