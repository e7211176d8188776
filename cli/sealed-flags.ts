/** The flags of a sealed run (`--sealed`, `--bridge`) for the commands that wrap a command (record, replay). */
import type { Argv } from 'yargs'
import type { Mode } from '../engine/index.ts'
import { SEALED_OPTIONS, type SealedOptions } from '../proxy/index.ts'
import { sealSupport } from '../seal/index.ts'
import { ErrorCodes, optionsFromFlags, ToolReplayError } from '../trace/index.ts'
import type { Args } from './commands/command.ts'
import { declareOptions } from './declared-options.ts'

/** The flags of a sealed run (record and replay, which wrap a command), as SEALED_OPTIONS declares them. */
export function sealedOptions(y: Argv): Argv {
  return declareOptions(y, SEALED_OPTIONS)
}

/** The sealed run asked for, or undefined; a --bridge without --sealed is refused (it would do nothing). */
export function sealedFromArgs(args: Args): SealedOptions | undefined {
  const { sealed, bridges = [] } = optionsFromFlags(SEALED_OPTIONS, args)
  if (!sealed) {
    if (bridges.length > 0)
      throw new ToolReplayError(ErrorCodes.INVALID_OPTION, '--bridge reaches a host service from a sealed run: add --sealed, or drop --bridge.')
    return undefined
  }
  return bridges.length > 0 ? { bridges } : {}
}

/** The line that ends an unsealed strict replay in CI when sealing works here; undefined when it does not apply. */
export function sealedHint(args: Args, mode: Mode, strict: boolean, command: readonly string[], env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (args.sealed || mode !== 'replay' || !strict || command.length === 0 || !/^(true|1)$/i.test(env.CI ?? '')) return undefined
  if (!sealSupport().ok) return undefined
  return 'hint: this strict replay ran unsealed, so a client that ignores the proxy variables could have reached the network unseen; sealing works on this machine: add --sealed (tr-proxy replay --strict --sealed -- <command>).'
}
