import type { Argv } from 'yargs'
import { CONFIG_OPTIONS, loadConfig, mergeRedaction, REDACTION_OPTIONS, type RedactionOptions } from '../engine/index.ts'
import { optionsFromFlags } from '../trace/index.ts'
import { declareOptions } from './declared-options.ts'

/** The redaction flags of record, replay, serve, import, import-har and fork (and `scan`, which checks stores against them). */
export function redactionOptions(y: Argv): Argv {
  return declareOptions(declareOptions(y, REDACTION_OPTIONS), CONFIG_OPTIONS)
}

/** The settings file's redaction merged with the flags (a union: the same settings install() reads). */
export async function redactionFromArgs(args: Record<string, unknown>): Promise<RedactionOptions> {
  const { config: file } = optionsFromFlags(CONFIG_OPTIONS, args)
  const { config } = await loadConfig(file !== undefined ? { file } : {})
  return mergeRedaction(config.redaction, optionsFromFlags(REDACTION_OPTIONS, args))
}

/** The line that says an import or a fork stored redacted values ('' when nothing was redacted). */
export function redactedNote(changed: number): string {
  if (changed === 0) return ''
  return `\nRedacted credentials in ${changed} exchange${changed === 1 ? '' : 's'} before storing (headers, query parameters, URL passwords, configured body paths), as a recording does.`
}
