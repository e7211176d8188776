import { isToolReplayError } from '../trace/index.ts'
import { exitCodeFor } from './exit-codes.ts'

/** Where commands print; injectable so tests capture output without spawning. */
export interface Io {
  out(text: string): void
  err(text: string): void
}

/** Stdout and stderr of this process; a stream whose reader went away (`| head -1`) is skipped. */
export const processIo: Io = {
  out: (t) => writeIfOpen(process.stdout, t),
  err: (t) => writeIfOpen(process.stderr, t),
}

function writeIfOpen(stream: NodeJS.WriteStream, t: string): void {
  if (stream.destroyed || !stream.writable) return
  stream.write(t.endsWith('\n') ? t : `${t}\n`)
}

/** Prints an error (JSON or text) and returns the exit code it maps to. */
export function reportError(io: Io, err: unknown, json: boolean): number {
  const exit = exitCodeFor(err)
  if (json) {
    const e = err as { code?: string; message?: string; details?: unknown }
    io.out(JSON.stringify({ ok: false, error: { code: e?.code ?? 'TR_INTERNAL', message: e?.message ?? String(err), details: e?.details }, exitCode: exit }))
  } else if (isToolReplayError(err)) {
    io.err(`error ${err.code}: ${err.message}`)
  } else {
    io.err(`unexpected error: ${(err as Error)?.stack ?? String(err)}\nThis is a bug in Tool Replay; please report it with the command you ran.`)
  }
  return exit
}
