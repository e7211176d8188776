/**
 * The lab page: runs the bundled `demo` scenarios (lab/) with the page's seed, probability and call budget,
 * and keeps the last few results so a chosen policy's trace can be downloaded as a trace file.
 */
import { findScenario, type LabRun, labRunJson, parsePolicies, runLab } from '../lab/index.ts'
import { exportTrace } from '../store/index.ts'
import { ErrorCodes, shellLine, ToolReplayError } from '../trace/index.ts'

const KEEP = 8

/** What the page asks the lab for (its URL's query). */
export interface LabRequest {
  scenario: string
  policy?: string
  seed?: string
  probability?: number
  callBudget?: number
}

/** Lab results of this inspector, by id. */
export class LabRuns {
  readonly #runs = new Map<string, LabRun>()
  #next = 1

  /** Runs a scenario; returns its JSON form (as `demo --json`), an id for the traces and the equivalent command. */
  async run(r: LabRequest): Promise<Record<string, unknown>> {
    findScenario(String(r.scenario))
    const policies = parsePolicies(r.policy ?? 'all')
    const argv = [
      'tr-proxy',
      'demo',
      '--scenario',
      String(r.scenario),
      '--policy',
      r.policy ?? 'all',
      ...(r.seed !== undefined && r.seed !== '' ? ['--seed', String(r.seed)] : []),
      ...(r.probability !== undefined ? ['--probability', String(r.probability)] : []),
      ...(r.callBudget !== undefined ? ['--call-budget', String(r.callBudget)] : []),
    ]
    const run = await runLab({
      scenario: String(r.scenario),
      policies,
      ...(r.seed !== undefined && r.seed !== '' ? { seed: String(r.seed) } : {}),
      ...(r.probability !== undefined ? { probability: Number(r.probability) } : {}),
      ...(r.callBudget !== undefined ? { callBudget: Number(r.callBudget) } : {}),
      argv,
    })
    const id = String(this.#next++)
    this.#runs.set(id, run)
    for (const old of [...this.#runs.keys()].slice(0, Math.max(0, this.#runs.size - KEEP))) this.#runs.delete(old)
    return { id, command: shellLine(argv), ...labRunJson(run) }
  }

  /** A policy's trace of a lab result as a trace file's text. */
  traceFile(id: string, policy: string): { name: string; text: string } {
    const run = this.#runs.get(id)
    const p = run?.runs.find((x) => x.policy === policy)
    if (!run || !p) {
      throw new ToolReplayError(
        ErrorCodes.TRACE_NOT_FOUND,
        `Lab result ${id} has no run of policy "${policy}" (the inspector keeps the last ${KEEP} results). Run the lab again.`,
      )
    }
    return { name: `${run.scenario}-${policy}.trace.json`, text: exportTrace(p.trace, { inlineLimit: Number.MAX_SAFE_INTEGER }).text }
  }
}
