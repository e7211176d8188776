/**
 * The page's half of the confirmation rule (inspector/command-gate.ts): a command no recording of this store
 * ran is shown in full, with its directory, and runs only when the user confirms, by sending back the digest
 * the server gave for exactly what is shown.
 */
import type { ApiError } from './api.ts'
import { shellLine } from './format.ts'

/** What TR_COMMAND_UNCONFIRMED carries. */
export interface Unconfirmed {
  command: string[]
  cwd?: string
  digest: string
}

/** The command to confirm, from a TR_COMMAND_UNCONFIRMED error; undefined for any other error. */
export function unconfirmed(e: ApiError): Unconfirmed | undefined {
  if (e.code !== 'TR_COMMAND_UNCONFIRMED') return undefined
  const d = e.details
  return { command: d.command as string[], ...(typeof d.cwd === 'string' ? { cwd: d.cwd } : {}), digest: d.confirm as string }
}

/** The confirmation box: the command in full, Run, Cancel. */
export function ConfirmCommand({ what, onRun, onCancel }: { what: Unconfirmed; onRun: (digest: string) => void; onCancel: () => void }) {
  return (
    <div class="confirm" data-testid="confirm-command">
      <p class="bad">This command came with an imported trace: no recording of this store ran it. Run it only if you trust it.</p>
      <pre data-testid="confirm-command-line">{shellLine(what.command)}</pre>
      <p>in {what.cwd ?? '(no directory recorded)'}</p>
      <button type="button" onClick={() => onRun(what.digest)} data-testid="confirm-command-run">
        Run this command
      </button>{' '}
      <button type="button" class="link" onClick={onCancel}>
        Cancel
      </button>
    </div>
  )
}
