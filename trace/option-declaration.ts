/**
 * Options declared once: each with its name in code (the table's key), its command-line flag, its type, its
 * default and its help. The option types (OptionInputs as code gives them, OptionValues as code holds them),
 * the check of a value given on the command line (optionsFromFlags) or in code (optionsFromCode), the CLI's
 * flags and `--help` (cli/declared-options.ts) and docs/reference.md (scripts/reference.ts) are all read from
 * the tables, so none of them can drift from another (mitmproxy's `loader.add_option(name, type, default, help)`).
 */
import { ErrorCodes, ToolReplayError } from './errors.ts'

/**
 * One option: a flag of the commands that take it, an option of the library functions that take it. `T` is
 * the value as code holds it (what `parse` returns), `I` the value as code may give it (`parse`'s parameter).
 */
export interface OptionDeclaration<T = unknown, I = never> {
  /** The command-line flag, without `--`. */
  readonly flag: string
  /** 'strings': a repeatable flag (a list in code). */
  readonly type: 'string' | 'number' | 'boolean' | 'strings'
  /**
   * The value when the option is not given. With a `unit`, the default is stated in the help and left to the
   * library (the flag stays unset when not given); without one, the CLI shows and applies it.
   */
  readonly default?: string | number | boolean
  /** The values allowed, when they are a fixed list. */
  readonly choices?: readonly string[]
  /** A one-letter alias of the flag. */
  readonly alias?: string
  /** The unit of a number (ms, bytes, ...), for help and the reference page. */
  readonly unit?: string
  /** What it does: the help text, one sentence or two. */
  readonly help: string
  /**
   * Checks a given value and returns it as code holds it; TR_INVALID_OPTION naming `name` (the flag as typed, or
   * the option in code) otherwise. Without it the value is checked against `type` and `choices`. Its parameter's
   * type is what code may give (OptionInput: `pace` takes 'recorded', 0.1 or a parsed Pace and holds a Pace);
   * whatever its type says, it is called with anything (the command line's text, a JavaScript caller's value)
   * and must check it.
   */
  readonly parse?: (value: I, name: string) => T
}

/** Options keyed by their name in code. */
export type OptionTable = Readonly<Record<string, OptionDeclaration>>

/** The value an option holds in code, as its declaration says. */
export type OptionValue<D> = D extends { readonly parse: (value: never, name: string) => infer T }
  ? T
  : D extends { readonly choices: readonly (infer C)[] }
    ? C
    : D extends { readonly type: 'strings' }
      ? string[]
      : D extends { readonly type: 'number' }
        ? number
        : D extends { readonly type: 'boolean' }
          ? boolean
          : string

/** The value code may give an option: what its `parse` takes when it says (not `unknown`), else what it holds. */
export type OptionInput<D> = D extends { readonly parse: (value: infer I, name: string) => unknown } ? (unknown extends I ? OptionValue<D> : I) : OptionValue<D>

/** The options of a table as code holds them, checked (each optional). */
export type OptionValues<T extends OptionTable> = { -readonly [K in keyof T]?: OptionValue<T[K]> }

/** The options of a table as code gives them (each optional): what a library function's options type takes. */
export type OptionInputs<T extends OptionTable> = { -readonly [K in keyof T]?: OptionInput<T[K]> }

/** The help line of an option: its help, then its unit and default when the library applies the default. */
export function optionHelp(d: OptionDeclaration): string {
  return d.unit !== undefined && d.default !== undefined ? `${d.help} (${d.unit}; default ${d.default})` : d.help
}

/** Checks one value against its declaration; `name` is how the caller wrote it (`--pace`, `pace`). */
export function parseOption<D extends OptionDeclaration>(d: D, value: unknown, name: string): OptionValue<D> {
  // Called with what was given, whatever it is: every parse checks its input (see OptionDeclaration.parse).
  if (d.parse) return (d.parse as (value: unknown, name: string) => unknown)(value, name) as OptionValue<D>
  const ok =
    d.type === 'strings'
      ? Array.isArray(value) && value.every((v) => typeof v === 'string' || typeof v === 'number')
      : d.type === 'number'
        ? typeof value === 'number' && Number.isFinite(value)
        : typeof value === d.type
  if (ok && (d.choices === undefined || d.choices.includes(value as string))) {
    return (d.type === 'strings' ? (value as unknown[]).map(String) : value) as OptionValue<D>
  }
  const expected = d.choices ? `one of ${d.choices.map((c) => `"${c}"`).join(', ')}` : d.type === 'strings' ? 'a list of strings' : `a ${d.type}`
  throw new ToolReplayError(ErrorCodes.INVALID_OPTION, `Invalid ${name} ${JSON.stringify(value) ?? String(value)}: give ${expected}.`)
}

/**
 * The options given on a command line (parsed arguments keyed by flag), by name in code and checked; flags not
 * given are left out, so the library applies its defaults.
 * @example optionsFromFlags(REDACTION_OPTIONS, { 'redact-header': ['x-token'] }) // { headers: ['x-token'] }
 */
export function optionsFromFlags<T extends OptionTable>(table: T, args: Readonly<Record<string, unknown>>): OptionValues<T> {
  const out: Record<string, unknown> = {}
  for (const [key, d] of Object.entries(table)) {
    const value = args[d.flag]
    if (value !== undefined) out[key] = parseOption(d, value, `--${d.flag}`)
  }
  return out as OptionValues<T>
}

/**
 * The options a library function was given in code (`install({ pace, maxBodyBytes })`), checked by the same
 * declarations as their flags: each given value parsed, TR_INVALID_OPTION naming the option as code spells it
 * (`prefix` for a nested object: `redaction.`); keys of other tables are left to them, values not given left out.
 * @example optionsFromCode(SESSION_OPTIONS, { maxBodyBytes: 0 }) // throws: Invalid maxBodyBytes 0: give a whole number of bytes > 0 ...
 */
export function optionsFromCode<T extends OptionTable>(table: T, given: object | undefined, prefix = ''): OptionValues<T> {
  const out: Record<string, unknown> = {}
  for (const [key, d] of Object.entries(table)) {
    const value = (given as Record<string, unknown> | undefined)?.[key]
    if (value !== undefined) out[key] = parseOption(d, value, `${prefix}${key}`)
  }
  return out as OptionValues<T>
}
