import { resolve } from 'node:path'
import { exportSource, useSyncPointReads, withWriteErrors, writeTraceFileFrom } from '../../store/index.ts'
import { boundHeapGrowth } from '../heap-growth.ts'
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
  run: async (args, io) => {
    boundHeapGrowth()
    // A body per exchange, each a block read: synchronous reads here (this process runs this one command).
    useSyncPointReads()
    return withReadOnlyStore(args, async (store) => {
      const partial = args.partial === true
      const reader = await store.openTrace(String(args.trace), { partial })
      const stored = reader.info.meta
      // A partial recording says so in the file: importing it must not pass it off as a complete run.
      const meta = partial ? { ...stored, labels: { ...stored.labels, partial: 'true' } } : stored
      const file = resolve(String(args.out))
      // Streamed from the store a page at a time: a trace of any length is exported in bounded memory (a big
      // one's bodies read in a second thread).
      const result = await withWriteErrors(file, () => writeTraceFileFrom(file, exportSource(store, reader, meta)))
      if (args.json) io.out(JSON.stringify({ ok: true, file, digest: result.digest, exchanges: result.exchanges }))
      else io.out(`Exported trace "${meta.name}" (${result.exchanges} exchanges, digest ${result.digest.slice(0, 12)}) to ${file}`)
      return 0
    })
  },
}
