/** `--durability`, for every command that records into the store (record, replay --record-as, serve, mcp). */
import type { Argv } from 'yargs'
import { DURABILITY_LEVELS, DURABILITY_OPTION, type Durability, parseDurability } from '../store/index.ts'
import type { Args } from './commands/command.ts'

/** Adds the flag as store/durability.ts declares it. */
export function durabilityOptions(y: Argv): Argv {
  return y.option('durability', { ...DURABILITY_OPTION, choices: [...DURABILITY_LEVELS] })
}

/** The level asked for (checked: a value not among the levels is TR_INVALID_OPTION). */
export function durabilityFromArgs(args: Args): Durability {
  return parseDurability(args.durability)
}
