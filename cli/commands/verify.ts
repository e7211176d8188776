import { resolve } from 'node:path'
import { verifyCase } from '../../cases/index.ts'
import type { CommandModule } from './command.ts'

/** `tr-proxy verify DIR`: integrity, strict replay, expectation. Exit 0, or the code of what broke (7/6/9/8). */
export const verifyCommand: CommandModule = {
  command: 'verify <dir>',
  describe: 'Verify a regression case: integrity (71), strict replay (69), app error (73), behavioural regression (72); never writes into the case',
  builder: (y) => y.positional('dir', { type: 'string', describe: 'Case directory (holds manifest.json)' }),
  run: async (args, io) => {
    const result = await verifyCase(resolve(String(args.dir)))
    if (args.json) io.out(JSON.stringify({ ok: true, case: result.name, kind: result.kind, actual: result.actual, replayed: result.summary.replayed }))
    else io.out(`Case "${result.name}" passed: ${result.summary.replayed} exchange(s) replayed strictly, result ${JSON.stringify(result.actual)} as expected.`)
    return 0
  },
}
