/** The flags of declared options (trace/option-declaration.ts): yargs options read from the declarations. */
import type { Argv, Options } from 'yargs'
import { type OptionDeclaration, type OptionTable, optionHelp } from '../trace/index.ts'

/**
 * What a command may narrow of a declared option: its own default (`undefined`: none, the command finds one
 * itself), a subset of the choices, a note on what it does with the option. The help stays the declaration's.
 */
export interface Narrowing {
  readonly default?: string | number | boolean | undefined
  readonly choices?: readonly string[]
  /** Appended to the help, e.g. where this command takes the default from. */
  readonly note?: string
}

/** The yargs form of one declaration. */
export function yargsOption(d: OptionDeclaration, narrowing: Narrowing = {}): Options {
  const choices = narrowing.choices ?? d.choices
  const own = 'default' in narrowing
  const fallback = own ? narrowing.default : d.default
  const option: Options = { describe: narrowing.note ? `${optionHelp(d)}; ${narrowing.note}` : optionHelp(d) }
  // A choice flag shows its choices instead of a type (as yargs prints `[choices: ...]`).
  if (choices) option.choices = [...choices]
  else if (d.type === 'strings') Object.assign(option, { type: 'string', array: true })
  else option.type = d.type
  // With a unit the help states the default and the library applies it: the flag stays unset when not given.
  if (fallback !== undefined && (d.unit === undefined || own)) option.default = fallback
  if (d.alias) option.alias = d.alias
  return option
}

/**
 * Adds a table's options as flags, in the table's order; `only` picks some (in its order), `narrow` gives a
 * command's own default or choices.
 * @example declareOptions(y, REDACTION_OPTIONS)
 */
export function declareOptions<T extends OptionTable>(
  y: Argv,
  table: T,
  only?: ReadonlyArray<keyof T & string>,
  narrow: Partial<Record<keyof T & string, Narrowing>> = {},
): Argv {
  for (const key of only ?? Object.keys(table)) {
    const d = table[key] as OptionDeclaration
    y.option(d.flag, yargsOption(d, narrow[key]))
  }
  return y
}
