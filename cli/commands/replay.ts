import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { SESSION_OPTIONS, type SessionOptions } from '../../engine/index.ts'
import { createMemoryStore, readTraceFile } from '../../store/index.ts'
import { ErrorCodes, ToolReplayError, type Trace } from '../../trace/index.ts'
import { declareOptions } from '../declared-options.ts'
import { EXIT_CODES } from '../exit-codes.ts'
import type { Io } from '../output.ts'
import { sealedOptions } from '../sealed-flags.ts'
import { traceFilesIn } from '../trace-args.ts'
import type { Args, CommandModule } from './command.ts'
import { proxyOptions, runProxyCommand } from './record.ts'

const REPLAY_FAILED = EXIT_CODES[ErrorCodes.REPLAY_INCOMPLETE]

/** `tr-proxy replay --strict [--record-as NAME] [--tail live] [-- cmd ...]`: serve a trace offline. */
export const replayCommand: CommandModule = {
  command: 'replay',
  describe: `Replay a trace through the proxy, never contacting an upstream; with \`-- cmd ...\` exit ${REPLAY_FAILED} when the command missed, overran or left recordings unused`,
  builder: (y) =>
    declareOptions(sealedOptions(proxyOptions(y)), SESSION_OPTIONS, ['recordAs', 'tail'])
      .option('strict', {
        type: 'boolean',
        default: true,
        describe: `Exit ${REPLAY_FAILED} on any miss, overrun or unused recording (--no-strict: still refuse, exit with the command code)`,
      })
      // Repeated rather than an array flag: an array flag would swallow a command written without `--`.
      .option('trace-file', {
        type: 'string',
        describe:
          'Replay from trace files (as `tr-proxy export` writes them; repeat the flag for more; a folder means every *.trace.json in it) without `import`: each verified first (schema, body hashes, digest), the trace served from memory (the only one, else the one --trace names); the store is never opened (the proxy CA is a fresh one in a scratch folder, given to the command)',
      }),
  run: async (args, io) => {
    const recordAs = typeof args['record-as'] === 'string' ? args['record-as'] : undefined
    if (args.tail === 'live' && !recordAs) {
      throw new ToolReplayError(
        ErrorCodes.INVALID_OPTION,
        '--tail live needs --record-as NAME: the live part is recorded there. Add --record-as, or drop --tail.',
      )
    }
    const traceFiles = [args['trace-file'] ?? []].flat().map(String)
    if (traceFiles.length > 0) {
      if (recordAs) {
        throw new ToolReplayError(
          ErrorCodes.INVALID_OPTION,
          '--record-as records into the store, which --trace-file never opens. Import the file (`tr-proxy import FILE`) and replay it by name, or drop --record-as.',
        )
      }
      return replayTraceFiles(args, io, traceFilesIn(traceFiles, 'replay'))
    }
    return runProxyCommand(
      args,
      io,
      { mode: 'replay', trace: String(args.trace), ...(recordAs ? { recordAs } : {}), ...(args.tail === 'live' ? { tail: 'live' as const } : {}) },
      { strict: args.strict !== false, control: false, createStore: false },
    )
  },
}

/**
 * `replay --trace-file FILE|FOLDER...`: each file verified as `import` verifies it (readTraceFile), the trace to
 * replay loaded into a memory store and replayed from there; the CA lives in a scratch folder removed
 * afterwards. Nothing is written to the store.
 */
async function replayTraceFiles(args: Args, io: Io, files: readonly string[]): Promise<number> {
  const trace = await pickTrace(files, String(args.trace))
  const store = createMemoryStore()
  const dir = await mkdtemp(join(tmpdir(), 'tr-replay-file-'))
  try {
    await store.putTrace(trace)
    const session: Omit<SessionOptions, 'store'> = { mode: 'replay', trace: trace.meta.name }
    return await runProxyCommand(args, io, session, { strict: args.strict !== false, control: false, source: { store, dir } })
  } finally {
    await store.close()
    await rm(dir, { recursive: true, force: true })
  }
}

/**
 * The trace to replay: the only file's, else the one named `wanted` (--trace). Every file is read and verified
 * (a damaged one fails the run before anything starts) but only the wanted trace is kept in memory.
 */
async function pickTrace(files: readonly string[], wanted: string): Promise<Trace> {
  if (files.length === 1) return readTraceFile(files[0] as string)
  const seen = new Map<string, string>()
  let picked: Trace | undefined
  for (const file of files) {
    const trace = await readTraceFile(file)
    const twin = seen.get(trace.meta.name)
    if (twin) throw new ToolReplayError(ErrorCodes.USAGE, `Failed to replay: ${twin} and ${file} both hold trace "${trace.meta.name}". Give one of them.`)
    seen.set(trace.meta.name, file)
    if (trace.meta.name === wanted) picked = trace
  }
  if (picked) return picked
  throw new ToolReplayError(
    ErrorCodes.USAGE,
    `Failed to replay: none of the ${files.length} trace files holds trace "${wanted}" (they hold ${[...seen.keys()].map((n) => `"${n}"`).join(', ')}). Name the one to replay with --trace NAME.`,
  )
}
