import { resolve } from 'node:path'
import { mswHandlersFromTrace } from '../../interop/index.ts'
import { withReadOnlyStore } from '../open-store.ts'
import { writeAtomic } from '../write-file.ts'
import type { CommandModule } from './command.ts'

/** `tr-proxy export-msw TRACE --out handlers.ts`: MSW request handlers that answer as the trace did. */
export const exportMswCommand: CommandModule = {
  command: 'export-msw <trace>',
  describe: 'Generate MSW (msw 2.x/3.x) request handlers that reproduce a trace: statuses, headers, bodies, repeated-request sequences, network errors',
  builder: (y) =>
    y
      .positional('trace', { type: 'string', describe: 'Trace name' })
      .option('out', { alias: 'o', type: 'string', demandOption: true, describe: 'TypeScript file to write (e.g. test/handlers.ts)' }),
  run: async (args, io) =>
    withReadOnlyStore(args, async (store) => {
      const trace = await store.readTrace(String(args.trace))
      const file = resolve(String(args.out))
      await writeAtomic(file, mswHandlersFromTrace(trace))
      if (args.json) io.out(JSON.stringify({ ok: true, file, exchanges: trace.exchanges.length }))
      else io.out(`Wrote MSW handlers for trace "${trace.meta.name}" (${trace.exchanges.length} exchanges) to ${file}.`)
      return 0
    }),
}
