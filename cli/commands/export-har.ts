import { resolve } from 'node:path'
import { formatHar, harFromTrace } from '../../interop/index.ts'
import { ErrorCodes, ToolReplayError } from '../../trace/index.ts'
import { withReadOnlyStore } from '../open-store.ts'
import { packageVersion } from '../package-version.ts'
import { writeAtomic } from '../write-file.ts'
import type { CommandModule } from './command.ts'

/** `tr-proxy export-har TRACE [--out FILE]`: a trace as HAR 1.2 for DevTools, Playwright and HAR viewers. */
export const exportHarCommand: CommandModule = {
  command: 'export-har <trace>',
  describe: 'Write a trace as a HAR 1.2 file (decoded bodies in content.text; _toolReplay keeps what HAR cannot)',
  builder: (y) =>
    y
      .positional('trace', { type: 'string', describe: 'Trace name' })
      .option('out', { alias: 'o', type: 'string', describe: 'File to write (default: standard output)' })
      .option('started-at', { type: 'string', describe: 'Wall-clock start of the trace for startedDateTime (ISO 8601; default the Unix epoch)' }),
  run: async (args, io) => {
    const startedAt = args['started-at'] === undefined ? 0 : Date.parse(String(args['started-at']))
    if (!Number.isFinite(startedAt)) {
      throw new ToolReplayError(
        ErrorCodes.INVALID_OPTION,
        `--started-at ${JSON.stringify(args['started-at'])} is not a date. Use ISO 8601, e.g. 2026-03-04T10:00:00Z.`,
      )
    }
    return withReadOnlyStore(args, async (store) => {
      const trace = await store.readTrace(String(args.trace))
      const text = formatHar(harFromTrace(trace, { startedAt, creatorVersion: packageVersion() }))
      if (args.out === undefined) {
        io.out(text)
        return 0
      }
      const file = resolve(String(args.out))
      await writeAtomic(file, text)
      if (args.json) io.out(JSON.stringify({ ok: true, file, exchanges: trace.exchanges.length }))
      else io.out(`Exported trace "${trace.meta.name}" (${trace.exchanges.length} exchanges) to ${file} as HAR 1.2.`)
      return 0
    })
  },
}
