import { ErrorCodes } from '../../trace/index.ts'
import { EXIT_CODES } from '../exit-codes.ts'
import { storeDir } from '../open-store.ts'
import { redactionFromArgs, redactionOptions } from '../redaction-flags.ts'
import { type ScanReport, scanTarget, secretsFound } from '../scan-target.ts'
import type { CommandModule } from './command.ts'

/** `tr-proxy scan [STORE|FILE|CASE]`: look for credentials in decoded traces; exit TR_SECRET_FOUND's code on any finding. */
export const scanCommand: CommandModule = {
  command: 'scan [target]',
  describe: `Search a store, a trace file, a case or a directory of trace files for values that look like credentials (decoded: compressed bodies, raw JSON text, store values); exit ${EXIT_CODES[ErrorCodes.SECRET_FOUND]} on any`,
  builder: (y) =>
    redactionOptions(y)
      .positional('target', { type: 'string', describe: 'Store directory, trace file, case directory or directory of trace files (default: the store)' })
      .example('$0 scan', 'Scan the store (--store, $TOOL_REPLAY_STORE or ./.tool-replay/store)')
      .example('$0 scan traces/ --redact-body-path "$.api_key"', 'Scan exported trace files, also requiring $.api_key to be redacted'),
  run: async (args, io) => {
    const redaction = await redactionFromArgs(args)
    const target = typeof args.target === 'string' ? args.target : storeDir(args)
    const report = await scanTarget(target, redaction)
    if (report.findings.length > 0) {
      if (!args.json)
        for (const f of report.findings)
          io.out(`${f.source}: trace "${f.trace}"${f.seq === undefined ? '' : ` #${f.seq}`} ${f.side} ${f.where}: ${f.kind} ${f.preview}`)
      throw secretsFound(report)
    }
    if (args.json) io.out(JSON.stringify({ ok: true, ...report }))
    else io.out(summary(report))
    return 0
  },
}

function summary(r: ScanReport): string {
  const read = `${r.traces} trace${r.traces === 1 ? '' : 's'} (${r.exchanges} exchange${r.exchanges === 1 ? '' : 's'})${r.documents > 0 ? ` and ${r.documents} other files` : ''}`
  const lines = [`Scanned ${read} in ${r.kind} ${r.target}: no values that look like credentials.`]
  for (const s of r.skipped) lines.push(`NOT scanned: trace "${s.trace}": ${s.reason}.`)
  return lines.join('\n')
}
