/**
 * `openStore`: the default, LevelDB-backed TraceStore, shared safely by many processes.
 *
 * LevelDB admits one process per directory. The first process to open a store directory owns the
 * LevelDB and serves the TraceStore operations on a Unix socket (store/store-rpc.ts); a process that
 * finds the directory locked (LEVEL_LOCKED) becomes a client of that socket. Test workers recording in
 * parallel and a CLI reading while a proxy runs all work this way, with no setup. The RPC is our own,
 * at the TraceStore level: many-level is built for abstract-level 1 (level 10 is abstract-level 3), and
 * a key-value RPC would leave each client racing the others through close()'s read-then-batch.
 *
 * Ownership moves: when the owner closes (its last local handle) it hands over by dropping its clients
 * and releasing the lock; when it dies, the OS releases the lock. Either way a client whose request
 * was cut off re-runs acquisition (take the lock, else connect) with bounded backoff and resends it;
 * every operation is idempotent under resend. The owner never waits for clients to leave, so a short
 * CLI run that happened to become owner cannot keep a proxy's store, or its own process, hostage.
 *
 * A store opened read-only never opens LevelDB (which rewrites its directory on every open): with an owner,
 * it reads through the owner; without one, it reads the files themselves (file-backend.ts), after the same
 * check a writer's open makes (store-files.ts).
 *
 * Bodies of replaced or deleted traces stay until `gc` (gc.ts), which the owner runs between writes.
 */
import { createHash } from 'node:crypto'
import { lstat, mkdir } from 'node:fs/promises'
import { dirname, join, resolve } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { ErrorCodes, isToolReplayError, ToolReplayError } from '../trace/index.ts'
import { FileBackend, readOnlyError, StoreChanged } from './file-backend.ts'
import { isLockedError, LevelBackend, storeNotFound } from './level-backend.ts'
import { privateDirProblem, privateTempDir } from './private-dir.ts'
import { assertNoLinks, filesCorrupt, inspectStore } from './store-files.ts'
import type { StoreOps } from './store-ops.ts'
import { ConnectionLost, remoteOps, StoreConnection, type StoreServer, serveBackend } from './store-rpc.ts'
import type { TraceStore } from './trace-store.ts'
import { createTraceStore, routedOps } from './trace-store-impl.ts'

/** Options for `openStore`. */
export interface OpenStoreOptions {
  /** How long to keep trying to take over or reach the owning process before TR_STORE_LOCKED. Default 10000. */
  acquireTimeoutMs?: number
  /**
   * Create the store when there is none (default true). Read-only commands pass false: a missing store is
   * then TR_STORE_NOT_FOUND and nothing is created on disk.
   */
  create?: boolean
  /**
   * Open read-only (implies `create: false`): nothing in the directory is created, renamed, rewritten or
   * deleted, and writes through the store throw TR_STORE_READ_ONLY. Without a process that owns the store,
   * the files are read directly.
   */
  readOnly?: boolean
}

/** Where the store lives when no directory is given: `.tool-replay/store` under the working directory. */
export function defaultStoreDir(): string {
  return join(process.cwd(), '.tool-replay', 'store')
}

/**
 * The socket a store's owner serves on: `<dir>/store.sock`, or a name in the temp dir derived from the
 * directory when that path is too long for a Unix socket (about 107 bytes on Linux, 103 on macOS).
 */
export function storeSocketPath(dir: string): string {
  const abs = resolve(dir)
  const hash = createHash('sha256').update(abs).digest('hex').slice(0, 24)
  if (process.platform === 'win32') return `\\\\.\\pipe\\tool-replay-${hash}`
  const inDir = join(abs, 'store.sock')
  return Buffer.byteLength(inDir) <= 100 ? inDir : join(privateTempDir(), `${hash}.sock`)
}

/**
 * The shared temp dir is writable by every user, so a fallback socket lives in a per-user directory
 * that must be ours and private: otherwise another user could read traces or serve forged ones.
 */
async function assertPrivateSocketDir(dir: string, socketPath: string): Promise<void> {
  const parent = dirname(socketPath)
  if (parent === dir) return
  const problem = await privateDirProblem(parent)
  if (problem) {
    throw new ToolReplayError(
      ErrorCodes.STORE_IO,
      `Refusing to share the trace store at ${dir} through ${parent}: that directory is not private to this user (${problem}). Remove it, or use a shorter --store path so the socket can live inside the store.`,
      { details: { location: dir, socket: socketPath } },
    )
  }
}

/**
 * Opens the trace store at `dir`, as its owner or as a client of the process that owns it.
 * @example
 * const store = await openStore()              // .tool-replay/store
 * const trace = await store.readTrace('checkout')
 * await store.close()
 */
export async function openStore(dir: string = defaultStoreDir(), options: OpenStoreOptions = {}): Promise<TraceStore> {
  const opened = await openStoreNode(dir, options)
  return createTraceStore(
    opened.dir,
    (fn) => opened.node.run(fn),
    () => opened.node.release(),
    options.readOnly === true ? () => readOnlyError(opened.dir) : undefined,
  )
}

/**
 * The store's operations themselves (fsck, benchmarks), with the same ownership and fail-over as openStore.
 * `close` releases this process's hold on the store.
 */
export async function openStoreOps(dir: string = defaultStoreDir(), options: OpenStoreOptions = {}): Promise<{ ops: StoreOps; close: () => Promise<void> }> {
  const opened = await openStoreNode(dir, options)
  return { ops: routedOps(opened.dir, (fn) => opened.node.run(fn)), close: () => opened.node.release() }
}

async function openStoreNode(dir: string, options: OpenStoreOptions): Promise<{ dir: string; node: StoreNode }> {
  const abs = resolve(dir)
  const readOnly = options.readOnly === true
  const create = options.create !== false && !readOnly
  if (create) {
    // Traces can hold what redaction did not know to remove: a new store is private to this user.
    // (An existing directory keeps the mode it has.)
    await mkdir(abs, { recursive: true, mode: 0o700 }).catch(() => {})
  } else if (!(await isDirectory(abs))) {
    throw storeNotFound(abs)
  }
  const key = `${abs}\0${readOnly}`
  let node = nodes.get(key)
  if (node === undefined) {
    node = new StoreNode(abs, key, options.acquireTimeoutMs ?? 10_000, create, readOnly)
    nodes.set(key, node)
  }
  node.refs++
  try {
    await node.ready()
  } catch (err) {
    await node.release()
    throw err
  }
  return { dir: abs, node }
}

async function isDirectory(path: string): Promise<boolean> {
  return (await lstat(path).catch(() => undefined))?.isDirectory() === true
}

/** One per store directory (and mode) per process, so two `openStore()` calls in a process share the lock. */
const nodes = new Map<string, StoreNode>()

type Role =
  | { kind: 'owner'; backend: LevelBackend; server: StoreServer }
  | { kind: 'client'; conn: StoreConnection; ops: StoreOps }
  | { kind: 'reader'; backend: FileBackend }

/**
 * How long damage found by the open check must persist before the store is refused: another process may be
 * creating the store (its MANIFEST comes a moment before CURRENT) or opening it (LevelDB rewrites the files
 * the check reads) right then; it is the owner a moment later.
 */
const DAMAGE_SETTLE_MS = 1000

/** A read-only view of the files, after the same check a writer's open makes. */
async function openReader(dir: string): Promise<FileBackend> {
  const files = await inspectStore(dir)
  assertNoLinks(files)
  if (files.problems.length > 0) throw filesCorrupt(dir, files.problems)
  if (files.empty) throw storeNotFound(dir)
  return FileBackend.open(files)
}

// Resends of a request cut off by a lost owner; each resend first re-acquires, which has its own timeout.
const MAX_RESENDS = 8

class StoreNode {
  readonly dir: string
  readonly socketPath: string
  readonly #key: string
  readonly #timeoutMs: number
  readonly #create: boolean
  readonly #readOnly: boolean
  refs = 0
  #role: Promise<Role> | undefined

  constructor(dir: string, key: string, timeoutMs: number, create: boolean, readOnly: boolean) {
    this.dir = dir
    this.#key = key
    this.socketPath = storeSocketPath(dir)
    this.#timeoutMs = timeoutMs
    this.#create = create
    this.#readOnly = readOnly
  }

  async ready(): Promise<void> {
    await this.#current()
  }

  /** Runs an operation on the LevelDB if this process owns it, else on the owner, failing over as needed. */
  async run<T>(fn: (ops: StoreOps) => Promise<T>): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      const current = this.#current()
      const role = await current
      if (role.kind === 'owner') return fn(role.backend)
      try {
        return await fn(role.kind === 'client' ? role.ops : role.backend)
      } catch (err) {
        if (!(err instanceof ConnectionLost) && !(err instanceof StoreChanged)) throw err
        if (attempt >= MAX_RESENDS) throw this.#locked(err)
        // Only the first of several cut-off calls drops the role; the others then share the new one.
        if (this.#role === current) {
          this.#role = undefined
          if (role.kind === 'client') role.conn.close()
          else void role.backend.close()
        }
      }
    }
  }

  async release(): Promise<void> {
    if (--this.refs > 0) return
    if (nodes.get(this.#key) === this) nodes.delete(this.#key)
    const pending = this.#role
    this.#role = undefined
    const role = await pending?.catch(() => undefined)
    if (role?.kind === 'owner') {
      // Order matters: stop serving and remove the socket before releasing the lock, so the socket a
      // new owner creates is never unlinked by this one.
      await role.server.close()
      await role.backend.close()
    } else if (role?.kind === 'client') {
      role.conn.close()
    } else if (role?.kind === 'reader') {
      await role.backend.close()
    }
  }

  #current(): Promise<Role> {
    if (this.#role === undefined) {
      const p = this.#acquire()
      this.#role = p
      p.catch(() => {
        if (this.#role === p) this.#role = undefined
      })
    }
    return this.#role
  }

  /**
   * An owner that answers comes first (every process then reads and writes through it); without one, this
   * process reads the files (read-only) or becomes the owner. Both check the files first (store-files.ts).
   */
  async #acquire(): Promise<Role> {
    const deadline = Date.now() + this.#timeoutMs
    let delay = 5
    let last: unknown
    let damagedSince: number | undefined
    for (;;) {
      try {
        await assertPrivateSocketDir(this.dir, this.socketPath)
        const conn = await StoreConnection.connect(this.socketPath)
        return { kind: 'client', conn, ops: remoteOps(conn, this.dir) }
      } catch (err) {
        if (err instanceof ToolReplayError) throw err
        // ENOENT/ECONNREFUSED: no owner, or one starting, handing over, or dead with the lock not yet free.
        last = err
      }
      try {
        return this.#readOnly ? { kind: 'reader', backend: await openReader(this.dir) } : await this.#own()
      } catch (err) {
        // A store another process is opening right now: its files move under the check.
        if (isLockedError(err) || err instanceof StoreChanged) last = err
        else if (isToolReplayError(err, ErrorCodes.STORE_CORRUPT)) {
          damagedSince ??= Date.now()
          if (Date.now() - damagedSince >= DAMAGE_SETTLE_MS) throw err
          last = err
        } else throw err
      }
      if (Date.now() >= deadline) throw isToolReplayError(last, ErrorCodes.STORE_CORRUPT) ? last : this.#locked(last)
      await sleep(delay + Math.random() * delay)
      delay = Math.min(delay * 2, 100)
    }
  }

  /** Opens the LevelDB (the raw error when another process holds its lock) and serves it. */
  async #own(): Promise<Role> {
    const backend = await LevelBackend.open(this.dir, { create: this.#create })
    try {
      await assertPrivateSocketDir(this.dir, this.socketPath)
      return { kind: 'owner', backend, server: await serveBackend(backend, this.socketPath) }
    } catch (err) {
      await backend.close()
      if (err instanceof ToolReplayError) throw err
      throw new ToolReplayError(
        ErrorCodes.STORE_IO,
        `Failed to serve the trace store at ${this.dir} on ${this.socketPath}: ${(err as Error).message}. Check that the directory (or the temp dir) allows Unix sockets.`,
        { cause: err, details: { location: this.dir } },
      )
    }
  }

  #locked(cause: unknown): ToolReplayError {
    return new ToolReplayError(
      ErrorCodes.STORE_LOCKED,
      `The trace store at ${this.dir} is locked by another process that does not answer on ${this.socketPath} (${(cause as Error)?.message ?? cause}). If a Tool Replay process is still running on it, let it finish or stop it; if it is not a Tool Replay process, stop that process or use another --store.`,
      { cause, details: { location: this.dir, socket: this.socketPath } },
    )
  }
}
