/**
 * Checks a proxy run makes before its session opens: a recording session writes a trace from its first moment,
 * so what would fail the start (the port taken, the command not found) is asked first, and a run that cannot
 * start leaves nothing in the store (not even a 0-exchange partial trace).
 */
import { constants } from 'node:fs'
import { access, stat } from 'node:fs/promises'
import { createServer } from 'node:net'
import { delimiter, isAbsolute, join, resolve } from 'node:path'
import { ErrorCodes, ToolReplayError } from '../trace/index.ts'

/**
 * Throws TR_PROXY_START_FAILED (the message startProxy gives) when `host:port` cannot be bound now. Port 0 is
 * always free. The port is released at once; startProxy binds it again right after.
 */
export async function assertPortFree(host: string, port: number): Promise<void> {
  if (port === 0) return
  const server = createServer()
  await new Promise<void>((done, fail) => {
    server.once('error', (err: NodeJS.ErrnoException) =>
      fail(
        new ToolReplayError(
          ErrorCodes.PROXY_START_FAILED,
          `Failed to start the proxy on ${host}:${port}: ${err.code ?? err.message}. ${err.code === 'EADDRINUSE' ? 'Pick another --port, or omit it for a free one.' : 'Check --host and --port.'}`,
          { cause: err },
        ),
      ),
    )
    server.listen({ host, port, exclusive: true }, () => server.close(() => done()))
  })
}

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
