import { mkdir, writeFile } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { formatLabRun, labRunJson, parsePolicies, RECOVERY_POLICIES, runLab, SCENARIO_NAMES } from '../../lab/index.ts'
import { writeTraceFile } from '../../store/index.ts'
import type { Args, CommandModule } from './command.ts'

/** `tr-proxy demo --scenario lost_ack --policy all`: the fault lab. */
export const demoCommand: CommandModule = {
  command: 'demo',
  describe: 'The fault lab: a bundled shipping API and agent under a seeded fault, one line per recovery policy',
  builder: (y) =>
    y
      .option('scenario', { type: 'string', default: 'lost_ack', describe: `Scenario: ${SCENARIO_NAMES.join(', ')} or all` })
      .option('policy', { type: 'string', default: 'all', describe: `Recovery policy: ${RECOVERY_POLICIES.join(', ')} or all (comma-separated)` })
      .option('seed', { type: 'string', describe: "Faults seed (default: the scenario's, 42)" })
      .option('probability', { type: 'number', describe: "Fault each call with this probability (0-1) instead of the scenario's schedule" })
      .option('call-budget', { type: 'number', describe: 'The agent may make at most this many calls (checked as a max-calls contract)' })
      .option('out', { type: 'string', describe: 'Write each run as DIR/<scenario>-<policy>.trace.json and the scenario as DIR/<scenario>.faults.yaml' }),
  run: async (args, io) => {
    const scenarios = args.scenario === 'all' ? SCENARIO_NAMES : [String(args.scenario)]
    const policies = parsePolicies(String(args.policy))
    const out = typeof args.out === 'string' && args.out !== '' ? resolve(args.out) : undefined
    const results = []
    for (const scenario of scenarios) {
      const run = await runLab({
        scenario,
        policies,
        ...(typeof args.seed === 'string' ? { seed: args.seed } : {}),
        ...(typeof args.probability === 'number' ? { probability: args.probability } : {}),
        ...(typeof args['call-budget'] === 'number' ? { callBudget: args['call-budget'] } : {}),
        argv: rerunArgv(args, scenario),
      })
      if (out) {
        await mkdir(out, { recursive: true })
        await writeFile(join(out, `${run.scenario}.faults.yaml`), run.faults)
        for (const r of run.runs) await writeTraceFile(join(out, `${run.scenario}-${r.policy}.trace.json`), r.trace)
      }
      results.push(run)
      if (!args.json) io.out(`${scenarios.length > 1 && results.length > 1 ? '\n' : ''}${formatLabRun(run)}`)
    }
    if (args.json) io.out(JSON.stringify({ ok: true, scenarios: results.map(labRunJson), ...(out ? { out } : {}) }))
    // The lab shows failing policies on purpose: its exit code says it ran, not how the agents fared.
    return 0
  },
}

/** The command that reruns one scenario of this invocation. */
function rerunArgv(args: Args, scenario: string): string[] {
  const knobs = [
    ...(typeof args.probability === 'number' ? ['--probability', String(args.probability)] : []),
    ...(typeof args['call-budget'] === 'number' ? ['--call-budget', String(args['call-budget'])] : []),
  ]
  return ['tr-proxy', 'demo', '--scenario', scenario, '--policy', String(args.policy), ...knobs]
}
