import { resolve } from 'node:path'
import { Redactor, redactTrace } from '../../engine/index.ts'
import { readTraceFile, traceDigest } from '../../store/index.ts'
import { assertTraceName } from '../../trace/index.ts'
import { withStore } from '../open-store.ts'
import { redactedNote, redactionFromArgs, redactionOptions } from '../redaction-flags.ts'
import type { CommandModule } from './command.ts'

/** `tr-proxy import FILE [--as NAME] [--force]`: load a trace file into the store after verifying it. */
export const importCommand: CommandModule = {
  command: 'import <file>',
  describe: 'Verify a trace file (schema, body hashes, digest), redact it as a recording would, and load it into the store',
  builder: (y) =>
    redactionOptions(y)
      .positional('file', { type: 'string', describe: 'Trace file' })
      .option('as', { type: 'string', describe: 'Store it under this name instead of the name in the file' })
      .option('force', { type: 'boolean', default: false, describe: 'Replace an existing trace of that name' }),
  run: async (args, io) => {
    const file = resolve(String(args.file))
    // Verify before touching the store: a bad file must never half-import.
    const read = await readTraceFile(file)
    if (typeof args.as === 'string') read.meta.name = args.as
    assertTraceName(read.meta.name, args.as === undefined ? 'trace name in the file' : '--as trace name')
    // A trace file may come from anywhere: it is redacted like a recording before the store sees it.
    const { trace, changed } = redactTrace(read, new Redactor(await redactionFromArgs(args)))
    return withStore(args, async (store) => {
      await store.putTrace(trace, { overwrite: Boolean(args.force) })
      const digest = traceDigest(trace)
      if (args.json) io.out(JSON.stringify({ ok: true, trace: trace.meta.name, digest, exchanges: trace.exchanges.length, redacted: changed }))
      else io.out(`Imported ${file} as trace "${trace.meta.name}" (${trace.exchanges.length} exchanges).${redactedNote(changed)}`)
      return 0
    })
  },
}
