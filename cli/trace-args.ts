import { existsSync, readdirSync, statSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { readTraceFile, type TraceStore } from '../store/index.ts'
import { ErrorCodes, ToolReplayError, type Trace } from '../trace/index.ts'
import { withExistingStore, withReadOnlyStore } from './open-store.ts'

/** How deep a folder given to `import` or `replay --trace-file` is searched for trace files (traces/<area>/<name>.trace.json is two). */
const MAX_DEPTH = 8

/** The trace files named: each file as given, each folder's `*.trace.json` files (sorted, its sub-folders too). */
export function traceFilesIn(paths: readonly string[], command: 'import' | 'replay'): string[] {
  const files: string[] = []
  const walk = (dir: string, depth: number) => {
    for (const name of readdirSync(dir).sort()) {
      const path = join(dir, name)
      if (name === 'node_modules' || name.startsWith('.')) continue
      const st = statSync(path)
      if (st.isDirectory() && depth < MAX_DEPTH) walk(path, depth + 1)
      else if (st.isFile() && name.endsWith('.trace.json')) files.push(path)
    }
  }
  for (const given of paths) {
    const path = resolve(given)
    if (!statSync(path, { throwIfNoEntry: false })?.isDirectory()) {
      files.push(path)
      continue
    }
    const before = files.length
    walk(path, 0)
    if (files.length === before) {
      throw new ToolReplayError(
        ErrorCodes.USAGE,
        `Failed to ${command} ${given}: the folder holds no *.trace.json file. Export traces with \`tr-proxy export NAME --out ${given}/NAME.trace.json\`.`,
      )
    }
  }
  return files
}

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
