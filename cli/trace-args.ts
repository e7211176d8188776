import { existsSync } from 'node:fs'
import { resolve } from 'node:path'
import { readTraceFile, type TraceStore } from '../store/index.ts'
import { ErrorCodes, ToolReplayError, type Trace } from '../trace/index.ts'
import { withReadOnlyStore } from './open-store.ts'

const isFileArg = (x: string) => x.endsWith('.json') && existsSync(x)

/**
 * Runs `fn` with a loader of traces given as names in the store or as trace files; the store is opened
 * only when one of `names` is not a file, so checking a file works without (or beside) a running store.
 */
export async function withTraceLoader<T>(args: { store?: unknown }, names: string[], fn: (load: (x: string) => Promise<Trace>) => Promise<T>): Promise<T> {
  const fromFile = (x: string) => readTraceFile(resolve(x))
  if (names.every(isFileArg)) return fn(fromFile)
  return withReadOnlyStore(args, (store: TraceStore) =>
    fn(async (x) => {
      if (isFileArg(x)) return fromFile(x)
      if (x.endsWith('.json') && !(await store.hasTrace(x))) {
        throw new ToolReplayError(
          ErrorCodes.TRACE_NOT_FOUND,
          `No trace file ${resolve(x)} and no trace named "${x}" in ${store.location}. Check the path or the name.`,
        )
      }
      return store.readTrace(x)
    }),
  )
}
