/**
 * How a faulted exchange is named wherever a trace is read (show, the LLM timeline, diff): the fault, its
 * rule, and what the upstream really did next to what the app was given.
 */
import type { ExchangeFault } from './exchange.ts'

/** "upstream 201", "upstream ECONNRESET", "not forwarded": what the upstream really did. */
export function upstreamPhrase(f: ExchangeFault): string {
  const u = f.upstream
  if (u === null) return 'not forwarded'
  return u.kind === 'response' ? `upstream ${u.response.status}` : `upstream ${u.error.code}`
}

/** "fault response_lost, rule lost-ack; upstream 201": a faulted exchange's tag. */
export function faultTag(f: ExchangeFault): string {
  return `fault ${f.kind}, rule ${f.rule}; ${upstreamPhrase(f)}`
}
