import { ErrorCodes, ToolReplayError } from '../../trace/index.ts'
import { EXIT_CODES } from '../exit-codes.ts'
import { sealedOptions } from '../sealed-flags.ts'
import type { CommandModule } from './command.ts'
import { proxyOptions, runProxyCommand } from './record.ts'

const REPLAY_FAILED = EXIT_CODES[ErrorCodes.REPLAY_INCOMPLETE]

/** `tr-proxy replay --strict [--record-as NAME] [--tail live] [-- cmd ...]`: serve a trace offline. */
export const replayCommand: CommandModule = {
  command: 'replay',
  describe: `Replay a trace through the proxy, never contacting an upstream; with \`-- cmd ...\` exit ${REPLAY_FAILED} when the command missed, overran or left recordings unused`,
  builder: (y) =>
    sealedOptions(proxyOptions(y))
      .option('strict', {
        type: 'boolean',
        default: true,
        describe: `Exit ${REPLAY_FAILED} on any miss, overrun or unused recording (--no-strict: still refuse, exit with the command code)`,
      })
      .option('record-as', { type: 'string', describe: 'Also record what the app did against the trace, as this trace (for diff)' })
      .option('tail', {
        choices: ['strict', 'live'],
        default: 'strict',
        describe: 'live: after the first unmatched request go live and record into --record-as (NOT offline)',
      }),
  run: async (args, io) => {
    const recordAs = typeof args['record-as'] === 'string' ? args['record-as'] : undefined
    if (args.tail === 'live' && !recordAs) {
      throw new ToolReplayError(
        ErrorCodes.INVALID_OPTION,
        '--tail live needs --record-as NAME: the live part is recorded there. Add --record-as, or drop --tail.',
      )
    }
    return runProxyCommand(
      args,
      io,
      { mode: 'replay', trace: String(args.trace), ...(recordAs ? { recordAs } : {}), ...(args.tail === 'live' ? { tail: 'live' as const } : {}) },
      { strict: args.strict !== false, control: false, createStore: false },
    )
  },
}
