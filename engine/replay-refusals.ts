/**
 * The errors strict replay refuses with: a request no recording matches, one recorded fewer times than it is sent,
 * an upgrade, and a connection that carries nothing a trace holds. Each names what was refused and how to fix it.
 */
import { ErrorCodes, ToolReplayError } from '../trace/index.ts'
import type { CapturedRequest, ConnectionRequest } from './decision.ts'
import type { Take } from './replay-index.ts'

/** The recorded exchanges closest to a missed request, with how each differs. */
export type Candidates = Array<{ request: string; differences: string[] }>

/**
 * The occurrences of a request a trace recorded `n` times, as every report numbers them: `#0`, `#1`, ... after
 * the request (`GET https://api.test/x #1`, as in `tr-proxy diff` and fork selectors); a lone `#N` is an exchange.
 */
export function occurrenceRange(n: number): string {
  return n === 1 ? '#0' : n === 2 ? '#0 and #1' : `#0 to #${n - 1}`
}

/** `request` (labelled `label`) matches no recording of trace `trace`; `candidates` are the closest. */
export function missError(trace: string, request: CapturedRequest, candidates: Candidates, label: string): ToolReplayError {
  const closest =
    candidates.length === 0
      ? `trace "${trace}" has no recorded exchanges`
      : `closest recorded: ${candidates.map((c) => `"${c.request}" (differs: ${c.differences.join('; ') || 'identity options'})`).join(', ')}`
  return new ToolReplayError(
    ErrorCodes.REPLAY_MISS,
    `Failed to replay "${label}": no recorded exchange in trace "${trace}" matches; ${closest}. Re-record with mode "record" (or \`tr-proxy record\`), use mode "update" to add it, or fix the request.`,
    { details: { request: { method: request.method, url: request.url }, candidates } },
  )
}

/** The request labelled `label` is sent more often than trace `trace` recorded it. */
export function exhaustedError(trace: string, label: string, taken: Extract<Take, { kind: 'exhausted' }>): ToolReplayError {
  return new ToolReplayError(
    ErrorCodes.REPLAY_EXHAUSTED,
    `Failed to replay "${label} #${taken.occurrence}": trace "${trace}" recorded this request ${taken.recorded} time(s) (${occurrenceRange(taken.recorded)}) and this is #${taken.occurrence}. Tool Replay never repeats a recording. Re-record the trace, or find why the app sends it more often (a retry loop?).`,
    { details: { request: label, recorded: taken.recorded, occurrence: taken.occurrence + 1 } },
  )
}

/** An upgrade (labelled `label`) that strict replay refuses: the plain-upgrade path records none. */
export function upgradeError(captured: CapturedRequest, label: string): ToolReplayError {
  return new ToolReplayError(
    ErrorCodes.REPLAY_MISS,
    `Failed to replay "${label}": upgrades (WebSocket) are not recorded, so strict replay refuses them. Run this part against a live service (mode "passthrough"), or keep WebSocket traffic out of the replayed run.`,
    { details: { request: { method: captured.method, url: captured.url }, upgrade: true } },
  )
}

/** A connection (labelled `label`: `TCP host:port (protocol)`) that carries nothing a trace holds. */
export function connectionError(c: ConnectionRequest, label: string): ToolReplayError {
  return new ToolReplayError(
    ErrorCodes.REPLAY_MISS,
    `Failed to replay a ${c.transport.toUpperCase()} connection to ${label.slice(4)}: a trace holds HTTP exchanges only, so strict replay has nothing to answer it with and closed it. ${c.remedy}`,
    { details: { connection: { transport: c.transport, host: c.host, port: c.port, protocol: c.protocol } } },
  )
}
