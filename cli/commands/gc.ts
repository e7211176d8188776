import { diskUsage } from '../../store/index.ts'
import { formatBytes } from '../format.ts'
import { storeDir, withExistingStore, withReadOnlyStore } from '../open-store.ts'
import type { CommandModule } from './command.ts'

/** `tr-proxy gc [--dry-run]`: remove the bodies and pieces no trace references; safe while others record. */
export const gcCommand: CommandModule = {
  command: 'gc',
  describe:
    'Remove the bodies and body pieces no trace references (left by rm and re-recording), then compact the store; safe while other processes record. --dry-run only counts them',
  builder: (y) => y.option('dry-run', { type: 'boolean', default: false, describe: 'Count what would be removed; change nothing' }),
  run: async (args, io) => {
    const dryRun = args['dry-run'] === true
    const dir = storeDir(args)
    const open = dryRun ? withReadOnlyStore : withExistingStore
    const before = await diskUsage(dir)
    const report = await open(args, (store) => store.gc({ dryRun }))
    const after = await diskUsage(dir)
    const total = (u: { database: number; pieces: number }) => u.database + u.pieces
    if (args.json) {
      io.out(JSON.stringify({ ok: true, ...report, diskBefore: total(before), diskAfter: total(after) }))
      return 0
    }
    const what = `${report.bodies} bod${report.bodies === 1 ? 'y' : 'ies'} and ${report.pieces} piece file(s) no trace references (${formatBytes(report.bytes)})`
    const kept = report.keptRecent > 0 ? ` Kept ${report.keptRecent} newer piece file(s) a recording still running may use.` : ''
    io.out(
      dryRun
        ? `Would remove ${what}.${kept} Run \`tr-proxy gc\` to remove them.`
        : `Removed ${what}.${kept} The store takes ${formatBytes(total(after))} on disk (was ${formatBytes(total(before))}).`,
    )
    return 0
  },
}
