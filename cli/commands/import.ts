import { readdirSync, statSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { Redactor, redactTrace } from '../../engine/index.ts'
import { readTraceFile, traceDigest } from '../../store/index.ts'
import { assertTraceName, ErrorCodes, ToolReplayError, type Trace } from '../../trace/index.ts'
import { withStore } from '../open-store.ts'
import { redactedNote, redactionFromArgs, redactionOptions } from '../redaction-flags.ts'
import type { CommandModule } from './command.ts'

/** How deep a folder given to `import` is searched for trace files (traces/<area>/<name>.trace.json is two). */
const MAX_DEPTH = 8

/** The trace files named: each file as given, each folder's `*.trace.json` files (sorted, its sub-folders too). */
export function traceFilesIn(paths: readonly string[]): string[] {
  const files: string[] = []
  const walk = (dir: string, depth: number) => {
    for (const name of readdirSync(dir).sort()) {
      const path = join(dir, name)
      if (name === 'node_modules' || name.startsWith('.')) continue
      const st = statSync(path)
      if (st.isDirectory() && depth < MAX_DEPTH) walk(path, depth + 1)
      else if (st.isFile() && name.endsWith('.trace.json')) files.push(path)
    }
  }
  for (const given of paths) {
    const path = resolve(given)
    if (!statSync(path, { throwIfNoEntry: false })?.isDirectory()) {
      files.push(path)
      continue
    }
    const before = files.length
    walk(path, 0)
    if (files.length === before) {
      throw new ToolReplayError(
        ErrorCodes.USAGE,
        `Failed to import ${given}: the folder holds no *.trace.json file. Export traces with \`tr-proxy export NAME --out ${given}/NAME.trace.json\`.`,
      )
    }
  }
  return files
}

/** `tr-proxy import FILE|FOLDER... [--as NAME] [--force]`: load trace files into the store after verifying them all. */
export const importCommand: CommandModule = {
  command: 'import <files..>',
  describe:
    'Verify trace files (schema, body hashes, digest), redact them as a recording would, and load them into the store; a folder means every *.trace.json in it',
  builder: (y) =>
    redactionOptions(y)
      .positional('files', { type: 'string', array: true, describe: 'Trace files, or folders of them (traces/)' })
      .option('as', { type: 'string', describe: 'Store it under this name instead of the name in the file (one file only)' })
      .option('force', { type: 'boolean', default: false, describe: 'Replace existing traces of those names' }),
  run: async (args, io) => {
    const files = traceFilesIn((args.files as string[]).map(String))
    if (typeof args.as === 'string' && files.length !== 1) {
      throw new ToolReplayError(ErrorCodes.USAGE, `--as names one trace, but ${files.length} trace files were given. Import them one at a time to rename them.`)
    }
    // Verify and redact every file before touching the store: a bad file must never half-import.
    const redaction = new Redactor(await redactionFromArgs(args))
    const loaded: Array<{ file: string; trace: Trace; changed: number }> = []
    for (const file of files) {
      const read = await readTraceFile(file)
      if (typeof args.as === 'string') read.meta.name = args.as
      assertTraceName(read.meta.name, args.as === undefined ? `trace name in ${file}` : '--as trace name')
      const twin = loaded.find((l) => l.trace.meta.name === read.meta.name)
      if (twin)
        throw new ToolReplayError(ErrorCodes.USAGE, `Failed to import: ${twin.file} and ${file} both hold trace "${read.meta.name}". Import one of them.`)
      // A trace file may come from anywhere: it is redacted like a recording before the store sees it.
      const { trace, changed } = redactTrace(read, redaction)
      loaded.push({ file, trace, changed })
    }
    return withStore(args, async (store) => {
      if (!args.force) {
        // Every name checked before any is written, so a taken name leaves the store as it was.
        for (const { trace } of loaded) if (await store.hasTrace(trace.meta.name)) await store.putTrace(trace, { overwrite: false })
      }
      const done = []
      for (const { file, trace, changed } of loaded) {
        await store.putTrace(trace, { overwrite: Boolean(args.force) })
        done.push({ file, trace: trace.meta.name, digest: traceDigest(trace), exchanges: trace.exchanges.length, redacted: changed })
        if (!args.json) io.out(`Imported ${file} as trace "${trace.meta.name}" (${trace.exchanges.length} exchanges).${redactedNote(changed)}`)
      }
      if (args.json) {
        const { file: _file, ...one } = done[0] as (typeof done)[number]
        io.out(JSON.stringify(done.length === 1 ? { ok: true, ...one } : { ok: true, imported: done }))
      }
      return 0
    })
  },
}
