import type { Argv } from 'yargs'
import { loadConfig, mergeRedaction, type RedactionOptions } from '../engine/index.ts'

/** The redaction flags of record, replay, serve, import, import-har and fork (and `scan`, which checks stores against them). */
export function redactionOptions(y: Argv): Argv {
  return y
    .option('redact-header', {
      type: 'string',
      array: true,
      describe: 'Also redact this header (repeatable; authorization, cookie, x-api-key, ... always are)',
    })
    .option('redact-query', { type: 'string', array: true, describe: 'Also redact this query parameter (repeatable; api_key, token, key, ... always are)' })
    .option('redact-body-path', {
      type: 'string',
      array: true,
      describe: 'Redact this JSON path in request and response bodies, compressed ones too (repeatable), e.g. $.api_key',
    })
    .option('config', {
      type: 'string',
      describe: 'Settings file whose "redaction" applies too (default: $TOOL_REPLAY_CONFIG, else .tool-replay/config.json if present)',
    })
}

/** The settings file's redaction merged with the flags (a union: the same settings install() reads). */
export async function redactionFromArgs(args: Record<string, unknown>): Promise<RedactionOptions> {
  const list = (v: unknown) => (Array.isArray(v) ? v.map(String) : [])
  const { config } = await loadConfig(typeof args.config === 'string' ? { file: args.config } : {})
  return mergeRedaction(config.redaction, {
    headers: list(args['redact-header']),
    queryParams: list(args['redact-query']),
    bodyPaths: list(args['redact-body-path']),
  })
}

/** The line that says an import or a fork stored redacted values ('' when nothing was redacted). */
export function redactedNote(changed: number): string {
  if (changed === 0) return ''
  return `\nRedacted credentials in ${changed} exchange${changed === 1 ? '' : 's'} before storing (headers, query parameters, URL passwords, configured body paths), as a recording does.`
}
