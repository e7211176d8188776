import type { Argv } from 'yargs'
import type { Io } from '../output.ts'

/** Parsed arguments as yargs hands them over. */
export type Args = Record<string, unknown> & { _: Array<string | number>; '--'?: Array<string | number>; rawArgv?: string[] }

/** One CLI command: thin. Parse, call the library, print, return an exit code. */
export interface CommandModule {
  command: string | string[]
  describe: string
  builder: (y: Argv) => Argv
  run: (args: Args, io: Io) => Promise<number>
}
