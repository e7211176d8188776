import { resolve } from 'node:path'
import { writeTraceFile } from '../../store/index.ts'
import { withReadOnlyStore } from '../open-store.ts'
import type { CommandModule } from './command.ts'

/** `tr-proxy export TRACE --out FILE`: a portable, deterministic trace file to commit and share. */
export const exportCommand: CommandModule = {
  command: 'export <trace>',
  describe: 'Write a trace to a portable, deterministic trace file (bodies inline, large binaries as blobs/)',
  builder: (y) =>
    y
      .positional('trace', { type: 'string', describe: 'Trace name' })
      .option('out', { alias: 'o', type: 'string', demandOption: true, describe: 'File to write (e.g. traces/checkout.trace.json)' })
      .option('partial', {
        type: 'boolean',
        default: false,
        describe: 'Export the newest recording of that name that never completed (labelled partial in the file)',
      }),
  run: async (args, io) =>
    withReadOnlyStore(args, async (store) => {
      const partial = args.partial === true
      const read = await store.readTrace(String(args.trace), { partial })
      // A partial recording says so in the file: importing it must not pass it off as a complete run.
      const trace = partial ? { ...read, meta: { ...read.meta, labels: { ...read.meta.labels, partial: 'true' } } } : read
      const file = resolve(String(args.out))
      const result = await writeTraceFile(file, trace)
      if (args.json) io.out(JSON.stringify({ ok: true, file, digest: result.digest, exchanges: trace.exchanges.length }))
      else io.out(`Exported trace "${trace.meta.name}" (${trace.exchanges.length} exchanges, digest ${result.digest.slice(0, 12)}) to ${file}`)
      return 0
    }),
}
