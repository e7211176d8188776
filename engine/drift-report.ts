/**
 * The drift report of `tr-proxy drift`: per trace, per exchange, whether the live answer kept the recorded
 * shape (trace/shape-drift.ts), or why it was not re-sent. Stable JSON (DRIFT_FORMAT_VERSION) and a text form.
 * Pure: the caller plans (drift-plan.ts), re-sends (proxy/live-resend.ts) and hands the answers in.
 */
import { compareExchangeShapes, type Exchange, formatShapeDrift, type ShapeDrift, type ToolReplayError, type Trace } from '../trace/index.ts'
import { type DriftRequestKind, type PlannedExchange, recordedUpstream } from './drift-plan.ts'

/**
 * Version of `tr-proxy drift --json`. Bumped on any breaking change. 2: an exchange whose server could not be
 * reached is `status: "unreachable"` (counted in `unreachable`, and `report.unreachable`), no longer drift or
 * failed. A version 1 report has none of these: its `drift` may count servers that were only unreachable, so a
 * reader of both treats a missing `unreachable` as unknown (re-run `tr-proxy drift` to tell), not as false.
 */
export const DRIFT_FORMAT_VERSION = 2 as const

/** One exchange in the report. */
export interface DriftedExchange {
  seq: number
  /** "GET https://api.test/items/1 #0". */
  exchange: string
  kind: DriftRequestKind
  /**
   * drift: the shape changed; same: it did not; skipped: not re-sent (see `reason`); failed: re-sent but not
   * recorded; unreachable: the server could not be reached (DNS, a refused connection, a timeout: `reason` says
   * which), so nothing was compared.
   */
  status: 'drift' | 'same' | 'skipped' | 'failed' | 'unreachable'
  reason?: string
  /** How the answers were compared: over HTTP, as model calls (the LLM view), or as MCP messages. */
  compared?: 'http' | 'llm' | 'mcp'
  changes: ShapeDrift[]
  /** What was not compared, or what the re-sent request lacked (a redacted credential). */
  notes: string[]
  truncated?: boolean
}

/** One trace in the report. */
export interface TraceDriftReport {
  trace: string
  /** Re-sent live (drift + same + failed + unreachable). */
  checked: number
  drifted: number
  skipped: number
  failed: number
  /** Re-sent but the server could not be reached: not drift, nothing was compared. */
  unreachable: number
  /** Where `--update` wrote the new trace (a store name or a file), when it did. */
  updated?: string
  exchanges: DriftedExchange[]
}

/** The whole report. */
export interface DriftReport {
  format: 'tool-replay-drift'
  version: typeof DRIFT_FORMAT_VERSION
  /** True when any exchange drifted or failed. */
  drift: boolean
  /** True when the server of any re-sent exchange could not be reached (offline, DNS, refused, timeout). */
  unreachable: boolean
  traces: TraceDriftReport[]
}

/** A live answer per re-sent seq: the live exchange (in `trace`) or the error that kept it from being recorded. */
export type LiveAnswers = ReadonlyMap<number, { trace: Trace; exchange: Exchange } | { error: ToolReplayError }>

/** Compares each re-sent exchange of `recorded` with its live answer. */
export function traceDriftReport(recorded: Trace, plan: readonly PlannedExchange[], live: LiveAnswers): TraceDriftReport {
  const exchanges = plan.map((p): DriftedExchange => {
    const base = { seq: p.seq, exchange: p.label, kind: p.kind }
    if (!p.send) return { ...base, status: 'skipped', reason: p.reason, changes: [], notes: [] }
    const answer = live.get(p.seq)
    const x = recorded.exchanges.find((e) => e.seq === p.seq)
    const upstream = x && recordedUpstream(x)
    if (!answer || !upstream || 'error' in answer) {
      const reason = answer && 'error' in answer ? `${answer.error.code}: ${answer.error.message}` : 'no live answer'
      return { ...base, status: 'failed', reason, changes: [], notes: p.notes }
    }
    const cut = unreachableCause(upstream, answer.exchange)
    if (cut) return { ...base, status: 'unreachable', reason: cut, changes: [], notes: p.notes }
    const r = compareExchangeShapes({ trace: recorded, exchange: upstream }, answer)
    return {
      ...base,
      status: r.changes.length > 0 ? 'drift' : 'same',
      compared: r.compared,
      changes: r.changes,
      notes: [...p.notes, ...r.notes],
      ...(r.truncated ? { truncated: true } : {}),
    }
  })
  const count = (s: DriftedExchange['status']) => exchanges.filter((e) => e.status === s).length
  return {
    trace: recorded.meta.name,
    checked: exchanges.length - count('skipped'),
    drifted: count('drift'),
    skipped: count('skipped'),
    failed: count('failed'),
    unreachable: count('unreachable'),
    exchanges,
  }
}

/** The report of several traces. */
export function driftReport(traces: TraceDriftReport[]): DriftReport {
  return {
    format: 'tool-replay-drift',
    version: DRIFT_FORMAT_VERSION,
    drift: traces.some((t) => t.drifted > 0 || t.failed > 0),
    unreachable: traces.some((t) => t.unreachable > 0),
    traces,
  }
}

/** The report as text: a summary line per trace, then each exchange with its changes and notes. */
export function formatDriftText(report: DriftReport): string {
  const lines: string[] = []
  for (const t of report.traces) {
    const failed = t.failed > 0 ? `, ${t.failed} failed` : ''
    const unreachable = t.unreachable > 0 ? `, ${t.unreachable} unreachable` : ''
    const unchanged = t.checked - t.drifted - t.failed - t.unreachable
    lines.push(
      `drift of trace "${t.trace}": ${t.checked} re-sent live, ${t.drifted} drifted${failed}${unreachable}, ${unchanged} unchanged, ${t.skipped} skipped`,
    )
    for (const e of t.exchanges) {
      const tag = { drift: 'DRIFT', same: 'same ', skipped: 'skip ', failed: 'FAIL ', unreachable: 'UNREACHABLE' }[e.status]
      lines.push(`  ${tag} ${e.exchange}${e.reason ? `: ${e.reason}` : ''}`)
      for (const c of e.changes) lines.push(`      ${formatShapeDrift(c)}`)
      if (e.truncated) lines.push('      … (more changes, or a body too big to take its whole shape)')
      for (const n of e.notes) lines.push(`      note: ${n}`)
    }
    if (t.updated) lines.push(`  live answers written to ${t.updated} (the recorded trace is unchanged)`)
    if (t.checked === 0) lines.push('  nothing was re-sent: every exchange was skipped (see the reasons above)')
    if (t.unreachable > 0) {
      lines.push(
        `  ${t.unreachable} exchange(s) unreachable: the server could not be reached from here (offline, DNS, a refused connection or a timeout), so they were not compared. This is not drift: run drift where the servers are reachable (or map them with --resolve).`,
      )
    }
  }
  return lines.join('\n')
}

/** Live errors that mean the server was never reached (or never answered), as Node and undici report them. */
const UNREACHABLE_CODES = new Set([
  'ENOTFOUND',
  'EAI_AGAIN',
  'EAI_FAIL',
  'ECONNREFUSED',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EHOSTDOWN',
  'ENETDOWN',
  'ETIMEDOUT',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
])

/**
 * Why the live answer says nothing about the server's shape: it failed before a response head with an error of
 * reachability (UNREACHABLE_CODES). Undefined when it answered, failed otherwise, or failed just as recorded.
 */
function unreachableCause(recorded: Exchange, live: Exchange): string | undefined {
  if (live.outcome.kind !== 'error') return undefined
  const { code, message, phase } = live.outcome.error
  if (phase === 'response-body' || !UNREACHABLE_CODES.has(code)) return undefined
  if (recorded.outcome.kind === 'error' && recorded.outcome.error.code === code) return undefined
  return `${code} during ${phase}: ${message}`
}
