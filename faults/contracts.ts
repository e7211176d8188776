/**
 * Behaviour contracts checked on a trace (live, faulted or replayed): what the app did under faults, from
 * what the trace recorded. Pure. Each violation names the exchanges, the way a reviewer would point at them.
 */
import { ErrorCodes, type Exchange, headerValue, ToolReplayError, type Trace, textTable } from '../trace/index.ts'
import { callGroup, commitEvidence, type Effect, exchangeRef } from './commit-evidence.ts'
import { type RuleCoverage, unfiredReason } from './fault-coverage.ts'
import type { ContractSpec, FaultsConfig } from './fault-rules.ts'
import type { Target } from './fault-target.ts'

/** One violation: what happened, and the exchanges (by seq) it is about. */
export interface ContractViolation {
  message: string
  exchanges: number[]
}

/** The result of one contract. */
export interface ContractResult {
  /** "max-calls 5", "bounded-retries 2 (POST /shipments)" */
  contract: string
  kind: ContractSpec['kind']
  ok: boolean
  /** One line: what was found. */
  summary: string
  violations: ContractViolation[]
}

/** Every contract's result over one trace, with the commit evidence and rule coverage they used. */
export interface ContractReport {
  trace: string
  exchanges: number
  ok: boolean
  results: ContractResult[]
  effects: Effect[]
  coverage: RuleCoverage[]
  /** The fault seeds recorded in the trace (normally one). */
  seeds: string[]
}

/** Checks the contracts of a faults file against a trace. */
export function checkContracts(trace: Trace, config: Pick<FaultsConfig, 'contracts' | 'effects' | 'rules'>): ContractReport {
  const effects = commitEvidence(trace, config.effects)
  const coverage = coverageFromTrace(trace, config.rules)
  const results = config.contracts.map((c) => checkOne(trace, c, effects, coverage))
  const seeds = [...new Set(trace.exchanges.flatMap((x) => (x.fault ? [x.fault.seed] : [])))]
  return { trace: trace.meta.name, exchanges: trace.exchanges.length, ok: results.every((r) => r.ok), results, effects, coverage, seeds }
}

/** Checks, then throws TR_CONTRACT_VIOLATED with the formatted report when a contract failed. */
export function assertContracts(trace: Trace, config: Pick<FaultsConfig, 'contracts' | 'effects' | 'rules' | 'source'>): ContractReport {
  const report = checkContracts(trace, config)
  if (report.ok) return report
  const failed = report.results.filter((r) => !r.ok)
  throw new ToolReplayError(
    ErrorCodes.CONTRACT_VIOLATED,
    `Trace "${trace.meta.name}" breaks ${failed.length} behaviour contract(s) of ${config.source}:\n${formatContractReport(report)}\nFix the app's recovery code (the exchanges are named above), then record and check again.`,
    { details: { report } },
  )
}

function checkOne(trace: Trace, c: ContractSpec, effects: Effect[], coverage: RuleCoverage[]): ContractResult {
  switch (c.kind) {
    case 'no-duplicate-effects':
      return noDuplicateEffects(effects)
    case 'max-calls':
      return maxCalls(trace, c.limit, c.target)
    case 'honours-retry-after':
      return honoursRetryAfter(trace, c.toleranceMs, c.scope)
    case 'bounded-retries':
      return boundedRetries(trace, c.retries, c.target)
    case 'all-rules-fired':
      return allRulesFired(coverage)
  }
}

function result(kind: ContractSpec['kind'], contract: string, violations: ContractViolation[], passSummary: string): ContractResult {
  const summary = violations.length === 0 ? passSummary : violations.map((v) => v.message).join('; ')
  return { contract, kind, ok: violations.length === 0, summary, violations }
}

function noDuplicateEffects(effects: Effect[]): ContractResult {
  const groups = new Map<string, Effect[]>()
  for (const e of effects) {
    const key = `${e.name}\0${e.group}`
    groups.set(key, [...(groups.get(key) ?? []), e])
  }
  const violations: ContractViolation[] = []
  for (const list of groups.values()) {
    const byId = new Map<string, Effect>()
    for (const e of list) if (!byId.has(e.id)) byId.set(e.id, e)
    if (byId.size < 2) continue
    const firsts = [...byId.values()]
    const name = (firsts[0] as Effect).name
    const unseen = firsts.filter((e) => !e.seenByApp).map((e) => `#${e.seq}${e.fault ? ` (fault rule ${e.fault})` : ''}`)
    violations.push({
      message: `${andList(firsts.map((e) => e.label))} committed ${name} ${andList(firsts.map((e) => e.id))} for one call (${(firsts[0] as Effect).groupLabel})${unseen.length ? `; the app never got the answer of ${andList(unseen)}` : ''}`,
      exchanges: firsts.map((e) => e.seq),
    })
  }
  const distinct = new Set(effects.map((e) => `${e.name}\0${e.id}`)).size
  return result('no-duplicate-effects', 'no-duplicate-effects', violations, `${distinct} effect(s) committed, none twice for one call`)
}

function maxCalls(trace: Trace, limit: number, target: Target | undefined): ContractResult {
  const calls = trace.exchanges.filter((x) => !target || target.matches(x.request.method, x.request.url))
  const where = target ? ` to ${target.label}` : ''
  const violations =
    calls.length > limit
      ? [{ message: `${calls.length} calls${where} (${refsList(calls)}), at most ${limit} allowed`, exchanges: calls.map((x) => x.seq) }]
      : []
  return result('max-calls', `max-calls ${limit}${target ? ` (${target.label})` : ''}`, violations, `${calls.length} call(s)${where}, at most ${limit}`)
}

/** How long a response asked the client to wait, from retry-after-ms (as the openai and Anthropic SDKs read it first) or retry-after. */
export function requestedDelayMs(headers: Exchange['request']['headers']): { ms: number; header: string } | undefined {
  const ms = headerValue(headers, 'retry-after-ms')
  if (ms !== undefined && Number.isFinite(Number.parseFloat(ms)) && Number.parseFloat(ms) >= 0)
    return { ms: Number.parseFloat(ms), header: `retry-after-ms: ${ms}` }
  const after = headerValue(headers, 'retry-after')
  if (after === undefined) return undefined
  if (/^\s*\d+(\.\d+)?\s*$/.test(after)) return { ms: Number.parseFloat(after) * 1000, header: `retry-after: ${after}` }
  const date = Date.parse(after)
  const now = Date.parse(headerValue(headers, 'date') ?? '')
  // An HTTP date only means a delay relative to the response's own Date.
  return Number.isFinite(date) && Number.isFinite(now) ? { ms: Math.max(0, date - now), header: `retry-after: ${after}` } : undefined
}

function honoursRetryAfter(trace: Trace, toleranceMs: number, scope: 'call' | 'host'): ContractResult {
  const key = (x: Exchange) => (scope === 'host' ? hostOf(x) : callGroup(trace, x, undefined).group)
  const keys = trace.exchanges.map(key)
  const violations: ContractViolation[] = []
  let asked = 0
  trace.exchanges.forEach((x, i) => {
    if (x.outcome.kind !== 'response' || (x.outcome.response.status !== 429 && x.outcome.response.status < 500)) return
    const delay = requestedDelayMs(x.outcome.response.headers)
    if (!delay) return
    asked++
    const arrived = x.timing.startMs + x.timing.headersMs
    const j = keys.findIndex((k, n) => n > i && k === keys[i])
    const next = trace.exchanges[j]
    if (!next || next.timing.startMs + toleranceMs >= arrived + delay.ms) return
    violations.push({
      message: `${exchangeRef(next)} was sent ${fmtMs(next.timing.startMs - arrived)} after ${exchangeRef(x)} got ${x.outcome.response.status} asking to wait ${fmtMs(delay.ms)} (${delay.header})`,
      exchanges: [x.seq, next.seq],
    })
  })
  return result(
    'honours-retry-after',
    `honours-retry-after${scope === 'host' ? ' (per host)' : ''}`,
    violations,
    asked === 0 ? 'no response asked the app to wait' : `${asked} response(s) asked the app to wait; every retry waited`,
  )
}

function isFailure(x: Exchange): boolean {
  if (x.outcome.kind === 'error') return true
  const s = x.outcome.response.status
  return s === 408 || s === 409 || s === 425 || s === 429 || s >= 500
}

function boundedRetries(trace: Trace, retries: number, target: Target | undefined): ContractResult {
  // A retry is a request repeated after the previous attempt of the same call failed (an error, 408, 409,
  // 425, 429 or 5xx); a repeat after a success starts a new call.
  const open = new Map<string, { seqs: Exchange[]; failed: boolean }>()
  const chains: Exchange[][] = []
  for (const x of trace.exchanges) {
    if (target && !target.matches(x.request.method, x.request.url)) continue
    const key = callGroup(trace, x, undefined).group
    let chain = open.get(key)
    if (!chain?.failed) {
      chain = { seqs: [], failed: false }
      open.set(key, chain)
      chains.push(chain.seqs)
    }
    chain.seqs.push(x)
    chain.failed = isFailure(x)
  }
  const violations = chains
    .filter((c) => c.length - 1 > retries)
    .map((c) => ({
      message: `${refsList(c)}: ${c.length} attempts of one call (${c.length - 1} retries), at most ${retries} retr${retries === 1 ? 'y' : 'ies'} allowed`,
      exchanges: c.map((x) => x.seq),
    }))
  const longest = Math.max(0, ...chains.map((c) => c.length - 1))
  return result(
    'bounded-retries',
    `bounded-retries ${retries}${target ? ` (${target.label})` : ''}`,
    violations,
    `at most ${longest} retr${longest === 1 ? 'y' : 'ies'} of one call (${retries} allowed)`,
  )
}

function allRulesFired(coverage: RuleCoverage[]): ContractResult {
  const violations = coverage
    .filter((c) => c.triggered === 0 && !c.optional)
    .map((c) => ({ message: `rule "${c.rule}" (${c.fault} on ${c.target}) never fired: ${unfiredReason(c)}`, exchanges: [] }))
  const fired = coverage.filter((c) => c.triggered > 0)
  return result(
    'all-rules-fired',
    'all-rules-fired',
    violations,
    `${fired.length} of ${coverage.length} rule(s) fired${fired.length ? ` (${fired.map((c) => `${c.rule} ×${c.triggered}`).join(', ')})` : ''}`,
  )
}

/**
 * Rule coverage as a trace shows it: eligible = exchanges the target matches (and that carry the key
 * header, for keyed rules), triggered = exchanges whose fault record names the rule. Which requests were
 * selected is not recorded, so `selected` is null.
 */
export function coverageFromTrace(trace: Trace, rules: FaultsConfig['rules']): RuleCoverage[] {
  return rules.map((r) => ({
    rule: r.id,
    fault: r.fault,
    target: r.target.label,
    optional: r.optional,
    eligible: trace.exchanges.filter(
      (x) => r.target.matches(x.request.method, x.request.url) && (!r.key || headerValue(x.request.headers, r.key.header) !== undefined),
    ).length,
    selected: null,
    triggered: trace.exchanges.filter((x) => x.fault?.rule === r.id).length,
    missed: { shadowed: 0, limit: 0, 'not-applicable': 0 },
    notes: [],
  }))
}

/** The report as text: one line per contract, the effects, the seed, a verdict. */
export function formatContractReport(report: ContractReport): string {
  const rows = report.results.map((r) => [r.ok ? 'PASS' : 'FAIL', r.contract, r.summary])
  const lines = [`check "${report.trace}" (${report.exchanges} exchange${report.exchanges === 1 ? '' : 's'})`, textTable(rows)]
  if (report.effects.length > 0) {
    lines.push(
      `effects: ${report.effects.map((e) => `${e.name} ${e.id} by #${e.seq}${e.seenByApp ? '' : ` (the app never got the answer${e.fault ? `: fault rule ${e.fault}` : ''})`}`).join(', ')}`,
    )
  }
  if (report.seeds.length > 0) lines.push(`faults seed ${report.seeds.join(', ')} (recorded in the trace)`)
  const failed = report.results.filter((r) => !r.ok).length
  lines.push(failed === 0 ? `All ${report.results.length} contract(s) hold.` : `${failed} of ${report.results.length} contract(s) failed.`)
  return lines.join('\n')
}

function hostOf(x: Exchange): string {
  try {
    return new URL(x.request.url).host
  } catch {
    return x.request.url
  }
}

function refsList(xs: Exchange[]): string {
  const refs = xs.map(exchangeRef)
  const shown = refs.length > 6 ? [...refs.slice(0, 5), `... ${refs.length - 5} more`] : refs
  return andList(shown)
}

function andList(items: string[]): string {
  if (items.length <= 1) return items.join('')
  return `${items.slice(0, -1).join(', ')} and ${items.at(-1)}`
}

function fmtMs(ms: number): string {
  return ms >= 1000 ? `${(ms / 1000).toFixed(ms % 1000 === 0 ? 0 : 1)} s` : `${Math.round(ms)} ms`
}
