import type { CommandModule } from './command.ts'

/** A command as a start finds it: the words that name it, and its module, imported only when needed. */
export interface CommandEntry {
  readonly names: readonly string[]
  readonly load: () => Promise<CommandModule>
}

/**
 * Every CLI command, in --help order. Each lives in its own file and is imported when the command line names
 * it, so a start loads the libraries of the command it runs (`ls` reads the store; it does not load the proxy,
 * undici, the inspector or the case runner). cli/cli.test.ts checks these names against each command's own.
 */
export const COMMAND_ENTRIES: readonly CommandEntry[] = [
  { names: ['ls', 'list'], load: async () => (await import('./ls.ts')).lsCommand },
  { names: ['show'], load: async () => (await import('./show.ts')).showCommand },
  { names: ['export'], load: async () => (await import('./export.ts')).exportCommand },
  { names: ['import'], load: async () => (await import('./import.ts')).importCommand },
  { names: ['import-har'], load: async () => (await import('./import-har.ts')).importHarCommand },
  { names: ['export-har'], load: async () => (await import('./export-har.ts')).exportHarCommand },
  { names: ['export-msw'], load: async () => (await import('./export-msw.ts')).exportMswCommand },
  { names: ['rm'], load: async () => (await import('./rm.ts')).rmCommand },
  { names: ['fsck'], load: async () => (await import('./fsck.ts')).fsckCommand },
  { names: ['gc'], load: async () => (await import('./gc.ts')).gcCommand },
  { names: ['du'], load: async () => (await import('./du.ts')).duCommand },
  { names: ['fork'], load: async () => (await import('./fork.ts')).forkCommand },
  { names: ['diff'], load: async () => (await import('./diff.ts')).diffCommand },
  { names: ['drift'], load: async () => (await import('./drift.ts')).driftCommand },
  { names: ['check'], load: async () => (await import('./check.ts')).checkCommand },
  { names: ['emit-test'], load: async () => (await import('./emit-test.ts')).emitTestCommand },
  { names: ['verify'], load: async () => (await import('./verify.ts')).verifyCommand },
  { names: ['scan'], load: async () => (await import('./scan.ts')).scanCommand },
  { names: ['assets'], load: async () => (await import('./assets.ts')).assetsCommand },
  { names: ['record'], load: async () => (await import('./record.ts')).recordCommand },
  { names: ['replay'], load: async () => (await import('./replay.ts')).replayCommand },
  { names: ['serve'], load: async () => (await import('./serve.ts')).serveCommand },
  { names: ['mcp'], load: async () => (await import('./mcp.ts')).mcpCommand },
  { names: ['session'], load: async () => (await import('./session.ts')).sessionCommand },
  { names: ['env'], load: async () => (await import('./env.ts')).envCommand },
  { names: ['ca'], load: async () => (await import('./ca.ts')).caCommand },
  { names: ['doctor'], load: async () => (await import('./doctor.ts')).doctorCommand },
  { names: ['demo'], load: async () => (await import('./demo.ts')).demoCommand },
  { names: ['inspect'], load: async () => (await import('./inspect.ts')).inspectCommand },
]

/** Every command, loaded: for --help, a usage error or a name that is no command (yargs suggests the nearest). */
export function loadAllCommands(): Promise<CommandModule[]> {
  return Promise.all(COMMAND_ENTRIES.map((e) => e.load()))
}

/**
 * The commands a command line needs: the one it names, or all of them when its first word is no command's
 * name.
 */
export async function commandsFor(argv: readonly string[]): Promise<CommandModule[]> {
  // `--version` alone needs no command (loading all of them took ~0.3 s of a start).
  if (argv.length === 1 && argv[0] === '--version') return []
  const word = commandWord(argv)
  const entry = word === undefined ? undefined : COMMAND_ENTRIES.find((e) => e.names.includes(word))
  return entry ? [await entry.load()] : loadAllCommands()
}

/** The first word, when only the global options (`--store DIR`, `--store=DIR`, `--json`, `--no-json`) come before it. */
export function commandWord(argv: readonly string[]): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string
    if (a === '--store') i++
    else if (a.startsWith('--store=') || a === '--json' || a === '--no-json') continue
    // Any other option first (`--trace NAME ls`): its value could look like a command; yargs decides with all.
    else return a.startsWith('-') ? undefined : a
  }
  return undefined
}
