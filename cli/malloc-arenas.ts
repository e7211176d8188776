import { commandWord } from './commands/index.ts'

/** The commands that stream a trace of any length through LevelDB (as cli/heap-growth.ts's). */
const STREAMING_COMMANDS: ReadonlySet<string> = new Set(['import', 'export', 'assets'])

/** The malloc arenas those commands run with (glibc's default is 8 per core). */
export const STREAMING_MALLOC_ARENAS = '2'

/**
 * The environment to start `argv` again with, or undefined to run it as it is: on Linux, a streaming command
 * whose environment does not set MALLOC_ARENA_MAX gets it set. glibc gives each thread that allocates while
 * another holds the lock an arena of its own (up to 8 per core), and LevelDB's compaction thread and libuv's
 * pool each grew one that kept tens of MB it had freed: a 200,000-exchange import peaked at 312 MB with them,
 * 279 MB with two arenas. The variable is read once, when the process starts, hence the new start.
 * @note Set in the environment it also ends the decision: the new process never starts again, and a user's
 * own MALLOC_ARENA_MAX (any value) is kept.
 */
export function streamingRelaunchEnv(argv: readonly string[], env: NodeJS.ProcessEnv, platform: NodeJS.Platform): NodeJS.ProcessEnv | undefined {
  if (platform !== 'linux' || env.MALLOC_ARENA_MAX !== undefined) return undefined
  const word = commandWord(argv)
  if (word === undefined || !STREAMING_COMMANDS.has(word)) return undefined
  return { ...env, MALLOC_ARENA_MAX: STREAMING_MALLOC_ARENAS }
}

/**
 * For bin/tr-proxy.js, before it loads the CLI: replaces this process (process.execve: same pid, stdio,
 * signals and parent, so the exit code is the new program's) with the same node, node flags and arguments
 * under streamingRelaunchEnv's environment, when it gives one. Returns when there is nothing to do.
 */
export function relaunchForStreaming(): void {
  const env = streamingRelaunchEnv(process.argv.slice(2), process.env, process.platform)
  if (env === undefined || typeof process.execve !== 'function') return
  process.execve(process.execPath, [process.execPath, ...process.execArgv, ...process.argv.slice(1)], env)
}
