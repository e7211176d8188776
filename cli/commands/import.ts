import { Redactor, redactTrace } from '../../engine/index.ts'
import { type StagedTrace, TraceDigester, TraceFileReader, type TraceStore, traceExists } from '../../store/index.ts'
import { assertTraceName, ErrorCodes, type Exchange, ToolReplayError, type TraceMeta } from '../../trace/index.ts'
import { boundHeapGrowth } from '../heap-growth.ts'
import { withStore } from '../open-store.ts'
import { redactedNote, redactionFromArgs, redactionOptions } from '../redaction-flags.ts'
import { traceFilesIn } from '../trace-args.ts'
import type { CommandModule } from './command.ts'

/**
 * Trace files of at least this size are read and verified in a worker thread while this one redacts and stores:
 * a million-exchange file (1 GB) imported in 69-77 s instead of 96, at about 420 MB peak RSS instead of 363 (the
 * thread's own heap; docs/store.md). A smaller file is done in seconds either way, and in less memory in one thread.
 */
const WORKER_FROM = 64 * 1024 * 1024

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
    boundHeapGrowth()
    const files = traceFilesIn((args.files as string[]).map(String), 'import')
    if (typeof args.as === 'string' && files.length !== 1) {
      throw new ToolReplayError(ErrorCodes.USAGE, `--as names one trace, but ${files.length} trace files were given. Import them one at a time to rename them.`)
    }
    const redaction = new Redactor(await redactionFromArgs(args))
    // Every file's header is checked and every name settled before anything is staged.
    const opened: Array<{ file: string; reader: TraceFileReader; meta: TraceMeta }> = []
    for (const file of files) {
      const reader = await TraceFileReader.open(file, { refBytes: true, workerFrom: WORKER_FROM })
      const meta = typeof args.as === 'string' ? { ...reader.meta, name: args.as } : reader.meta
      assertTraceName(meta.name, args.as === undefined ? `trace name in ${file}` : '--as trace name')
      const twin = opened.find((l) => l.meta.name === meta.name)
      if (twin) throw new ToolReplayError(ErrorCodes.USAGE, `Failed to import: ${twin.file} and ${file} both hold trace "${meta.name}". Import one of them.`)
      opened.push({ file, reader, meta })
    }
    return withStore(args, async (store) => {
      // Each file is staged (verified, redacted, written in batches) and only then are they committed: a file
      // that fails anywhere, its digest at the end included, leaves no trace under any name.
      const staged: Array<{ file: string; stage: StagedTrace; name: string; digest: string; exchanges: number; changed: number }> = []
      try {
        for (const { file, reader, meta } of opened) staged.push({ file, name: meta.name, ...(await stageFile(store, reader, meta, redaction)) })
        // Every name checked before any is committed (a damaged file is reported first, as it was verified first).
        if (!args.force) for (const { name } of staged) if (await store.hasTrace(name)) throw traceExists(name, store.location)
      } catch (err) {
        for (const s of staged) await s.stage.discard()
        throw err
      }
      const done = []
      for (const { file, stage, name, digest, exchanges, changed } of staged) {
        await stage.commit({ overwrite: Boolean(args.force) })
        done.push({ file, trace: name, digest, exchanges, redacted: changed })
        if (!args.json) io.out(`Imported ${file} as trace "${name}" (${exchanges} exchanges).${redactedNote(changed)}`)
      }
      if (args.json) {
        const { file: _file, ...one } = done[0] as (typeof done)[number]
        io.out(JSON.stringify(done.length === 1 ? { ok: true, ...one } : { ok: true, imported: done }))
      }
      return 0
    })
  },
}

/**
 * Streams one trace file into a staged trace, each exchange redacted like a recording (a trace file may come
 * from anywhere); returns the stage uncommitted, or discards it and throws if the file fails any check.
 */
async function stageFile(store: TraceStore, reader: TraceFileReader, meta: TraceMeta, redaction: Redactor) {
  const stage = await store.stageTrace(meta)
  try {
    const digester = new TraceDigester()
    let changed = 0
    for await (const { exchange, bodies, canonical } of reader.exchanges()) {
      const out = redactTrace({ meta, exchanges: [exchange], bodies }, redaction)
      const x = out.trace.exchanges[0] as Exchange
      changed += out.changed
      if (x === exchange) digester.addCanonical(canonical)
      else digester.add(x)
      await stage.add(x, out.trace.bodies)
    }
    return { stage, digest: digester.digest(meta), exchanges: digester.count, changed }
  } catch (err) {
    await stage.discard()
    throw err
  }
}
