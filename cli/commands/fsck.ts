import { resolve } from 'node:path'
import { checkStore } from '../../store/index.ts'
import { EXIT_CODES } from '../exit-codes.ts'
import { storeDir } from '../open-store.ts'
import type { CommandModule } from './command.ts'

/** `tr-proxy fsck [--export-to DIR]`: check every trace, exchange and body of a store; rescue what is intact. */
export const fsckCommand: CommandModule = {
  command: 'fsck',
  describe:
    'Check every trace, exchange and body in the store (bodies against their SHA-256) without changing it; --export-to writes what is intact as trace files',
  builder: (y) => y.option('export-to', { type: 'string', describe: "Directory to write every trace's intact exchanges to, as trace files" }),
  run: async (args, io) => {
    const dir = storeDir(args)
    const exportTo = typeof args['export-to'] === 'string' ? resolve(args['export-to']) : undefined
    const report = await checkStore(dir, exportTo ? { exportTo } : {})
    const code = report.ok ? 0 : EXIT_CODES.TR_STORE_CORRUPT
    if (args.json) {
      io.out(JSON.stringify({ ok: report.ok, report, exitCode: code }))
      return code
    }
    const damaged = report.traces.filter((t) => t.damage.length > 0)
    const lines = [`store ${report.location}: ${report.traces.length} trace(s), ${report.traces.length - damaged.length} intact, ${damaged.length} damaged`]
    if (report.openProblem) {
      lines.push('The store cannot be opened as it is (nothing was changed); its files were read as they are. Damaged files:')
      for (const f of report.files ?? []) lines.push(`  - ${f}`)
    }
    for (const t of report.traces) {
      const state = t.damage.length === 0 ? 'intact' : `DAMAGED: ${t.intact} of ${t.exchanges} exchange(s) intact`
      lines.push(`  ${t.name} (${t.status}, ${t.exchanges} exchange(s)): ${state}${t.exported ? ` -> ${t.exported}` : ''}`)
      for (const d of t.damage.slice(0, 10)) lines.push(`    - ${d}`)
      if (t.damage.length > 10) lines.push(`    ... and ${t.damage.length - 10} more`)
    }
    if (!report.ok && !exportTo)
      lines.push('Rescue every trace that is intact on disk with `tr-proxy fsck --export-to DIR`, then move the store aside and `tr-proxy import` the files.')
    else if (!report.ok)
      lines.push(
        `Rescued what is intact into ${exportTo}. Move the store aside (the damaged files are named above), then \`tr-proxy import\` the files into a new store.`,
      )
    ;(report.ok ? io.out : io.err)(lines.join('\n'))
    return code
  },
}
