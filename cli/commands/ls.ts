import { table } from '../format.ts'
import { withReadOnlyStore } from '../open-store.ts'
import type { CommandModule } from './command.ts'

/** `tr-proxy ls`: traces in the store: complete, recording (a live process is writing it) and partial (it died). */
export const lsCommand: CommandModule = {
  command: ['ls', 'list'],
  describe: 'List the traces in the store: complete; recording (a live process is still writing it); partial (its process died before closing it)',
  builder: (y) => y,
  run: async (args, io) =>
    withReadOnlyStore(args, async (store) => {
      const traces = await store.listTraces()
      if (args.json) io.out(JSON.stringify({ ok: true, store: store.location, traces }))
      else if (traces.length === 0) io.out(`No traces in ${store.location}. Record one with \`tr-proxy record --trace NAME -- <command>\`.`)
      else {
        io.out(table([['NAME', 'STATUS', 'EXCHANGES', 'CREATED'], ...traces.map((t) => [t.name, t.status, String(t.exchanges), t.createdAt])]))
        if (traces.some((t) => t.status === 'partial'))
          io.out(
            'partial: the recording process died first; see it with `show NAME --partial`, keep it with `export NAME --partial`, drop it with `rm NAME --partial`.',
          )
      }
      return 0
    }),
}
