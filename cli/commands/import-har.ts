import { readFile, stat } from 'node:fs/promises'
import { resolve } from 'node:path'
import { Redactor, redactTrace } from '../../engine/index.ts'
import { DEFAULT_HAR_LIMITS, traceFromHar } from '../../interop/index.ts'
import { ErrorCodes, ToolReplayError } from '../../trace/index.ts'
import { withStore } from '../open-store.ts'
import { redactedNote, redactionFromArgs, redactionOptions } from '../redaction-flags.ts'
import type { CommandModule } from './command.ts'

/** `tr-proxy import-har FILE.har --as NAME`: a HAR (Chrome DevTools, Playwright) as a trace, secrets redacted. */
export const importHarCommand: CommandModule = {
  command: 'import-har <file>',
  describe: 'Import a HAR 1.2 file (Chrome DevTools, Playwright recordHar, export-har) as a trace; credentials are redacted as when recording',
  builder: (y) =>
    redactionOptions(y)
      .positional('file', { type: 'string', describe: 'HAR file' })
      .option('as', { type: 'string', demandOption: true, describe: 'Trace name to store it under' })
      .option('force', { type: 'boolean', default: false, describe: 'Replace an existing trace of that name' }),
  run: async (args, io) => {
    const file = resolve(String(args.file))
    const text = await readHar(file)
    // Converted and checked whole before the store is touched: a bad HAR never half-imports.
    const converted = traceFromHar(text, { name: String(args.as), source: file })
    const { skipped } = converted
    const { trace, changed } = redactTrace(converted.trace, new Redactor(await redactionFromArgs(args)))
    return withStore(args, async (store) => {
      await store.putTrace(trace, { overwrite: Boolean(args.force) })
      if (args.json) {
        io.out(JSON.stringify({ ok: true, trace: trace.meta.name, exchanges: trace.exchanges.length, redacted: changed, skipped }))
        return 0
      }
      io.out(`Imported ${file} as trace "${trace.meta.name}" (${trace.exchanges.length} exchanges).${redactedNote(changed)}`)
      for (const s of skipped) io.out(`  skipped log.entries[${s.entry}] ${s.url.slice(0, 80)}: ${s.reason}`)
      return 0
    })
  },
}

async function readHar(file: string): Promise<string> {
  let size: number
  try {
    size = (await stat(file)).size
  } catch (err) {
    throw new ToolReplayError(ErrorCodes.HAR_INVALID, `Failed to read HAR ${file}: ${(err as Error).message}. Check the path.`, { cause: err })
  }
  // Checked before reading: the reader's own limit counts characters, and this keeps a huge file out of memory.
  if (size > DEFAULT_HAR_LIMITS.maxTextLength) {
    throw new ToolReplayError(
      ErrorCodes.HAR_INVALID,
      `HAR ${file} is ${size} bytes, over the limit of ${DEFAULT_HAR_LIMITS.maxTextLength}. Split it into smaller files (e.g. one per page).`,
      { details: { source: file, field: '' } },
    )
  }
  return readFile(file, 'utf8')
}
