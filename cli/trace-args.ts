import { existsSync } from 'node:fs'
import { resolve } from 'node:path'
import { readTraceFile, type TraceStore } from '../store/index.ts'
import { ErrorCodes, ToolReplayError, type Trace } from '../trace/index.ts'
import { withExistingStore, withReadOnlyStore } from './open-store.ts'

/** True when a trace argument names an existing trace file rather than a trace in the store. */
export const isTraceFileArg = (x: string): boolean => x.endsWith('.json') && existsSync(x)

/**
 * Runs `fn` with a loader of traces given as names in the store or as trace files; the store is opened
 * only when one of `names` is not a file, so checking a file works without (or beside) a running store.
 * `fn` also gets that store, when it was opened: read-only (nothing on disk changes) unless `writable` says
 * `fn` writes to it (`drift --update`).
 */
export async function withTraceLoader<T>(
  args: { store?: unknown; writable?: boolean },
  names: string[],
  fn: (load: (x: string) => Promise<Trace>, store?: TraceStore) => Promise<T>,
): Promise<T> {
  const fromFile = (x: string) => readTraceFile(resolve(x))
  if (names.every(isTraceFileArg)) return fn(fromFile)
  return (args.writable ? withExistingStore : withReadOnlyStore)(args, (store: TraceStore) =>
    fn(async (x) => {
      if (isTraceFileArg(x)) return fromFile(x)
      if (x.endsWith('.json') && !(await store.hasTrace(x))) {
        throw new ToolReplayError(
          ErrorCodes.TRACE_NOT_FOUND,
          `No trace file ${resolve(x)} and no trace named "${x}" in ${store.location}. Check the path or the name.`,
        )
      }
      return store.readTrace(x)
    }, store),
  )
}
