import type { CommandModule } from './command.ts'
import { exportCommand } from './export.ts'
import { importCommand } from './import.ts'
import { lsCommand } from './ls.ts'
import { showCommand } from './show.ts'

/** Every CLI command, in --help order. Each lives in its own file. */
export const COMMANDS: CommandModule[] = [lsCommand, showCommand, exportCommand, importCommand]
