/**
 * `tr-proxy assets status`: what differs between the pointer and this machine, without changing anything:
 * per pinned trace, whether the store holds that exact trace (its trace-file digest), another one (recorded
 * here and not pushed) or none (restore it); whether the cache holds the tag; with `remote`, whether the
 * assets repository has it.
 */
import { storedTraceSource, type TraceStore, traceFileDigest } from '../store/index.ts'
import { cacheRepoPaths, localTagCommit } from './asset-cache.ts'
import { git } from './git.ts'
import { gitRemote, readPointer } from './pointer.ts'

/** Options of `assetsStatus`. */
export interface StatusOptions {
  pointerFile: string
  /** The store, or undefined when there is none yet (every trace is then missing). */
  store: TraceStore | undefined
  cacheDir: string
  /** Also ask the remote whether it has the tag (a network call). */
  remote?: boolean
}

/** The state of one pinned trace on this machine. */
export interface TraceAssetState {
  name: string
  pinned: string
  /** The digest of the store's trace of that name, when there is one. */
  local?: string
  /** same: the store holds the pinned trace; changed: another one; missing: none. */
  state: 'same' | 'changed' | 'missing'
}

/** What `assetsStatus` found. */
export interface AssetsStatus {
  remote: string
  tag?: string
  /** Whether the cache holds the tag (restore would not download it again). */
  cached: boolean
  /** Whether the remote has the tag (asked only with `remote: true`). */
  remoteHasTag?: boolean
  traces: TraceAssetState[]
  /** True when any trace is changed or missing, or the remote lacks the tag. */
  differs: boolean
}

/** Compares the pointer with the store and the cache. */
export async function assetsStatus(options: StatusOptions): Promise<AssetsStatus> {
  const pointer = await readPointer(options.pointerFile)
  const traces: TraceAssetState[] = []
  for (const name of Object.keys(pointer.traces).sort()) {
    const pinned = pointer.traces[name] as string
    // Streamed, as an export takes it: a trace of any length is compared without holding it.
    const local =
      options.store && (await options.store.hasTrace(name)) ? await traceFileDigest(storedTraceSource(await options.store.openTrace(name))) : undefined
    traces.push({ name, pinned, ...(local !== undefined ? { local } : {}), state: local === undefined ? 'missing' : local === pinned ? 'same' : 'changed' })
  }
  const tag = pointer.tag
  const url = gitRemote(pointer.remote, options.pointerFile)
  const cached = tag !== undefined && (await localTagCommit(cacheRepoPaths(options.cacheDir, url).gitDir, tag)) !== undefined
  const status: AssetsStatus = { remote: pointer.remote, cached, traces, differs: traces.some((t) => t.state !== 'same') }
  if (tag !== undefined) status.tag = tag
  if (options.remote && tag !== undefined) {
    // Asked without the cache repository: status changes nothing on disk.
    const r = await git(['ls-remote', '--tags', '--', url, `refs/tags/${tag}`])
    status.remoteHasTag = r.stdout.split('\n').some((l) => l.endsWith(`\trefs/tags/${tag}`))
    if (!status.remoteHasTag) status.differs = true
  }
  return status
}
