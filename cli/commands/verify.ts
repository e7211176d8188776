import { resolve } from 'node:path'
import { verifyCase } from '../../cases/index.ts'
import { SEALED_OPTIONS } from '../../proxy/index.ts'
import { ErrorCodes } from '../../trace/index.ts'
import { declareOptions } from '../declared-options.ts'
import { EXIT_CODES } from '../exit-codes.ts'
import type { CommandModule } from './command.ts'

/** `tr-proxy verify DIR`: integrity, strict replay, expectation. Exit 0, or the code of what broke (cli/exit-codes.ts). */
export const verifyCommand: CommandModule = {
  command: 'verify <dir>',
  describe: `Verify a regression case: integrity (exit ${EXIT_CODES[ErrorCodes.CASE_INTEGRITY]}), strict replay (${EXIT_CODES[ErrorCodes.REPLAY_INCOMPLETE]}), app error (${EXIT_CODES[ErrorCodes.CASE_APP_ERROR]}), behavioural regression (${EXIT_CODES[ErrorCodes.CASE_REGRESSION]}); never writes into the case`,
  builder: (y) => declareOptions(y, SEALED_OPTIONS, ['sealed']).positional('dir', { type: 'string', describe: 'Case directory (holds manifest.json)' }),
  run: async (args, io) => {
    const result = await verifyCase(resolve(String(args.dir)), { sealed: args.sealed === true })
    if (args.json) io.out(JSON.stringify({ ok: true, case: result.name, kind: result.kind, actual: result.actual, replayed: result.summary.replayed }))
    else io.out(`Case "${result.name}" passed: ${result.summary.replayed} exchange(s) replayed strictly, result ${JSON.stringify(result.actual)} as expected.`)
    return 0
  },
}
