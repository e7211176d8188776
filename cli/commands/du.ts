import { diskUsage } from '../../store/index.ts'
import { formatBytes, table } from '../format.ts'
import { storeDir, withReadOnlyStore } from '../open-store.ts'
import type { CommandModule } from './command.ts'

/** `tr-proxy du`: the space each trace's bodies take, what the store takes on disk, and what gc would free. */
export const duCommand: CommandModule = {
  command: 'du',
  describe: "Show the space each trace's bodies take (shared bodies are stored once), the store's size on disk and what `gc` would free",
  builder: (y) => y,
  run: async (args, io) =>
    withReadOnlyStore(args, async (store) => {
      const traces = await store.usage()
      const reclaimable = await store.gc({ dryRun: true })
      const disk = await diskUsage(storeDir(args))
      if (args.json) {
        io.out(JSON.stringify({ ok: true, store: store.location, traces, disk, reclaimable }))
        return 0
      }
      const rows = traces.map((t) => [t.name, t.status, String(t.exchanges), String(t.bodies), formatBytes(t.bytes), formatBytes(t.shared)])
      if (rows.length > 0) io.out(table([['NAME', 'STATUS', 'EXCHANGES', 'BODIES', 'SIZE', 'SHARED'], ...rows]))
      io.out(
        `Store ${store.location}: ${formatBytes(disk.database + disk.pieces)} on disk (database ${formatBytes(disk.database)}, pieces ${formatBytes(disk.pieces)}); \`tr-proxy gc\` would free ${formatBytes(reclaimable.bytes)} (${reclaimable.bodies} unreferenced bodies, ${reclaimable.pieces} piece files).`,
      )
      return 0
    }),
}
