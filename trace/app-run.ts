/**
 * The application's outcome as a reader sees it (`tr-proxy show`): the command a run was made with, its exit
 * and the end of its output. The model is `AppRun` (exchange.ts); its rules are in validate.ts.
 */
import { type AppRun, OUTPUT_TAIL_BYTES, type OutputTail } from './exchange.ts'

/** A command line as a shell would take it back: arguments with spaces or quotes are single-quoted. */
export function shellLine(argv: readonly string[]): string {
  return argv.map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replaceAll("'", `'\\''`)}'`)).join(' ')
}

/** `app: node decide.ts (in /src) → exit 0` and the tails of stdout and stderr, indented. */
export function formatAppRun(app: AppRun): string {
  const where = app.cwd !== undefined ? ` (in ${app.cwd})` : ''
  if (!app.exit) return `app: ${shellLine(app.command)}${where} → not run against this trace yet (a fork keeps the command of its source)`
  const e = app.exit
  const lines = [`app: ${shellLine(app.command)}${where} → exit ${e.code}${e.signal ? ` (${e.signal})` : ''}`]
  for (const [name, tail] of [
    ['stdout', e.stdout],
    ['stderr', e.stderr],
  ] as const) {
    lines.push(`  ${name}: ${tailHeading(tail)}`)
    if (tail.text !== '') for (const line of tail.text.replace(/\n$/, '').split('\n')) lines.push(`    ${line}`)
  }
  return lines.join('\n')
}

function tailHeading(t: OutputTail): string {
  if (t.bytes === 0) return '(empty)'
  return t.bytes > OUTPUT_TAIL_BYTES ? `last ${OUTPUT_TAIL_BYTES} of ${t.bytes} bytes` : `${t.bytes} bytes`
}
