import { constants } from 'node:os'
import {
  faultVerdict,
  faultVerdictError,
  findSharedSession,
  formatFaultVerdict,
  formatSummary,
  MODES,
  type Mode,
  openSession,
  SESSION_OPTIONS,
} from '../../engine/index.ts'
import { FAULTS_OPTIONS } from '../../faults/index.ts'
import { assertServerName, runMcpStdio, serverNameFor } from '../../mcp/index.ts'
import { ErrorCodes, optionsFromFlags, ToolReplayError } from '../../trace/index.ts'
import { declareOptions } from '../declared-options.ts'
import { EXIT_CODES } from '../exit-codes.ts'
import { withStore } from '../open-store.ts'
import { redactionFromArgs, redactionOptions } from '../redaction-flags.ts'
import type { CommandModule } from './command.ts'
import { commandArgv, faultsFromArgs } from './record.ts'

/** `tr-proxy mcp [--name NAME] [--mode MODE] [--trace NAME] -- <server command...>`: record or replay an MCP stdio server. */
export const mcpCommand: CommandModule = {
  command: 'mcp',
  describe:
    'Stand in for an MCP server over stdio (put `tr-proxy mcp --` before the server command in the client config): record its JSON-RPC conversation, or replay it without starting the server',
  builder: (y) =>
    declareOptions(
      declareOptions(redactionOptions(y), SESSION_OPTIONS, ['durability', 'mode', 'trace', 'maxBodyBytes'], {
        // An MCP client config sets the environment more easily than flags: the defaults come from there.
        mode: { default: undefined, note: 'default $TOOL_REPLAY_MODE, else replay; in replay the server is never started' },
        trace: { default: undefined, note: 'default $TOOL_REPLAY_TRACE, else "default"' },
      }),
      FAULTS_OPTIONS,
      ['faults', 'faultsSeed'],
    )
      .option('name', { type: 'string', describe: 'The server name in the trace (mcp+stdio://NAME/...); default from the command (server-filesystem, ...)' })
      .option('own-session', {
        type: 'boolean',
        default: false,
        describe:
          'Do not join the session of the run that started this process (tr-proxy record|replay -- app, or install() in the app); by default one found is joined and its trace gets the MCP messages',
      }),
  run: async (args, io) => {
    const command = commandArgv(args)
    if (command.length === 0) {
      throw new ToolReplayError(
        ErrorCodes.USAGE,
        'tr-proxy mcp needs the server command after `--`, e.g. tr-proxy mcp -- npx -y @modelcontextprotocol/server-filesystem .',
      )
    }
    const server = typeof args.name === 'string' ? assertServerName(args.name) : serverNameFor(command)
    const mode = String(args.mode ?? process.env.TOOL_REPLAY_MODE ?? 'replay') as Mode
    if (!MODES.includes(mode))
      throw new ToolReplayError(ErrorCodes.INVALID_OPTION, `TOOL_REPLAY_MODE="${mode}" is not a mode. Use one of: ${MODES.join(', ')}.`)
    const trace = typeof args.trace === 'string' ? args.trace : process.env.TOOL_REPLAY_TRACE || 'default'
    const faults = await faultsFromArgs(args)
    const { maxBodyBytes, durability } = optionsFromFlags(SESSION_OPTIONS, args)
    const limits = maxBodyBytes !== undefined ? { maxBodyBytes } : {}
    if (args['own-session'] !== true && !faults) {
      const shared = await findSharedSession()
      if (shared) {
        try {
          const exit = await runMcpStdio({ session: shared, server, command, ...limits })
          return exitCodeOf(exit)
        } finally {
          shared.close()
        }
      }
    }
    const redaction = await redactionFromArgs(args)
    // A replay reads recordings: a --store naming no store is TR_STORE_NOT_FOUND, never a new empty store.
    return withStore(
      { store: args.store },
      async (store) => {
        const session = await openSession({
          mode,
          trace,
          store,
          redaction,
          durability,
          labels: { recordedWith: 'mcp' },
          ...limits,
          ...(faults ? { faults } : {}),
        })
        let exit: Awaited<ReturnType<typeof runMcpStdio>>
        try {
          exit = await runMcpStdio({ session, server, command, ...limits })
        } catch (err) {
          await session.discard().catch(() => {})
          throw err
        }
        const summary = await session.close()
        if (!summary.ok) {
          io.err(formatSummary(summary))
          return EXIT_CODES[ErrorCodes.REPLAY_INCOMPLETE]
        }
        const verdict = await faultVerdict(session)
        if (verdict) {
          io.err(formatFaultVerdict(verdict))
          const error = faultVerdictError(verdict)
          if (error) {
            io.err(`error ${error.code}: ${error.message}`)
            return EXIT_CODES[error.code]
          }
        }
        return exitCodeOf(exit)
      },
      { create: mode !== 'replay' },
    )
  },
}

/** The server's exit as this process's: its code, or 128 + the signal's number. */
function exitCodeOf(exit: { code: number | null; signal: string | null }): number {
  if (exit.signal) return 128 + ((constants.signals as Record<string, number>)[exit.signal] ?? 1)
  return exit.code ?? 0
}
