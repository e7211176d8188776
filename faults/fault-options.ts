/**
 * The options of a faulted run, declared once: the flags of `record`, `replay`, `serve` and `mcp` (and `check`'s,
 * `inspect`'s contracts), `install({ faults, faultsSeed })`, and their lines in docs/reference.md.
 */
import type { OptionDeclaration } from '../trace/index.ts'
import { FAULTS_FILE_ENV, FAULTS_SEED_ENV } from './fault-seed.ts'

/** A faults file, its seed, and the file whose contracts a check reads. */
export const FAULTS_OPTIONS = {
  faults: {
    flag: 'faults',
    type: 'string',
    help: 'Faults file (YAML or JSON): inject its faults into requests that go live (MCP: messages to the server, target { mcp: { tool: NAME } }), then fail the run when a rule never fired or a contract broke (strict replay injects none: it replays the faults a trace holds)',
  },
  faultsSeed: {
    flag: 'seed',
    type: 'string',
    help: `Faults seed (default $${FAULTS_SEED_ENV}, then the file's seed, then random); printed with the command that reruns the run`,
  },
  contracts: {
    flag: 'contracts',
    type: 'string',
    help: `Faults file (YAML or JSON) whose "contracts" (and "effects", "rules") are checked; default $${FAULTS_FILE_ENV}`,
  },
} as const satisfies Record<string, OptionDeclaration>
