import { resolve } from 'node:path'
import { checkContracts, FAULTS_FILE_ENV, FAULTS_OPTIONS, formatContractReport, readFaultsFile } from '../../faults/index.ts'
import { ErrorCodes, optionsFromFlags, ToolReplayError } from '../../trace/index.ts'
import { declareOptions } from '../declared-options.ts'
import { EXIT_CODES } from '../exit-codes.ts'
import { withTraceLoader } from '../trace-args.ts'
import type { CommandModule } from './command.ts'

/** Exit code when a contract is violated. */
export const CHECK_EXIT_VIOLATED = EXIT_CODES[ErrorCodes.CONTRACT_VIOLATED]

/** `tr-proxy check TRACE --contracts FILE`: behaviour contracts (duplicate effects, retries, Retry-After, ...) on a trace. */
export const checkCommand: CommandModule = {
  command: 'check <trace>',
  describe: `Check behaviour contracts (no-duplicate-effects, max-calls, honours-retry-after, bounded-retries, all-rules-fired) on a trace; exit ${CHECK_EXIT_VIOLATED} on a violation`,
  builder: (y) =>
    declareOptions(y, FAULTS_OPTIONS, ['contracts']).positional('trace', { type: 'string', describe: 'A trace name in the store, or a .json trace file' }),
  run: async (args, io) => {
    const file = optionsFromFlags(FAULTS_OPTIONS, args).contracts || process.env[FAULTS_FILE_ENV]
    if (!file) {
      throw new ToolReplayError(
        ErrorCodes.INVALID_OPTION,
        `tr-proxy check needs contracts: pass --contracts FILE (a faults file with a "contracts" list), or set ${FAULTS_FILE_ENV}.`,
      )
    }
    const config = await readFaultsFile(resolve(file))
    if (config.contracts.length === 0) {
      throw new ToolReplayError(
        ErrorCodes.INVALID_FAULTS,
        `Faults file ${config.source} has no contracts to check. Add e.g. contracts: [no-duplicate-effects, honours-retry-after, { bounded-retries: 3 }, all-rules-fired].`,
        { details: { source: config.source } },
      )
    }
    const name = String(args.trace)
    const report = await withTraceLoader({ store: args.store }, [name], async (load) => checkContracts(await load(name), config))
    const exitCode = report.ok ? 0 : CHECK_EXIT_VIOLATED
    if (args.json) io.out(JSON.stringify({ ...report, contractsFile: config.source, exitCode }))
    else io.out(formatContractReport(report))
    return exitCode
  },
}
