/**
 * Runs a lab scenario: for each recovery policy, a fresh shipping API, a fresh clock and a fresh planner from
 * the scenario's faults file; the agent ships one order; the recorded trace is checked against the contracts
 * and the agent's answer against what the API committed. One line per policy.
 */
import { type ContractReport, checkContracts, type FaultsConfig, parseFaults, rerunCommand, resolveSeed, type SeedSource, seedLine } from '../faults/index.ts'
import { install } from '../interceptor/index.ts'
import { createMemoryStore } from '../store/index.ts'
import { ErrorCodes, ToolReplayError, type Trace } from '../trace/index.ts'
import { type AgentResult, POLICIES, RECOVERY_POLICIES, type RecoveryPolicy, shipOrder } from './agent.ts'
import { SCENARIO_NAMES, SCENARIOS, type Scenario } from './scenarios.ts'
import { RATES, startShippingApi } from './shipping-api.ts'
import { VirtualClock } from './virtual-clock.ts'

/** The agent must confirm within this much lab time. */
export const LAB_DEADLINE_MS = 20_000
const ORDER = 'o-1'

/** One policy's run. */
export interface PolicyRun {
  policy: RecoveryPolicy
  label: string
  verdict: 'PASS' | 'FAIL'
  /** Requests the agent made (exchanges in the trace). */
  calls: number
  /** Distinct shipments committed, from the trace's commit evidence. */
  shipments: number
  /** Shipments the API itself committed (its own ledger): the ground truth the evidence must match. */
  committed: string[]
  /** Requests that reached the API: faults that act before forwarding never get there. */
  apiRequests: number
  summary: string
  problems: string[]
  agent: AgentResult
  report: ContractReport
  /** Lab time the run took. */
  virtualMs: number
  trace: Trace
}

/** A scenario's run under the chosen policies. */
export interface LabRun {
  scenario: string
  story: string
  seed: string
  seedSource: SeedSource
  rerun: string
  faults: string
  runs: PolicyRun[]
  /** Wall-clock time for all the policies, ms. */
  realMs: number
}

/** Options of `runLab`. */
export interface LabOptions {
  scenario: string
  policies?: readonly RecoveryPolicy[]
  seed?: string
  /** Every rule of the scenario faults each call with this probability (0-1) instead of its own schedule. */
  probability?: number
  /** The agent may make at most this many calls: checked as a `max-calls` contract. */
  callBudget?: number
  /** The command as typed, for the rerun line. */
  argv?: readonly string[]
}

/** The scenario's faults file with the lab's knobs applied (probability, call budget). */
export function labConfig(scenario: Scenario, options: Pick<LabOptions, 'probability' | 'callBudget'> = {}): FaultsConfig {
  const config = parseFaults(scenario.faults, { source: `lab scenario ${scenario.name}` })
  const p = options.probability
  if (p !== undefined) {
    if (!(typeof p === 'number' && p >= 0 && p <= 1))
      throw new ToolReplayError(ErrorCodes.INVALID_OPTION, `Invalid probability ${String(p)}: give a number from 0 to 1.`)
    config.rules = config.rules.map((r) => {
      const { calls: _c, first: _f, window: _w, quota: _q, ...rest } = r
      return { ...rest, probability: p } as typeof r
    })
  }
  const budget = options.callBudget
  if (budget !== undefined) {
    if (!(Number.isSafeInteger(budget) && budget > 0))
      throw new ToolReplayError(ErrorCodes.INVALID_OPTION, `Invalid call budget ${String(budget)}: give a whole number > 0.`)
    config.contracts = [...config.contracts, { kind: 'max-calls', limit: budget }]
  }
  return config
}

/** Looks a scenario up; TR_INVALID_OPTION lists the ones that exist. */
export function findScenario(name: string): Scenario {
  const s = SCENARIOS.find((x) => x.name === name)
  if (!s) throw new ToolReplayError(ErrorCodes.INVALID_OPTION, `There is no lab scenario "${name}". Scenarios: ${SCENARIO_NAMES.join(', ')} (or all).`)
  return s
}

/** Runs one scenario under each policy, one after the other. */
export async function runLab(options: LabOptions): Promise<LabRun> {
  const scenario = findScenario(options.scenario)
  const config = labConfig(scenario, options)
  const { seed, source } = resolveSeed({
    ...(options.seed !== undefined ? { option: options.seed } : {}),
    ...(config.seed !== undefined ? { file: config.seed } : {}),
  })
  const policies = options.policies ?? RECOVERY_POLICIES
  const started = performance.now()
  const runs: PolicyRun[] = []
  for (const policy of policies) runs.push(await runPolicy(scenario, config, seed, policy))
  const argv = options.argv ?? [
    'tr-proxy',
    'demo',
    '--scenario',
    scenario.name,
    '--policy',
    policies.length === RECOVERY_POLICIES.length ? 'all' : policies.join(','),
    ...(options.probability !== undefined ? ['--probability', String(options.probability)] : []),
    ...(options.callBudget !== undefined ? ['--call-budget', String(options.callBudget)] : []),
  ]
  return {
    scenario: scenario.name,
    story: scenario.story,
    seed,
    seedSource: source,
    rerun: rerunCommand(argv, seed),
    faults: scenario.faults,
    runs,
    realMs: performance.now() - started,
  }
}

async function runPolicy(scenario: Scenario, config: FaultsConfig, seed: string, policy: RecoveryPolicy): Promise<PolicyRun> {
  const api = await startShippingApi()
  const clock = new VirtualClock()
  const name = `lab-${scenario.name}-${policy}`
  const store = createMemoryStore()
  // The real interceptor carries the faults out (the same wiring as install() in an app's tests), on the lab's clock.
  const tr = await install({
    mode: 'record',
    trace: name,
    store,
    global: false,
    faults: config,
    faultsSeed: seed,
    faultsClock: clock,
    labels: { recordedWith: 'lab' },
  })
  let agent: AgentResult
  try {
    agent = await shipOrder({ baseUrl: api.url, orderId: ORDER, policy, dispatcher: tr.dispatcher, clock })
  } finally {
    await tr.close()
    await api.close()
  }
  const virtualMs = clock.now()
  const trace = await store.readTrace(name)
  const report = checkContracts(trace, config)
  const shipments = new Set(report.effects.map((e) => e.id)).size
  const committed = api.shipments.map((s) => s.id)
  const apiRequests = api.requests
  const problems = judge(report, agent, committed, virtualMs)
  const faultHeldMs = trace.exchanges.find((x) => x.fault)?.timing.headersMs ?? 0
  const label = POLICIES[policy].label
  const summary = problems[0] ?? scenario.pass({ virtualMs, faultHeldMs })
  return {
    policy,
    label,
    verdict: problems.length ? 'FAIL' : 'PASS',
    calls: trace.exchanges.length,
    shipments,
    committed,
    apiRequests,
    summary,
    problems,
    agent,
    report,
    virtualMs,
    trace,
  }
}

const CONTRACT_PROBLEM: Record<string, string> = {
  'no-duplicate-effects': 'duplicate effect',
  'honours-retry-after': 'retried before Retry-After',
  'bounded-retries': 'too many retries',
  'all-rules-fired': 'the fault never fired',
  'max-calls': 'over the call budget',
}

/** Every problem with a run, the most serious first; none means PASS. */
function judge(report: ContractReport, agent: AgentResult, committed: string[], virtualMs: number): string[] {
  const problems = report.results.filter((r) => !r.ok).map((r) => CONTRACT_PROBLEM[r.kind] ?? r.contract)
  const cheapest = [...RATES].sort((a, b) => Number(a.price) - Number(b.price))[0]?.id
  if (agent.error !== undefined) problems.push('no confirmation')
  else {
    if (typeof agent.shipmentId !== 'string' || !committed.includes(agent.shipmentId))
      problems.push(`accepted a drifted answer (confirmed shipment ${String(agent.shipmentId)})`)
    if (agent.rateId !== cheapest) problems.push(`accepted a truncated stream (chose ${agent.rateId} from ${agent.ratesSeen} of ${RATES.length} rates)`)
    if (virtualMs > LAB_DEADLINE_MS) problems.push(`confirmed after ${(virtualMs / 1000).toFixed(1)} s (deadline ${LAB_DEADLINE_MS / 1000} s)`)
  }
  return problems
}

/** The printed form: a header with the seed, one line per policy, the rerun command. */
export function formatLabRun(run: LabRun): string {
  const width = Math.max(...run.runs.map((r) => r.label.length))
  const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`
  const lines = [`${run.scenario}: ${run.story}`, seedLine(run.seed, run.seedSource)]
  for (const r of run.runs) {
    lines.push(`${r.verdict}  ${r.label.padEnd(width)}  ${plural(r.calls, 'call').padEnd(7)} · ${plural(r.shipments, 'shipment').padEnd(11)} · ${r.summary}`)
  }
  lines.push(`rerun: ${run.rerun}`)
  return lines.join('\n')
}

/** The JSON form (traces left out; `--out` writes them). */
export function labRunJson(run: LabRun): Record<string, unknown> {
  return {
    scenario: run.scenario,
    story: run.story,
    seed: run.seed,
    seedSource: run.seedSource,
    rerun: run.rerun,
    realMs: Math.round(run.realMs * 10) / 10,
    policies: run.runs.map((r) => ({
      policy: r.policy,
      label: r.label,
      verdict: r.verdict,
      calls: r.calls,
      shipments: r.shipments,
      committed: r.committed,
      apiRequests: r.apiRequests,
      summary: r.summary,
      problems: r.problems,
      virtualMs: r.virtualMs,
      agent: r.agent,
      contracts: r.report.results,
      coverage: r.report.coverage,
    })),
  }
}
