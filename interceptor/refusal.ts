/**
 * Carries out an engine refusal on the interceptor path: the app's fetch gets the engine's refusal
 * response (403, `x-should-retry: false`, provider-shaped JSON; see engine/refusal.ts) instead of a
 * rejected fetch, which every LLM SDK takes for a connection error and retries.
 */
import { refusalPlayback } from '../engine/index.ts'
import type { ToolReplayError } from '../trace/index.ts'
import { playBack } from './playback.ts'
import type { ResponseSink } from './response-sink.ts'

/** Answers a refused request with the refusal response, played like any recorded response. */
export function sendRefusal(sink: ResponseSink, error: ToolReplayError): void {
  // One chunk, nothing recorded to wait for: no pacing applies.
  playBack(refusalPlayback(error), sink, { kind: 'none' })
}
