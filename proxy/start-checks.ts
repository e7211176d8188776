/**
 * What a proxy run asks before its session opens and before a sealed namespace is set up: the command exists.
 * (A start that fails later, such as a port already taken, discards its session, and a recording that stored
 * no exchange is removed: Session.discard, TraceRecording.discard.)
 */
import { constants } from 'node:fs'
import { access, stat } from 'node:fs/promises'
import { delimiter, isAbsolute, join, resolve } from 'node:path'
import { ErrorCodes, ToolReplayError } from '../trace/index.ts'

/**
 * Throws TR_COMMAND_FAILED (the message the command wrapper gives) when `command` is not an executable file:
 * a path (with a slash) is taken from `cwd`, a bare name is looked up on `PATH`, as spawn does.
 */
export async function assertCommandFound(command: string, cwd: string, path = process.env.PATH ?? ''): Promise<void> {
  const candidates = command.includes('/')
    ? [isAbsolute(command) ? command : resolve(cwd, command)]
    : path
        .split(delimiter)
        .filter((dir) => dir !== '')
        .map((dir) => resolve(cwd, join(dir, command)))
  for (const file of candidates) if (await isExecutable(file)) return
  throw new ToolReplayError(
    ErrorCodes.COMMAND_FAILED,
    `Failed to start command "${command}": ENOENT. Check it is installed and on PATH (the command goes after \`--\`).`,
  )
}

async function isExecutable(file: string): Promise<boolean> {
  try {
    await access(file, constants.X_OK)
    return (await stat(file)).isFile()
  } catch {
    return false
  }
}
