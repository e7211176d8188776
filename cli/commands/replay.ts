import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { SESSION_OPTIONS, type SessionOptions } from '../../engine/index.ts'
import { createMemoryStore, readTraceFile } from '../../store/index.ts'
import { ErrorCodes, ToolReplayError } from '../../trace/index.ts'
import { declareOptions } from '../declared-options.ts'
import { EXIT_CODES } from '../exit-codes.ts'
import type { Io } from '../output.ts'
import { sealedOptions } from '../sealed-flags.ts'
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
      .option('trace-file', {
        type: 'string',
        describe:
          'Replay this trace file (as `tr-proxy export` writes it) without `import`: verified first (schema, body hashes, digest), served from memory; the store is never opened (the proxy CA is a fresh one in a scratch folder, given to the command)',
      }),
  run: async (args, io) => {
    const recordAs = typeof args['record-as'] === 'string' ? args['record-as'] : undefined
    if (args.tail === 'live' && !recordAs) {
      throw new ToolReplayError(
        ErrorCodes.INVALID_OPTION,
        '--tail live needs --record-as NAME: the live part is recorded there. Add --record-as, or drop --tail.',
      )
    }
    if (typeof args['trace-file'] === 'string') {
      if (recordAs) {
        throw new ToolReplayError(
          ErrorCodes.INVALID_OPTION,
          '--record-as records into the store, which --trace-file never opens. Import the file (`tr-proxy import FILE`) and replay it by name, or drop --record-as.',
        )
      }
      return replayTraceFile(args, io, args['trace-file'])
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
 * `replay --trace-file FILE`: the file verified as `import` verifies it (readTraceFile), loaded into a memory store
 * and replayed from there; the CA lives in a scratch folder removed afterwards. Nothing is written to the store.
 */
async function replayTraceFile(args: Args, io: Io, file: string): Promise<number> {
  const trace = await readTraceFile(resolve(file))
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
