import type { Mode } from '../../engine/index.ts'
import { MODES } from '../../engine/index.ts'
import { ErrorCodes, ToolReplayError } from '../../trace/index.ts'
import type { CommandModule } from './command.ts'
import { proxyOptions, runProxyCommand } from './record.ts'

/** `tr-proxy serve --mode MODE`: a long-running proxy with a control API on a Unix socket in the store. */
export const serveCommand: CommandModule = {
  command: 'serve',
  describe:
    'Run the proxy until SIGINT/SIGTERM, with a control API (GET /status, POST /session/end) on <store>/proxy-control.sock; in replay, exit 69 if strict replay saw any problem',
  builder: (y) =>
    proxyOptions(y)
      .option('mode', { choices: [...MODES], default: 'replay', describe: 'Session mode' })
      .option('record-as', { type: 'string', describe: 'In replay: also record what the app did, as this trace' })
      .option('tail', { choices: ['strict', 'live'], default: 'strict', describe: 'In replay with --record-as: live after the first unmatched request' }),
  run: async (args, io) => {
    const mode = String(args.mode) as Mode
    const recordAs = typeof args['record-as'] === 'string' ? args['record-as'] : undefined
    if (args.tail === 'live' && !(mode === 'replay' && recordAs)) {
      throw new ToolReplayError(ErrorCodes.INVALID_OPTION, '--tail live needs --mode replay and --record-as NAME. Add them, or drop --tail.')
    }
    return runProxyCommand(
      args,
      io,
      { mode, trace: String(args.trace), ...(recordAs ? { recordAs } : {}), ...(args.tail === 'live' ? { tail: 'live' as const } : {}) },
      // A replay that saw misses, overruns or unused recordings exits 69 when it stops, like `replay`.
      { strict: true, control: true },
    )
  },
}
