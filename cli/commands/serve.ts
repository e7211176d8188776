import type { Mode } from '../../engine/index.ts'
import { SESSION_OPTIONS } from '../../engine/index.ts'
import { listServes } from '../../proxy/index.ts'
import { ErrorCodes, ToolReplayError } from '../../trace/index.ts'
import { declareOptions } from '../declared-options.ts'
import { EXIT_CODES } from '../exit-codes.ts'
import { table } from '../format.ts'
import { storeDir } from '../open-store.ts'
import type { Io } from '../output.ts'
import type { Args, CommandModule } from './command.ts'
import { proxyOptions, runProxyCommand } from './record.ts'

/** `tr-proxy serve --mode MODE`: a long-running proxy with a control API on its own Unix socket in the store; `--list` shows the running ones. */
export const serveCommand: CommandModule = {
  command: 'serve',
  describe: `Run the proxy until SIGINT/SIGTERM, with a control API (GET /status, POST /session/end, POST /sessions, DELETE /sessions/NAME) on <store>/proxy-control-<port>.sock; named sessions are picked per request (x-tool-replay-session header or http://NAME:x@host:port); in replay, exit ${EXIT_CODES[ErrorCodes.REPLAY_INCOMPLETE]} if strict replay saw any problem. --list shows the serves running on the store`,
  builder: (y) =>
    declareOptions(proxyOptions(y), SESSION_OPTIONS, ['mode', 'recordAs', 'tail'], { mode: { default: 'replay' } })
      .option('sessions-only', {
        type: 'boolean',
        default: false,
        describe: 'No default session: every request names one opened through the control API (x-tool-replay-session header or http://NAME:x@host:port)',
      })
      .option('list', { type: 'boolean', default: false, describe: 'List the serves running on the store (port, pid, mode, trace, control socket) and exit' }),
  run: async (args, io) => {
    if (args.list) return listRunning(args, io)
    const mode = String(args.mode) as Mode
    const recordAs = typeof args['record-as'] === 'string' ? args['record-as'] : undefined
    if (args['sessions-only'] && (recordAs || args.tail === 'live' || typeof args.faults === 'string' || args.seed !== undefined)) {
      // Named sessions take no faults, so a faults file here would inject nothing and pass a chaos run that never ran.
      throw new ToolReplayError(
        ErrorCodes.INVALID_OPTION,
        '--sessions-only opens no default session: give recordAs and tail per session (POST /sessions), not as flags; --faults and --seed need the default session (drop --sessions-only).',
      )
    }
    if (args.tail === 'live' && !(mode === 'replay' && recordAs)) {
      throw new ToolReplayError(ErrorCodes.INVALID_OPTION, '--tail live needs --mode replay and --record-as NAME. Add them, or drop --tail.')
    }
    return runProxyCommand(
      args,
      io,
      { mode, trace: String(args.trace), ...(recordAs ? { recordAs } : {}), ...(args.tail === 'live' ? { tail: 'live' as const } : {}) },
      // A replay that saw misses, overruns or unused recordings exits with TR_REPLAY_INCOMPLETE's code when it stops, like `replay`.
      { strict: true, control: true, sessionsOnly: Boolean(args['sessions-only']) },
    )
  },
}

async function listRunning(args: Args, io: Io): Promise<number> {
  const dir = storeDir({ store: args.store })
  const serves = await listServes(dir)
  if (args.json) {
    io.out(
      JSON.stringify({
        ok: true,
        store: dir,
        serves: serves.map((s) => ({
          proxy: s.proxy,
          pid: s.pid,
          mode: s.mode,
          trace: s.trace,
          socket: s.socket,
          ended: s.ended,
          sessions: s.sessions.map((n) => n.name),
        })),
      }),
    )
  } else if (serves.length === 0) io.out(`No \`tr-proxy serve\` is running on ${dir}.`)
  else {
    io.out(
      table([
        ['PROXY', 'PID', 'MODE', 'TRACE', 'CONTROL SOCKET'],
        ...serves.map((s) => [
          s.proxy,
          String(s.pid),
          s.mode === null ? `sessions (${s.sessions.length})` : s.ended ? `${s.mode} (ended)` : s.mode,
          s.trace ?? '-',
          s.socket,
        ]),
      ]),
    )
  }
  return 0
}
