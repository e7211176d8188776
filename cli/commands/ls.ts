import { table } from '../format.ts'
import { withExistingStore } from '../open-store.ts'
import type { CommandModule } from './command.ts'

/** `tr-proxy ls`: traces in the store, complete and partial. */
export const lsCommand: CommandModule = {
  command: ['ls', 'list'],
  describe: 'List the traces in the store (partial = a recording that never closed)',
  builder: (y) => y,
  run: async (args, io) =>
    withExistingStore(args, async (store) => {
      const traces = await store.listTraces()
      if (args.json) io.out(JSON.stringify({ ok: true, store: store.location, traces }))
      else if (traces.length === 0) io.out(`No traces in ${store.location}. Record one with \`tr-proxy record --trace NAME -- <command>\`.`)
      else io.out(table([['NAME', 'STATUS', 'EXCHANGES', 'CREATED'], ...traces.map((t) => [t.name, t.status, String(t.exchanges), t.createdAt])]))
      return 0
    }),
}
