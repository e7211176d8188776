/**
 * The one rule for running a recorded command from the page: a trace's command (its `meta.app`) runs only
 * when a recording of this store ran that exact command in that exact directory, or when the page sends back
 * the digest of exactly what it showed the user (TR_COMMAND_UNCONFIRMED carries the command, the directory
 * and that digest). Every route that runs a recorded command (rerun, promote to test, anything added later)
 * takes an `ApprovedCommand`, and the only way to make one is `approveCommand`: the rule is kept by the types,
 * and the router applies it before the handler runs (server.ts, `runs: 'recorded-command'`).
 */
import type { TraceStore } from '../store/index.ts'
import { type AppRun, canonicalJson, ErrorCodes, sha256, ToolReplayError } from '../trace/index.ts'

declare const approved: unique symbol

/** A trace's command that may run: made only by `approveCommand`. */
export interface ApprovedCommand {
  readonly [approved]: true
  /** The trace whose command it is. */
  readonly trace: string
  readonly command: readonly string[]
  readonly cwd: string | undefined
}

/** The digest the page sends back to confirm it showed the user this exact command and directory. */
export function commandDigest(app: Pick<AppRun, 'command' | 'cwd'>): string {
  return sha256(canonicalJson({ command: app.command, cwd: app.cwd ?? null }))
}

/** True when a recording of this store ran this exact command in this directory. */
export async function recordedHere(store: TraceStore, app: Pick<AppRun, 'command' | 'cwd'>): Promise<boolean> {
  const wanted = commandDigest(app)
  for (const t of await store.listTraces()) {
    if (t.status !== 'complete') continue
    const reader = await store.openTrace(t.name).catch(() => undefined)
    const a = reader?.info.meta.app
    if (reader?.info.recorded && a && commandDigest(a) === wanted) return true
  }
  return false
}

/**
 * The command of `trace`, approved to run; throws TR_COMMAND_UNCONFIRMED (409, with the command, the
 * directory and the digest to send back) when no recording of this store ran it and `confirm` is not its
 * digest, and TR_INVALID_OPTION when the trace has no command.
 */
export async function approveCommand(store: TraceStore, trace: string, confirm: unknown): Promise<ApprovedCommand> {
  const app = (await store.openTrace(trace)).info.meta.app
  if (!app || app.command.length === 0) {
    throw new ToolReplayError(
      ErrorCodes.INVALID_OPTION,
      `Trace "${trace}" has no recorded command to run: only runs of \`tr-proxy record|replay -- <command>\`, of the test setups (tool-replay/node-test, tool-replay/vitest) and their forks keep one. Record the app that way first.`,
    )
  }
  const digest = commandDigest(app)
  if (confirm !== digest && !(await recordedHere(store, app))) {
    throw new ToolReplayError(
      ErrorCodes.COMMAND_UNCONFIRMED,
      `The command of trace "${trace}" was not run by a recording of this store (it came with an imported trace file): confirm it on the page before it runs.`,
      { details: { status: 409, trace, command: app.command, cwd: app.cwd, confirm: digest } },
    )
  }
  return { trace, command: [...app.command], cwd: app.cwd } as unknown as ApprovedCommand
}
