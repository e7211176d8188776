/**
 * Rerunning a trace's recorded command in strict replay against it, from the page: the child is exactly the
 * command line a user would type (`tr-proxy replay --strict --trace T --record-as T-run -- <command>`), run in
 * the directory the command was recorded in, its output kept (bounded) and streamed to the page. The page can
 * name only a trace, never a command: the command comes from the trace's meta, approved by command-gate.ts
 * (a command no recording of this store ran runs only once the page confirmed it).
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import type { TraceStore } from '../store/index.ts'
import { ErrorCodes, shellLine, ToolReplayError } from '../trace/index.ts'
import type { ApprovedCommand } from './command-gate.ts'

/** Output kept per rerun for the page (the end of it when it is longer). */
const OUTPUT_KEEP = 256 * 1024
/** A rerun still going after this long is killed. */
export const RERUN_TIMEOUT_MS = 10 * 60_000
const KEEP_FINISHED = 20

/** One rerun, as the page follows it. */
export interface Rerun {
  id: string
  trace: string
  recordAs: string
  tail: 'strict' | 'live'
  /** The command line the inspector runs, for the page to show. */
  commandLine: string
  cwd: string
  output: Array<{ stream: 'stdout' | 'stderr'; text: string }>
  exitCode?: number
  listeners: Set<(event: RerunEvent) => void>
  child?: ChildProcess
}

/** What the page hears about a rerun. */
export type RerunEvent = { type: 'output'; stream: 'stdout' | 'stderr'; text: string } | { type: 'end'; exitCode: number; recordAs: string }

/** The tr-proxy entry point of this installation (a checkout's bin/, or the package's). */
function binPath(): string {
  for (const rel of ['../bin/tr-proxy.js', '../../bin/tr-proxy.js']) {
    const p = fileURLToPath(new URL(rel, import.meta.url))
    if (existsSync(p)) return p
  }
  throw new ToolReplayError(ErrorCodes.INTERNAL, 'Cannot find bin/tr-proxy.js beside the inspector. Reinstall tool-replay.')
}

/** Reruns in this inspector, newest last. */
export class Reruns {
  readonly #runs = new Map<string, Rerun>()
  readonly #store: TraceStore
  readonly #storeDir: string

  constructor(store: TraceStore, storeDir: string) {
    this.#store = store
    this.#storeDir = storeDir
  }

  get(id: string): Rerun | undefined {
    return this.#runs.get(id)
  }

  /**
   * Starts a rerun of an approved command (command-gate.ts) in strict replay against its trace; with `tail:
   * 'live'`, requests from the first one no recording matches go to the real services (recorded, marked live).
   */
  async start(approved: ApprovedCommand, tail: 'strict' | 'live' = 'strict'): Promise<Rerun> {
    const { trace, command, cwd } = approved
    if (cwd === undefined || !existsSync(cwd)) {
      throw new ToolReplayError(
        ErrorCodes.INVALID_OPTION,
        `Cannot rerun the command of trace "${trace}": the directory it ran in (${cwd ?? 'not recorded'}) does not exist here. Rerun it by hand with \`tr-proxy replay --trace ${trace} -- ${shellLine(command)}\`.`,
      )
    }
    const recordAs = await this.#freeName(`${trace}-${tail === 'live' ? 'live' : 'run'}`)
    const args = [
      'replay',
      '--strict',
      '--store',
      this.#storeDir,
      '--trace',
      trace,
      '--record-as',
      recordAs,
      ...(tail === 'live' ? ['--tail', 'live'] : []),
      '--',
      ...command,
    ]
    const run: Rerun = {
      id: randomBytes(8).toString('hex'),
      trace,
      recordAs,
      tail,
      commandLine: shellLine(['tr-proxy', ...args]),
      cwd,
      output: [],
      listeners: new Set(),
    }
    this.#spawn(run, args)
    this.#runs.set(run.id, run)
    for (const old of [...this.#runs.values()].filter((r) => r.exitCode !== undefined).slice(0, Math.max(0, this.#runs.size - KEEP_FINISHED)))
      this.#runs.delete(old.id)
    return run
  }

  /** Ends every rerun still going (the inspector is stopping). */
  close(): void {
    for (const r of this.#runs.values()) if (r.exitCode === undefined) r.child?.kill('SIGTERM')
  }

  #spawn(run: Rerun, args: string[]): void {
    const child = spawn(process.execPath, [binPath(), ...args], { cwd: run.cwd, stdio: ['ignore', 'pipe', 'pipe'], env: process.env })
    run.child = child
    let kept = 0
    const emit = (e: RerunEvent) => {
      for (const l of run.listeners) l(e)
    }
    const onData = (stream: 'stdout' | 'stderr') => (chunk: Buffer) => {
      const text = chunk.toString('utf8')
      run.output.push({ stream, text })
      kept += text.length
      while (kept > OUTPUT_KEEP && run.output.length > 1) kept -= (run.output.shift() as { text: string }).text.length
      emit({ type: 'output', stream, text })
    }
    child.stdout?.on('data', onData('stdout'))
    child.stderr?.on('data', onData('stderr'))
    const timer = setTimeout(() => child.kill('SIGKILL'), RERUN_TIMEOUT_MS)
    const end = (code: number) => {
      clearTimeout(timer)
      if (run.exitCode !== undefined) return
      run.exitCode = code
      emit({ type: 'end', exitCode: code, recordAs: run.recordAs })
    }
    child.once('error', (err) => {
      onData('stderr')(Buffer.from(`failed to start tr-proxy: ${err.message}\n`))
      end(127)
    })
    child.once('close', (code, signal) => end(code ?? (signal ? 128 + 15 : 1)))
  }

  async #freeName(base: string): Promise<string> {
    for (let i = 1; i < 1000; i++) {
      const name = i === 1 ? base : `${base}-${i}`
      if (!(await this.#store.hasTrace(name))) return name
    }
    throw new ToolReplayError(ErrorCodes.TRACE_EXISTS, `Traces "${base}" to "${base}-999" all exist. Remove old reruns with \`tr-proxy rm\`.`)
  }
}
