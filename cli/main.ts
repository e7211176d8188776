import yargs, { type Argv } from 'yargs'
import { ErrorCodes } from '../trace/index.ts'
import { commandsFor } from './commands/index.ts'
import { EXIT_USAGE } from './exit-codes.ts'
import { type Io, processIo, reportError } from './output.ts'

/**
 * Runs the CLI with the given arguments and returns the exit code (it never calls process.exit,
 * so tests can run it in-process).
 */
export async function runCli(argv: string[], io: Io = processIo): Promise<number> {
  let exitCode = 0
  const json = argv.includes('--json')
  const parser: Argv = yargs(argv)
    .scriptName('tr-proxy')
    .usage('$0 <command> [options]\n\nRecord, strictly replay, fork and diff the HTTP exchanges of any app.')
    .option('store', { type: 'string', describe: 'Store directory (default: ./.tool-replay/store, or $TOOL_REPLAY_STORE)', global: true })
    .option('json', { type: 'boolean', describe: 'Print machine-readable JSON', global: true, default: false })
    .strict()
    .demandCommand(1, 'Name a command; see --help.')
    .recommendCommands()
    .help()
    .alias('h', 'help')
    .version()
    .wrap(Math.min(110, process.stdout.columns || 100))
    .fail((msg, err) => {
      // Throwing stops yargs before any handler runs: a mistyped flag must never record or delete anything.
      throw err ?? new UsageError(msg)
    })
    .exitProcess(false)
  skipHelpRendering(parser)
  // Only the command the line names is imported (all of them for --help or a name that is none).
  for (const command of await commandsFor(argv)) {
    parser.command({
      command: command.command,
      describe: command.describe,
      builder: command.builder,
      handler: async (args) => {
        // The command line as typed, for the rerun line a faulted run prints.
        exitCode = await command.run({ ...args, rawArgv: argv }, io)
      },
    })
  }
  try {
    await parser.parseAsync()
  } catch (err) {
    if (err instanceof UsageError) {
      const message = `${err.message}\nRun "tr-proxy --help" for usage.`
      if (json) io.out(JSON.stringify({ ok: false, error: { code: ErrorCodes.USAGE, message }, exitCode: EXIT_USAGE }))
      else io.err(message)
      return EXIT_USAGE
    }
    return reportError(io, err, json)
  }
  return exitCode
}

/**
 * yargs renders the whole help text of the chosen command before running its handler, in case the handler
 * asks for it (`showHelp()`); ours never do, and the rendering (string widths of every line) took ~50 ms of
 * each CLI start, blocking the event loop while a proxy starts. `--help` and usage errors still render it.
 * @note `getInternalMethods()` is yargs' own internal surface; if a release changes it, nothing here breaks
 * (the help is rendered as before).
 */
function skipHelpRendering(parser: Argv): void {
  const usage = (parser as unknown as { getInternalMethods?: () => { getUsageInstance?: () => { cacheHelpMessage?: unknown } } })
    .getInternalMethods?.()
    .getUsageInstance?.()
  if (usage && typeof usage.cacheHelpMessage === 'function') usage.cacheHelpMessage = () => {}
}

/** A command line yargs rejected (unknown flag, bad choice, missing argument). */
class UsageError extends Error {}
