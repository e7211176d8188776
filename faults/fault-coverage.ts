/**
 * Coverage per fault rule: how many requests its target matched (eligible), how many its schedule chose
 * (selected) and how many it really faulted (triggered). A rule that never triggered fails the run unless it
 * is optional, so a misspelt target cannot pass silently.
 */
import { ErrorCodes, type FaultKind, ToolReplayError, textTable as table } from '../trace/index.ts'

/** Why a selected request was not faulted. */
export type MissReason = 'shadowed' | 'limit' | 'not-applicable'

/** One rule's counters. `selected` is null when it cannot be known (coverage read back from a trace). */
export interface RuleCoverage {
  rule: string
  fault: FaultKind
  target: string
  optional: boolean
  eligible: number
  selected: number | null
  triggered: number
  missed: Record<MissReason, number>
  /** The first few reasons a selected request was not faulted, for the report. */
  notes: string[]
}

const MAX_NOTES = 3

/** The accumulator the planner and the capture path feed. */
export class FaultCoverage {
  readonly #rules = new Map<string, RuleCoverage>()

  constructor(rules: ReadonlyArray<{ id: string; fault: FaultKind; target: { label: string }; optional: boolean }>) {
    for (const r of rules) {
      this.#rules.set(r.id, {
        rule: r.id,
        fault: r.fault,
        target: r.target.label,
        optional: r.optional,
        eligible: 0,
        selected: 0,
        triggered: 0,
        missed: { shadowed: 0, limit: 0, 'not-applicable': 0 },
        notes: [],
      })
    }
  }

  eligible(rule: string): void {
    this.#get(rule).eligible++
  }

  selected(rule: string): void {
    const c = this.#get(rule)
    c.selected = (c.selected ?? 0) + 1
  }

  triggered(rule: string): void {
    this.#get(rule).triggered++
  }

  missed(rule: string, reason: MissReason, note: string): void {
    const c = this.#get(rule)
    c.missed[reason]++
    if (c.notes.length < MAX_NOTES) c.notes.push(note)
  }

  /** A note with no count (a request the rule does not apply to matched its target), kept once. */
  noted(rule: string, note: string): void {
    const c = this.#get(rule)
    if (c.notes.length < MAX_NOTES && !c.notes.includes(note)) c.notes.push(note)
  }

  /** A copy of every rule's counters, in file order. */
  snapshot(): RuleCoverage[] {
    return [...this.#rules.values()].map((c) => ({ ...c, missed: { ...c.missed }, notes: [...c.notes] }))
  }

  #get(rule: string): RuleCoverage {
    const c = this.#rules.get(rule)
    if (!c) throw new TypeError(`FaultCoverage: unknown rule "${rule}"`)
    return c
  }
}

/** The rules that never triggered and are not optional. */
export function unfiredRules(coverage: ReadonlyArray<RuleCoverage>): RuleCoverage[] {
  return coverage.filter((c) => c.triggered === 0 && !c.optional)
}

/** Why a rule never fired, and what to check. */
export function unfiredReason(c: RuleCoverage): string {
  if (c.eligible === 0 && c.notes.length > 0) return `its target ${c.target} matched no request it applies to: ${c.notes.join('; ')}`
  if (c.eligible === 0) return `its target ${c.target} matched no request: check the method and URL pattern`
  // Coverage read back from a replayed trace: nobody selected anything, the notes say why nothing fired.
  if (c.selected === null && c.notes.length > 0) return c.notes.join('; ')
  if (c.selected === 0) return `its schedule chose none of the ${c.eligible} matching request(s): check calls, first, probability, window or quota`
  const missed = Object.entries(c.missed)
    .filter(([, n]) => n > 0)
    .map(([why, n]) => `${n} ${why}`)
  return `it was selected but never applied (${missed.join(', ') || 'no request reached it'})${c.notes.length ? `: ${c.notes.join('; ')}` : ''}`
}

/** A table of the counters, one row per rule, with why an unfired rule failed. */
export function formatCoverage(coverage: ReadonlyArray<RuleCoverage>): string {
  const rows = [['RULE', 'FAULT', 'TARGET', 'ELIGIBLE', 'SELECTED', 'TRIGGERED', '']]
  for (const c of coverage) {
    const status = c.triggered > 0 ? '' : c.optional ? 'never fired (optional)' : 'NEVER FIRED'
    rows.push([c.rule, c.fault, c.target, String(c.eligible), c.selected === null ? '-' : String(c.selected), String(c.triggered), status])
  }
  const lines = [table(rows)]
  for (const c of unfiredRules(coverage)) lines.push(`rule "${c.rule}" never fired: ${unfiredReason(c)}.`)
  return lines.join('\n')
}

/**
 * Throws TR_FAULT_NOT_FIRED when a non-optional rule never triggered; the message names each rule, why,
 * the seed and the command that reruns the run.
 */
export function assertAllRulesFired(coverage: ReadonlyArray<RuleCoverage>, run: { seed: string; rerun?: string }): void {
  const unfired = unfiredRules(coverage)
  if (unfired.length === 0) return
  const list = unfired.map((c) => `"${c.rule}" (${c.fault} on ${c.target}): ${unfiredReason(c)}`).join('; ')
  throw new ToolReplayError(
    ErrorCodes.FAULT_NOT_FIRED,
    `${unfired.length} fault rule(s) never fired, so the run did not test what they describe: ${list}. Fix the rule, or mark it optional: true. Faults seed ${run.seed}${run.rerun ? `; rerun: ${run.rerun}` : ''}.`,
    { details: { seed: run.seed, rerun: run.rerun, unfired: unfired.map((c) => c.rule), coverage } },
  )
}
