import { spawn } from 'node:child_process'
import { ErrorCodes, ToolReplayError } from '../trace/index.ts'

/** How a wrapped command ended. */
export interface CommandExit {
  /** Exit code, or 128 + signal number when it died of a signal (shell convention). */
  code: number
  signal: NodeJS.Signals | null
}

const SIGNAL_NUMBERS: Partial<Record<NodeJS.Signals, number>> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGKILL: 9, SIGTERM: 15 }

/**
 * Runs `command args...` with `env` added to this process's environment, stdio inherited, and
 * SIGINT/SIGTERM forwarded to it (the proxy keeps serving until the command is gone).
 */
export function runCommand(command: string, args: readonly string[], env: Record<string, string>): Promise<CommandExit> {
  return new Promise((resolve, reject) => {
    // Handlers go in before the child exists: a signal in between must not kill this process with the
    // default action and orphan the command.
    let child: ReturnType<typeof spawn> | undefined
    const pending: NodeJS.Signals[] = []
    const forward = (signal: NodeJS.Signals) => () => {
      if (child) child.kill(signal)
      else pending.push(signal)
    }
    const onInt = forward('SIGINT')
    const onTerm = forward('SIGTERM')
    process.on('SIGINT', onInt)
    process.on('SIGTERM', onTerm)
    child = spawn(command, args, { env: { ...process.env, ...env }, stdio: 'inherit' })
    for (const signal of pending) child.kill(signal)
    const cleanup = () => {
      process.off('SIGINT', onInt)
      process.off('SIGTERM', onTerm)
    }
    child.once('error', (err: NodeJS.ErrnoException) => {
      cleanup()
      reject(
        new ToolReplayError(
          ErrorCodes.COMMAND_FAILED,
          `Failed to start command "${[command, ...args].join(' ')}": ${err.code ?? err.message}. Check it is installed and on PATH (the command goes after \`--\`).`,
          { cause: err },
        ),
      )
    })
    child.once('exit', (code, signal) => {
      cleanup()
      resolve({ code: code ?? 128 + (SIGNAL_NUMBERS[signal as NodeJS.Signals] ?? 1), signal })
    })
  })
}
