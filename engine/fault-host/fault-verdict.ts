/**
 * How a faulted run ended, judged once for every way of running one (the proxy CLI, the test setups):
 * rules that never fired fail it (TR_FAULT_NOT_FIRED) unless optional, and the contracts a faults file
 * declares are checked on the trace of the run (TR_CONTRACT_VIOLATED).
 */

import { assertAllRulesFired, type ContractReport, checkContracts, formatContractReport, formatCoverage, type RuleCoverage } from '../../faults/index.ts'
import { ErrorCodes, ToolReplayError } from '../../trace/index.ts'
import type { Session } from '../session.ts'

/** The end of a faulted run. */
export interface FaultVerdict {
  /** The seed line ("faults seed 42 (from the faults file)"), without a rerun command. */
  seedLine: string
  seed: string
  coverage: RuleCoverage[]
  /** Rules that never triggered and are not optional. */
  unfired: RuleCoverage[]
  /** The contracts checked on the trace of the run, when the faults file declares any. */
  contracts?: ContractReport
  /** Why declared contracts were not checked (a passthrough run keeps no trace). */
  contractsSkipped?: string
  ok: boolean
}

/** Judges a closed session's faults; undefined when it had none. Reads the run's trace when contracts are declared. */
export async function faultVerdict(session: Session): Promise<FaultVerdict | undefined> {
  const faults = session.faults
  if (!faults) return undefined
  const coverage = faults.coverage()
  const unfired = coverage.filter((c) => c.triggered === 0 && !c.optional)
  const verdict: FaultVerdict = { seedLine: faults.seedLine(), seed: faults.seed, coverage, unfired, ok: unfired.length === 0 }
  if (faults.config.contracts.length === 0) return verdict
  const name = session.observedTrace
  if (name === undefined) {
    verdict.contractsSkipped = `contracts not checked: a ${session.mode} run keeps no trace to check them on`
    return verdict
  }
  verdict.contracts = checkContracts(await session.store.readTrace(name), faults.config)
  verdict.ok &&= verdict.contracts.ok
  return verdict
}

/** The verdict as text: the coverage table, then the contract report. */
export function formatFaultVerdict(v: FaultVerdict): string {
  const lines = [formatCoverage(v.coverage)]
  if (v.contracts) lines.push(formatContractReport(v.contracts))
  if (v.contractsSkipped) lines.push(v.contractsSkipped)
  return lines.join('\n')
}

/**
 * The error a failed verdict is: TR_FAULT_NOT_FIRED when a rule never fired (the run did not test what it
 * claims), else TR_CONTRACT_VIOLATED; both name the seed and the command that reruns the run.
 */
export function faultVerdictError(v: FaultVerdict, rerun?: string): ToolReplayError | undefined {
  if (v.unfired.length > 0) {
    try {
      assertAllRulesFired(v.coverage, { seed: v.seed, ...(rerun !== undefined ? { rerun } : {}) })
    } catch (err) {
      return err as ToolReplayError
    }
  }
  const seed = `Faults seed ${v.seed}${rerun ? `; rerun: ${rerun}` : ''}.`
  if (v.contracts && !v.contracts.ok) {
    const failed = v.contracts.results.filter((r) => !r.ok)
    // The whole report is printed with the verdict; the error names each broken contract and its first violation.
    const list = failed.map((r) => `${r.contract} (${r.violations[0]?.message ?? r.summary})`).join('; ')
    return new ToolReplayError(
      ErrorCodes.CONTRACT_VIOLATED,
      `Trace "${v.contracts.trace}" breaks ${failed.length} behaviour contract(s): ${list}. Fix the app's recovery code (the exchanges are named), then run it again. ${seed}`,
      { details: { seed: v.seed, rerun, report: v.contracts } },
    )
  }
  return undefined
}
