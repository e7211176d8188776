import { type ChildProcess, spawn } from 'node:child_process'
import type { Readable, Writable } from 'node:stream'
import { ErrorCodes, OUTPUT_TAIL_BYTES, ToolReplayError } from '../trace/index.ts'

/** The end of what a command wrote to one stream, as raw bytes (not yet redacted). */
export interface CapturedTail {
  /** The last OUTPUT_TAIL_BYTES bytes, cut at a character boundary. */
  tail: Uint8Array
  /** Bytes written in all. */
  bytes: number
}

/** How a wrapped command ended. */
export interface CommandExit {
  /** Exit code, or 128 + signal number when it died of a signal (shell convention). */
  code: number
  signal: NodeJS.Signals | null
  /** The end of its stdout and stderr (they were passed through as they came). */
  stdout: CapturedTail
  stderr: CapturedTail
}

/** Options of `runCommand`. */
export interface RunCommandOptions {
  /** Directory to run in. Default: this process's. */
  cwd?: string
  /** Where the command's stdout and stderr go as they come. Default: this process's. */
  output?: { stdout: Writable; stderr: Writable }
  /** Opens an IPC channel to the command and hands over the child as soon as it is spawned (a sealed run's helper). */
  ipc?: (child: ChildProcess) => void
}

const SIGNAL_NUMBERS: Partial<Record<NodeJS.Signals, number>> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGKILL: 9, SIGTERM: 15 }
/** After the command exits, how long its output may still drain (a daemon it started can hold the pipes open). */
const DRAIN_AFTER_EXIT_MS = 2000

/**
 * Runs `command args...` with `env` added to this process's environment, stdin inherited, stdout and stderr
 * passed through to this process's (or `options.output`) while their last bytes are kept for the trace, and
 * SIGINT/SIGTERM forwarded to it (the proxy keeps serving until the command is gone).
 * @note stdout and stderr are pipes, not the terminal: an app that checks isTTY prints as it does under CI.
 */
export function runCommand(command: string, args: readonly string[], env: Record<string, string>, options: RunCommandOptions = {}): Promise<CommandExit> {
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
    child = spawn(command, args, {
      env: { ...process.env, ...env },
      stdio: options.ipc ? ['inherit', 'pipe', 'pipe', 'ipc'] : ['inherit', 'pipe', 'pipe'],
      ...(options.cwd ? { cwd: options.cwd } : {}),
    })
    options.ipc?.(child)
    for (const signal of pending) child.kill(signal)
    const out = options.output ?? { stdout: process.stdout, stderr: process.stderr }
    const stdout = new TailBuffer()
    const stderr = new TailBuffer()
    const drained = [tee(child.stdout as Readable, out.stdout, stdout), tee(child.stderr as Readable, out.stderr, stderr)]
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
      let timer: NodeJS.Timeout | undefined
      const grace = new Promise<void>((r) => (timer = setTimeout(r, DRAIN_AFTER_EXIT_MS)))
      void Promise.race([Promise.all(drained), grace]).then(() => {
        clearTimeout(timer)
        resolve({ code: code ?? 128 + (SIGNAL_NUMBERS[signal as NodeJS.Signals] ?? 1), signal, stdout: stdout.captured(), stderr: stderr.captured() })
      })
    })
  })
}

/** Passes `from` to `to` (with back-pressure, never ending `to`) and keeps its tail; resolves when `from` ends. */
function tee(from: Readable, to: Writable, tail: TailBuffer): Promise<void> {
  from.on('data', (chunk: Buffer) => tail.push(chunk))
  from.pipe(to, { end: false })
  return new Promise((resolve) => {
    from.once('end', resolve)
    from.once('close', resolve)
    from.once('error', () => resolve())
  })
}

/** The last OUTPUT_TAIL_BYTES of a stream: memory stays bounded whatever the command prints. */
export class TailBuffer {
  #parts: Buffer[] = []
  #held = 0
  #bytes = 0

  push(chunk: Buffer): void {
    this.#bytes += chunk.byteLength
    this.#parts.push(chunk)
    this.#held += chunk.byteLength
    if (this.#held > 2 * OUTPUT_TAIL_BYTES) this.#compact()
  }

  /** The tail, starting at a UTF-8 character boundary. */
  captured(): CapturedTail {
    this.#compact()
    const all = Buffer.concat(this.#parts)
    let start = 0
    // A cut in the middle of a character: skip its continuation bytes (10xxxxxx).
    if (this.#bytes > all.byteLength) while (start < all.byteLength && start < 4 && ((all[start] as number) & 0xc0) === 0x80) start++
    return { tail: new Uint8Array(all.subarray(start)), bytes: this.#bytes }
  }

  #compact(): void {
    const all = Buffer.concat(this.#parts)
    const kept = all.byteLength > OUTPUT_TAIL_BYTES ? Buffer.from(all.subarray(all.byteLength - OUTPUT_TAIL_BYTES)) : all
    this.#parts = [kept]
    this.#held = kept.byteLength
  }
}
