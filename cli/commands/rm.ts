import { ErrorCodes, ToolReplayError } from '../../trace/index.ts'
import { withExistingStore } from '../open-store.ts'
import type { CommandModule } from './command.ts'

/** `tr-proxy rm TRACE...`: delete complete traces by name. */
export const rmCommand: CommandModule = {
  command: 'rm <traces..>',
  describe: 'Delete traces from the store by name (bodies other traces share are kept)',
  builder: (y) =>
    y.positional('traces', { type: 'string', array: true, describe: 'Trace names' }).option('partial', {
      type: 'boolean',
      default: false,
      describe: 'Delete the recordings of those names that never completed (never one still recording)',
    }),
  run: async (args, io) =>
    withExistingStore(args, async (store) => {
      const names = (args.traces as string[]).map(String)
      // Check every name first, so a typo deletes nothing.
      const partial = args.partial === true
      const existing = new Set((await store.listTraces()).filter((t) => t.status === (partial ? 'partial' : 'complete')).map((t) => t.name))
      const unknown = names.filter((n) => !existing.has(n))
      if (unknown.length > 0) {
        throw new ToolReplayError(
          ErrorCodes.TRACE_NOT_FOUND,
          `Nothing deleted: no ${partial ? 'partial recording' : 'trace'} named ${unknown.map((n) => `"${n}"`).join(', ')} in the store at ${store.location}. See \`tr-proxy ls\`.`,
          { details: { unknown } },
        )
      }
      for (const name of names) await store.deleteTrace(name, { partial })
      if (args.json) io.out(JSON.stringify({ ok: true, deleted: names }))
      else io.out(`Deleted ${names.map((n) => `"${n}"`).join(', ')}.`)
      return 0
    }),
}
