/**
 * A store opened read-only at the file level: the reads of StoreOps over a FileView of the directory, with
 * no LevelDB underneath, so nothing in the directory is created, renamed, rewritten or deleted (LevelDB
 * rewrites its directory on every open). Read-only commands use it when no process owns the store; when
 * one does, they read through it instead (store-rpc.ts) and see what it has not written out yet.
 *
 * If a process starts writing the store while it is read (its compactions delete tables), a file that
 * vanishes ends the view with StoreChanged; the caller then opens again, and finds the new owner.
 */
import { join } from 'node:path'
import { ErrorCodes, type Exchange, ToolReplayError } from '../trace/index.ts'
import { collectGarbage } from './gc.ts'
import { TableDamage } from './leveldb-table.ts'
import { FileView } from './leveldb-view.ts'
import { StoreChanged, type StoreFiles } from './store-files.ts'
import type { GcReport, StoredBody, StoreOps, TraceInfo, TraceSummary } from './store-ops.ts'
import { type KvRead, StoreReads } from './store-reads.ts'

export { StoreChanged }

/** A FileView as the key-value reader store-reads.ts reads through (its keys are latin1). */
export function viewKv(view: FileView): KvRead {
  const raw = (key: string) => Buffer.from(key, 'utf8').toString('latin1')
  return {
    get: (key) => view.get(raw(key)),
    scan: (r, visit) =>
      view.scan({ ...(r.gte !== undefined ? { gte: raw(r.gte) } : {}), ...(r.gt !== undefined ? { gt: raw(r.gt) } : {}), lt: raw(r.lt) }, (k, v) =>
        visit(Buffer.from(k, 'latin1').toString('utf8'), v),
      ),
  }
}

/** The read-only backend; its write operations throw TR_STORE_READ_ONLY. */
export class FileBackend implements StoreOps {
  readonly location: string
  readonly #view: FileView
  readonly #reads: StoreReads

  private constructor(location: string, view: FileView) {
    this.location = location
    this.#view = view
    this.#reads = new StoreReads(location, viewKv(view), join(location, 'pieces'))
  }

  /** A view of `files` (already checked: no problems) as LevelDB would serve them. */
  static async open(files: StoreFiles): Promise<FileBackend> {
    const view = await FileView.live(files.dir, files.manifest?.tables ?? [], files.liveLogs, files.names).catch((err) => {
      throw mapError(files.dir, err)
    })
    return new FileBackend(files.dir, view)
  }

  /** Reads over an existing view (fsck's rescue view). */
  static over(location: string, view: FileView): FileBackend {
    return new FileBackend(location, view)
  }

  close(): Promise<void> {
    return this.#view.close()
  }

  listTraces(): Promise<TraceSummary[]> {
    return this.#io(() => this.#reads.listTraces())
  }
  completeId(name: string): Promise<string | undefined> {
    return this.#io(() => this.#reads.completeId(name))
  }
  recordingIds(name: string): Promise<string[]> {
    return this.#io(() => this.#reads.recordingIds(name))
  }
  traceInfo(id: string): Promise<TraceInfo | undefined> {
    return this.#io(() => this.#reads.traceInfo(id))
  }
  exchanges(id: string, fromSeq: number, limit: number): Promise<Exchange[]> {
    return this.#io(() => this.#reads.exchanges(id, fromSeq, limit))
  }
  lookup(id: string, key: string): Promise<number[]> {
    return this.#io(() => this.#reads.lookup(id, key))
  }
  identityKeys(id: string, afterKey: string, limit: number): Promise<Array<[string, number[]]>> {
    return this.#io(() => this.#reads.identityKeys(id, afterKey, limit))
  }
  body(digest: string, size?: number): Promise<StoredBody | undefined> {
    return this.#io(() => this.#reads.body(digest, size))
  }
  piece(sha: string): Promise<Uint8Array | undefined> {
    return this.#reads.piece(sha)
  }

  putPiece(): Promise<void> {
    return this.#readOnly()
  }
  beginTrace(): Promise<void> {
    return this.#readOnly()
  }
  append(): Promise<void> {
    return this.#readOnly()
  }
  closeRecording(): Promise<void> {
    return this.#readOnly()
  }
  appendChunk(): Promise<void> {
    return this.#readOnly()
  }
  putTrace(): Promise<void> {
    return this.#readOnly()
  }
  deleteTrace(): Promise<boolean> {
    return this.#readOnly()
  }
  deleteRecording(): Promise<boolean> {
    return this.#readOnly()
  }
  /** Only a dry run: what gc would remove. */
  gc(options: { dryRun: boolean }): Promise<GcReport> {
    if (!options.dryRun) return this.#readOnly()
    return this.#io(() =>
      collectGarbage({
        kv: viewKv(this.#view),
        piecesDir: join(this.location, 'pieces'),
        dryRun: true,
        referencedSince: new Set(),
        exclusive: (fn) => fn(),
        deleteKeys: () => this.#readOnly(),
        holdPieces: async () => () => {},
      }),
    )
  }

  #readOnly(): Promise<never> {
    return Promise.reject(readOnlyError(this.location))
  }

  async #io<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn()
    } catch (err) {
      throw mapError(this.location, err)
    }
  }
}

/** TR_STORE_READ_ONLY: a write through a store opened read-only. */
export function readOnlyError(location: string): ToolReplayError {
  return new ToolReplayError(
    ErrorCodes.STORE_READ_ONLY,
    `The trace store at ${location} was opened read-only, so nothing can be written through it. Open it with openStore(dir) (without readOnly) to record, import or delete.`,
    { details: { location } },
  )
}

function mapError(location: string, err: unknown): unknown {
  if (err instanceof ToolReplayError) return err
  const code = (err as NodeJS.ErrnoException).code
  if (code === 'ENOENT') return new StoreChanged(`a file of the store at ${location} vanished while it was read`)
  if (err instanceof TableDamage) {
    return new ToolReplayError(
      ErrorCodes.STORE_CORRUPT,
      `The trace store at ${location} is damaged: ${err.message}. Nothing was changed. Run \`tr-proxy fsck --store ${location} --export-to DIR\` to rescue every trace that is intact on disk.`,
      { cause: err, details: { location, files: [err.file], why: err.message } },
    )
  }
  return new ToolReplayError(ErrorCodes.STORE_IO, `Failed to read the trace store at ${location}: ${(err as Error).message}. Check permissions.`, {
    cause: err,
    details: { location },
  })
}
