/**
 * `tr-proxy assets restore`: the traces the pointer pins, fetched from the assets repository into the cache
 * (shallow, and only those traces' files) and imported into the store, where every replay path (the proxy,
 * install(), the test setups, cases) already reads. Importing rather than teaching replay a second source
 * keeps one way in: the store verifies every body, and nothing else changes.
 *
 * Order, so a failure leaves the store as it was: fetch and check every trace (its file's SHA-256s, its digest
 * against the pointer's), then check the store for local traces that would be replaced, then import.
 *
 * Traces of any length: each file is read as a stream, twice (once to check it, once to import what must be),
 * and never held whole, nor is the store's trace it is compared with (its digest is taken as an export takes it).
 */
import { rm } from 'node:fs/promises'
import { join } from 'node:path'
import { storedTraceSource, TraceFileReader, type TraceStore, traceFileBlobDigestsIn, traceFileDigest } from '../store/index.ts'
import { ErrorCodes, isToolReplayError, ToolReplayError } from '../trace/index.ts'
import { withAssetRepo } from './asset-cache.ts'
import { blobPath, traceFilePath } from './layout.ts'
import { type AssetsPointer, gitRemote, readPointer } from './pointer.ts'

/** Options of `restoreAssets`. */
export interface RestoreOptions {
  pointerFile: string
  store: TraceStore
  cacheDir: string
  /** Replace store traces that differ from the pinned ones (local re-recordings not pushed). */
  force?: boolean
  lockTimeoutMs?: number
}

/** What restore did. */
export interface RestoreResult {
  remote: string
  tag: string
  /** False when the cache already held the tag (nothing was downloaded for it). */
  fetched: boolean
  traces: Array<{ name: string; digest: string; action: 'imported' | 'replaced' | 'unchanged' }>
}

/** Restores the pinned traces into the store. */
export async function restoreAssets(options: RestoreOptions): Promise<RestoreResult> {
  const pointer = await readPointer(options.pointerFile)
  const tag = pointer.tag
  if (tag === undefined) {
    throw new ToolReplayError(
      ErrorCodes.ASSETS_INVALID,
      `The assets pointer ${options.pointerFile} names no tag yet: nothing was pushed. Push recordings with \`tr-proxy assets push\`.`,
    )
  }
  const names = Object.keys(pointer.traces).sort()
  return withFetchedTraces(pointer, tag, names, options, async (files, fetched) => {
    for (const [i, name] of names.entries()) await verifyTraceFile(files[i] as string, name, pointer, tag)
    const plan: RestoreResult['traces'] = []
    for (const name of names) {
      const digest = pointer.traces[name] as string
      const local = await storedDigest(options.store, name)
      if (local !== undefined && local !== digest && !options.force) {
        throw new ToolReplayError(
          ErrorCodes.TRACE_EXISTS,
          `The store's trace "${name}" differs from the one the assets pointer pins (store ${local.slice(0, 12)}, pinned ${digest.slice(0, 12)}): a local recording not pushed yet? Push it (\`tr-proxy assets push ${name}\`), or restore --force to replace it with the pinned one.`,
          { details: { trace: name, store: local, pinned: digest } },
        )
      }
      plan.push({ name, digest, action: local === undefined ? 'imported' : local === digest ? 'unchanged' : 'replaced' })
    }
    for (const [i, step] of plan.entries()) {
      if (step.action !== 'unchanged') await importTraceFile(options.store, files[i] as string, step.digest, step.action === 'replaced')
    }
    return { remote: pointer.remote, tag, fetched, traces: plan }
  })
}

/** Fetches the tag and the named traces' files (and the blobs they name) into a folder of the cache, for `use`. */
async function withFetchedTraces<T>(
  pointer: AssetsPointer,
  tag: string,
  names: string[],
  options: RestoreOptions,
  use: (files: string[], fetched: boolean) => Promise<T>,
): Promise<T> {
  return withAssetRepo(
    options.cacheDir,
    gitRemote(pointer.remote, options.pointerFile),
    async (repo) => {
      const { commit, fetched } = await repo.fetchTag(tag)
      const files = await repo.listFiles(commit, pointer.dir)
      const missing = names.filter((n) => !files.has(traceFilePath(pointer.dir, n)))
      if (missing.length > 0) {
        const held = [...files.keys()].filter((p) => p.endsWith('.trace.json')).map((p) => p.slice(pointer.dir.length + 1, -'.trace.json'.length))
        throw new ToolReplayError(
          ErrorCodes.TRACE_NOT_FOUND,
          `Tag "${tag}" of ${pointer.remote} has no trace ${missing.map((n) => `"${n}"`).join(', ')} in ${pointer.dir}/ (it holds: ${held.join(', ') || 'none'}). Fix "traces" in the pointer, or push the traces.`,
          { details: { tag, missing, held } },
        )
      }
      const into = await repo.tempDir('restore-')
      try {
        await repo.writeFiles(
          commit,
          names.map((n) => traceFilePath(pointer.dir, n)),
          into,
          files,
        )
        // Only the blobs these traces name: the rest of the tag stays on the remote.
        const blobs = new Set<string>()
        for (const n of names) for (const d of await traceFileBlobDigestsIn(join(into, traceFilePath(pointer.dir, n)))) blobs.add(blobPath(pointer.dir, d))
        await repo.writeFiles(
          commit,
          [...blobs].filter((p) => files.has(p)),
          into,
          files,
        )
        return await use(
          names.map((n) => join(into, traceFilePath(pointer.dir, n))),
          fetched,
        )
      } finally {
        await rm(into, { recursive: true, force: true })
      }
    },
    options.lockTimeoutMs !== undefined ? { lockTimeoutMs: options.lockTimeoutMs } : {},
  )
}

/** Reads a restored trace file through (every body's SHA-256 and the file's digest checked) and holds it to the pointer. */
async function verifyTraceFile(file: string, name: string, pointer: AssetsPointer, tag: string): Promise<void> {
  const reader = await TraceFileReader.open(file)
  const pinned = pointer.traces[name] as string
  // The digest the file records is checked against its content once every exchange was read.
  for await (const _ of reader.exchanges());
  if (reader.meta.name !== name || reader.digest !== pinned) {
    throw new ToolReplayError(
      ErrorCodes.TRACE_DIGEST_MISMATCH,
      `Tag "${tag}" of ${pointer.remote} holds a trace "${name}" that is not the one the assets pointer pins (digest ${reader.digest.slice(0, 12)}, pinned ${pinned.slice(0, 12)}${reader.meta.name !== name ? `; the file names it "${reader.meta.name}"` : ''}): was the tag moved? Pin the tag your recordings were pushed under, or push again.`,
      { details: { tag, trace: name, digest: reader.digest, pinned } },
    )
  }
}

/** The trace-file digest of the store's trace `name` (what an export of it would record), or undefined when it has none. */
async function storedDigest(store: TraceStore, name: string): Promise<string | undefined> {
  if (!(await store.hasTrace(name))) return undefined
  return traceFileDigest(storedTraceSource(await store.openTrace(name)))
}

/** Streams a verified trace file into the store (staged, then committed under its name). */
async function importTraceFile(store: TraceStore, file: string, digest: string, replace: boolean): Promise<void> {
  const reader = await TraceFileReader.open(file, { refBytes: true })
  const stage = await store.stageTrace(reader.meta)
  try {
    for await (const { exchange, bodies } of reader.exchanges()) await stage.add(exchange, bodies)
  } catch (err) {
    await stage.discard()
    throw err
  }
  try {
    await stage.commit({ overwrite: replace })
  } catch (err) {
    // Another restore of the same tag into this store got there first: fine when it wrote the same trace.
    if (!isToolReplayError(err, ErrorCodes.TRACE_EXISTS)) throw err
    if ((await storedDigest(store, reader.meta.name)) !== digest) throw err
  }
}
