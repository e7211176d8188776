/** A trace diff as text: each difference and detail on a line, the first divergence and what explains it first. */
import { type Attribution, DIFFERENCE_KINDS, type DiffDetail, type DifferenceKind, type FaultNote, type TraceDiff, type TraceDifference } from './diff-types.ts'
import { canonicalJson } from './json-codec.ts'

/** "fault response_lost (rule lost-ack, after-response) on b #0; upstream 201". */
export function formatFaultNote(n: FaultNote): string {
  return `fault ${n.fault} (rule ${n.rule}, ${n.phase}) on ${n.trace} #${n.seq}; ${n.upstream}`
}

export function make(
  kind: DifferenceKind,
  exchange: string,
  a: number | undefined,
  b: number | undefined,
  details: DiffDetail[],
  attr: Attribution[] | undefined,
): TraceDifference {
  // Built in a fixed key order so the JSON output reads the same way every time.
  const d = { kind, exchange } as TraceDifference
  if (a !== undefined) d.a = a
  if (b !== undefined) d.b = b
  d.summary = ''
  d.details = details
  if (attr) d.attribution = attr
  d.summary = summaryLine(d)
  return d
}

/** "response $.active: true → false", "response status: 200 → 503", "request header x-a: 1 → 2". */
export function formatDetail(d: DiffDetail): string {
  const arrow = `${show(d.before)} → ${show(d.after)}`
  switch (d.field) {
    case 'body':
      return d.path ? `${d.side} ${d.path}: ${arrow}` : `${d.side} body: ${arrow}`
    case 'events':
      return `${d.side} events ${d.path}: ${arrow}`
    case 'header':
    case 'trailer':
      return `${d.side} ${d.field} ${d.path}: ${arrow}`
    case 'position':
      return `position: a index ${String(d.before)} → b index ${String(d.after)}`
    default:
      return `${d.side} ${d.field}: ${arrow}`
  }
}

function summaryLine(d: TraceDifference): string {
  if (d.kind === 'exchange_missing') return `${d.exchange} missing in b`
  if (d.kind === 'exchange_added') return `${d.exchange} added in b`
  const first = d.details[0]
  return first ? `${d.exchange} ${formatDetail(first)}` : d.exchange
}

function show(v: unknown): string {
  if (v === undefined) return '(absent)'
  const s = typeof v === 'string' && v.startsWith('<') && v.endsWith('>') ? v : canonicalOrString(v)
  return s.length > 80 ? `${s.slice(0, 77)}...` : s
}

function canonicalOrString(v: unknown): string {
  try {
    return canonicalJson(v)
  } catch {
    return String(v)
  }
}

function formatAttribution(at: Attribution): string {
  return `from patch ${at.patchId}${at.spec ? ` (${at.spec})` : ''} on ${at.trace} #${at.seq}`
}

/** " [from patch ...]" or " [fault ...]" after the first divergence: what a reader must see first. */
export function firstNote(d: Pick<TraceDifference, 'attribution' | 'faults'>): string {
  const attr = d.attribution?.[0]
  if (attr) return ` [${formatAttribution(attr)}]`
  const fault = d.faults?.[0]
  return fault ? ` [${formatFaultNote(fault)}]` : ''
}

/** Deterministic text of a diff (snapshot-testable): header, first divergence, then every difference. */
export function formatDiffText(diff: TraceDiff): string {
  const lines: string[] = []
  const n = diff.differences.length
  const kinds = DIFFERENCE_KINDS.filter((k) => diff.counts[k] > 0).map((k) => `${diff.counts[k]} ${k}`)
  const count = (n: number) => `${n} exchange${n === 1 ? '' : 's'}`
  lines.push(`diff a "${diff.a.name}" (${count(diff.a.exchanges)}) → b "${diff.b.name}" (${count(diff.b.exchanges)})`)
  if (n === 0) {
    lines.push('no differences')
    return lines.join('\n')
  }
  lines.push(`${n} difference${n === 1 ? '' : 's'}: ${kinds.join(', ')}`)
  const first = diff.first as TraceDifference
  lines.push(`first divergence: ${first.summary}${firstNote(first)}`)
  for (const d of diff.differences) {
    const where = [d.a !== undefined ? `a #${d.a}` : undefined, d.b !== undefined ? `b #${d.b}` : undefined].filter(Boolean).join(', ')
    lines.push('', `${d.kind} ${d.exchange} (${where})`)
    for (const x of d.details) lines.push(`  ${formatDetail(x)}`)
    for (const at of d.attribution ?? []) lines.push(`  ${formatAttribution(at)}`)
    for (const f of d.faults ?? []) lines.push(`  ${formatFaultNote(f)}`)
  }
  return lines.join('\n')
}
